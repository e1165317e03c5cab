//! The guest's initramfs for `cargo xtask qemu-test`: busybox, `tests/qemu/init` as PID 1,
//! the guest test scripts and programs with their shared libraries, our modules and the
//! Debian modules the steps load (with their dependencies).

use super::images;
use super::kernel::Kernel;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(super) struct GuestConfig {
    pub(super) leak_iterations: u32,
    pub(super) guest_ios: u64,
    pub(super) rust: bool,
    /// `--only`: empty runs every step
    pub(super) only: Vec<String>,
    /// Steps that run even when `only` selects others.
    pub(super) always: &'static [&'static str],
    /// The AER root port: its slot on bus 0 and its QEMU id.
    pub(super) aer_port: (u32, &'static str),
}

pub(super) fn build_initramfs(
    root: &Path,
    work: &Path,
    k: &Kernel,
    kmod_test: &Path,
    rust_bins: &[PathBuf],
    cfg: &GuestConfig,
    out: &Path,
) -> Result<()> {
    let r = work.join("root");
    for d in [
        "bin",
        "sbin",
        "usr/bin",
        "proc",
        "sys",
        "dev",
        "tmp",
        "tests",
        "lib/modules/extra",
        "etc",
    ] {
        fs::create_dir_all(r.join(d))?;
    }
    let busybox = Path::new("/bin/busybox");
    if !busybox.is_file() {
        bail!("/bin/busybox missing: apt-get install busybox-static");
    }
    copy_exec(busybox, &r.join("bin/busybox"))?;
    // the kernel runs /sbin/modprobe for request_module()
    std::os::unix::fs::symlink("/bin/busybox", r.join("sbin/modprobe"))?;
    std::os::unix::fs::symlink("busybox", r.join("bin/sh"))?;
    copy_exec(&root.join("tests/qemu/init"), &r.join("init"))?;
    for f in fs::read_dir(root.join("tests/qemu"))? {
        let p = f?.path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let rust_only = name == "io-tests.sh"
            || name == "vfio-tests.sh"
            || name == "gpuio-tests.sh"
            || name == "file-tests.sh";
        if p.extension().is_some_and(|e| e == "sh") && (cfg.rust || !rust_only) {
            copy_exec(&p, &r.join("tests").join(p.file_name().unwrap()))?;
        }
    }
    copy_exec(kmod_test, &r.join("tests/kmod_test"))?;
    images::write_patterns(&r.join("tests/data"))?;
    for ko in ["bam_nvme.ko", "bam_p2p_stub.ko"] {
        fs::copy(
            root.join("kernel-module").join(ko),
            r.join("lib/modules/extra").join(ko),
        )?;
    }
    fs::write(
        r.join("tests/config"),
        format!(
            "LEAK_ITERATIONS={}\nGUEST_IOS={}\nGPUIO_IOS={}\nHAVE_RUST={}\nHAVE_BAM_BIND={}\n\
             ONLY=\"{}\"\nALWAYS=\"{}\"\nAER_PORT=0000:00:{:02x}.0\nAER_QMP_ID={}\n",
            cfg.leak_iterations,
            cfg.guest_ios,
            (cfg.guest_ios / 6).max(200),
            u8::from(cfg.rust),
            u8::from(cfg.rust && images::HAVE_BAM_BIND),
            cfg.only.join(" "),
            cfg.always.join(" "),
            cfg.aer_port.0,
            cfg.aer_port.1
        ),
    )?;

    copy_kernel_modules(k, &r)?;

    for bin in rust_bins {
        let name = bin.file_name().unwrap();
        let dir = if name == "bam" { "bin" } else { "tests" };
        copy_exec(bin, &r.join(dir).join(name))?;
        for lib in shared_libs(bin)? {
            let dest = r.join(lib.strip_prefix("/").unwrap_or(&lib));
            if !dest.exists() {
                fs::create_dir_all(dest.parent().unwrap())?;
                fs::copy(&lib, &dest).with_context(|| format!("copying {}", lib.display()))?;
            }
        }
    }

    // newc archive, owned by root, uncompressed (the kernel unpacks it fastest)
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd '{}' && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 > '{}'",
            r.display(),
            out.display()
        ))
        .status()
        .context("running cpio (apt-get install cpio)")?;
    if !status.success() {
        bail!("building the initramfs failed");
    }
    eprintln!(
        "qemu-test: initramfs {} ({:.1} MiB)",
        out.display(),
        fs::metadata(out)?.len() as f64 / (1 << 20) as f64
    );
    Ok(())
}

fn copy_exec(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// Shared libraries (and the dynamic loader) a binary needs, from `ldd`.
fn shared_libs(bin: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(bin)
        .output()
        .context("running ldd")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line
                .split_whitespace()
                .next()
                .filter(|p| p.starts_with('/')),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            let p = PathBuf::from(p);
            libs.push(p.clone());
            // keep the symlinked name and what it points to
            if let Ok(real) = fs::canonicalize(&p) {
                if real != p {
                    libs.push(real);
                }
            }
        }
    }
    Ok(libs)
}

/// Debian modules the guest loads, with their dependencies (from modules.dep).
const GUEST_MODULES: &[&str] = &[
    "nvme",
    "vfio-pci",
    "vfio_iommu_type1",
    "crct10dif_generic",
    "crct10dif-pclmul",
    "crc64_rocksoft_generic",
    // the file backend's steps: an NVMe/TCP target and initiator, device-mapper
    "configfs",
    "nvmet",
    "nvmet-tcp",
    "nvme-tcp",
    "dm-mod",
    // `bam bind` refusing a namespace with a mounted file system (ext4 asks for crc32c
    // at mount time, not through modules.dep)
    "ext4",
    "crc32c_generic",
];

fn copy_kernel_modules(k: &Kernel, r: &Path) -> Result<()> {
    let dep = fs::read_to_string(k.modules.join("modules.dep"))?;
    let norm = |s: &str| s.replace('-', "_");
    let mut by_name: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for line in dep.lines() {
        let Some((path, deps)) = line.split_once(':') else {
            continue;
        };
        let base = Path::new(path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let name = norm(base.split(".ko").next().unwrap());
        by_name.insert(
            name,
            (
                path.to_string(),
                deps.split_whitespace().map(String::from).collect(),
            ),
        );
    }
    let mut files = BTreeSet::new();
    for m in GUEST_MODULES {
        let Some((path, deps)) = by_name.get(&norm(m)) else {
            if m.starts_with("crc") {
                continue; // optional helpers; built in on some kernels
            }
            bail!("module {m} not found in {}", k.modules.display());
        };
        files.insert(path.clone());
        files.extend(deps.iter().cloned());
    }
    let dest_root = r.join("lib/modules").join(&k.version);
    for f in &files {
        let dest = dest_root.join(f);
        fs::create_dir_all(dest.parent().unwrap())?;
        fs::copy(k.modules.join(f), &dest).with_context(|| format!("copying module {f}"))?;
    }
    for f in [
        "modules.order",
        "modules.builtin",
        "modules.builtin.modinfo",
    ] {
        if k.modules.join(f).is_file() {
            fs::copy(k.modules.join(f), dest_root.join(f))?;
        }
    }
    crate::util::run(Command::new("depmod").arg("-b").arg(r).arg(&k.version))
        .context("depmod (apt-get install kmod)")?;
    Ok(())
}
