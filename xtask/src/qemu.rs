//! `cargo xtask qemu-test`: the kernel module and the Rust driver against QEMU's emulated
//! NVMe controllers, in a guest running Debian's kernel.
//!
//! Steps (host side):
//! 1. find a Debian kernel with both its image (`linux-image-amd64`) and its headers
//!    (`linux-headers-amd64`) installed; build `kernel-module/` against the headers with
//!    `W=1` and fail on any compiler warning;
//! 2. build the guest test programs: `tests/qemu/kmod_test.c` (static) and the Rust
//!    binaries (copied with their shared libraries);
//! 3. assemble a busybox initramfs: `tests/qemu/init` as PID 1, the guest test scripts,
//!    the modules (ours and Debian's nvme, vfio-pci, vfio_iommu_type1 with dependencies);
//! 4. boot `qemu-system-x86_64 -machine q35` with `intel-iommu`, two `-device nvme`
//!    controllers backed by raw image files (two more behind a PCIe-to-PCI bridge, one
//!    more alone behind a root port with AER), KVM when `/dev/kvm` works and TCG
//!    otherwise;
//! 5. stream the serial console, require every expected `BAMTEST PASS` line and no
//!    `BAMTEST FAIL`;
//! 6. read the image files and check the data the guest wrote through our stack.
//!
//! Options: `--accel kvm|tcg|auto` (or `BAM_QEMU_ACCEL`), `--timeout SECS`,
//! `--leak-iterations N`, `--guest-ios N` (I/Os per qemu-guest-io run, default 24000),
//! `--keep` (keep `target/qemu/`), `--no-rust` (C tests only), `--only STEP[,STEP..]`
//! (run and require only these steps, plus the set-up and final checks of
//! `ALWAYS_STEPS`; the data check of step 6 is skipped when nothing announced data).
//!
//! The guest can ask the host for one thing: an error report injected at a PCIe port
//! through QEMU's monitor. A console line `BAMQMP pcie_aer_inject_error <id> <error>`
//! is passed to the QMP socket as that HMP command (nothing else is accepted), and
//! QEMU's answer is logged as `[qmp] ...`; the guest checks the effect in its own log.

use crate::util::{cargo, root};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod images;
mod initramfs;
mod kernel;

use initramfs::{build_initramfs, GuestConfig};
use kernel::{find_kernel, Kernel};

/// The images of the two controllers that share an IOMMU group (behind a bridge).
const GROUP_IMAGES: [&str; 2] = ["group0.img", "group1.img"];
const GROUP_IMAGE_BYTES: u64 = 16 << 20;

/// A fifth controller, alone behind a PCIe root port (QEMU's root ports have AER):
/// the error-report and removal steps use it. The port's QEMU id and its address
/// in the guest (bus 0, slot `AER_PORT_SLOT`).
const AER_IMAGE: &str = "aer0.img";
const AER_PORT_ID: &str = "aerrp";
const AER_PORT_SLOT: u32 = 0xa;

/// Steps that run and are required even when `--only` selects others: the set-up the
/// others need and the final checks (module unload, kernel log).
const ALWAYS_STEPS: &[&str] = &[
    "two-controllers",
    "iommu-groups",
    "nvme-driver-binds",
    "module-load-grabs-nothing",
    "bind-both",
    "stub-load",
    "rmmod-clean",
    "dmesg-clean",
];

/// Steps the guest must report as passed; a missing one fails the run.
const REQUIRED_C_STEPS: &[&str] = &[
    "two-controllers",
    "iommu-groups",
    "nvme-driver-binds",
    "module-load-grabs-nothing",
    "module-refuses-non-nvme",
    "bind-both",
    "kmod-info-0",
    "kmod-info-1",
    "kmod-nocap",
    "kmod-bar",
    "kmod-badinput",
    "kmod-gpu-absent",
    "kmod-map-leak-loop",
    "stub-load",
    "kmod-gpu-stub",
    "kmod-gpu-race",
    "kmod-revoke-mid-io",
    "kmod-unmap-mid-io",
    "kmod-unmap-mid-io-strict",
    "kmod-close-with-mappings",
    "kmod-owner-killed",
    "kmod-unbind-while-mapped",
    "kmod-rebound-works",
    "kmod-unbind-blocks-nvme",
    "kmod-noiommu",
    "kmod-shared-group",
    "kmod-aer-fatal",
    "kmod-aer-nonfatal",
    "kmod-remove-while-open",
    "kmod-rmmod-busy",
    "kmod-lockdown",
    "rmmod-clean",
    "dmesg-clean",
];

/// Steps of `tests/qemu/gpuio-tests.sh` (`bam::io::attach` through the stand-in's
/// "GPU memory", tests/qemu-gpuio) that must pass.
const REQUIRED_GPUIO_STEPS: &[&str] = &[
    "gpuio-attach-kmod-0",
    "gpuio-attach-kmod-1",
    "gpuio-revoke-kmod-0",
    "gpuio-shared-kmod-1",
];

/// Steps of `tests/qemu/file-tests.sh` (the file backend's service, `bam-file-check`, on
/// an NVMe/TCP namespace of a Linux nvmet target, a device-mapper error target and a
/// full tmpfs) that must pass.
const REQUIRED_FILE_STEPS: &[&str] = &[
    "file-nvmet-tcp",
    "file-dm-error",
    "file-enospc",
    "file-nvmet-disconnect",
];

/// Image size of each emulated controller's namespace.
const IMAGE_BYTES: u64 = 256 << 20;

struct Opts {
    accel: String,
    timeout: Duration,
    leak_iterations: u32,
    guest_ios: u64,
    keep: bool,
    rust: bool,
    only: Vec<String>,
}

fn parse(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        accel: std::env::var("BAM_QEMU_ACCEL").unwrap_or_else(|_| "auto".into()),
        timeout: Duration::from_secs(1500),
        leak_iterations: 2000,
        guest_ios: 24_000,
        keep: false,
        rust: true,
        only: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--accel" => o.accel = it.next().context("--accel needs a value")?.clone(),
            "--timeout" => {
                o.timeout =
                    Duration::from_secs(it.next().context("--timeout needs seconds")?.parse()?)
            }
            "--leak-iterations" => {
                o.leak_iterations = it.next().context("--leak-iterations needs N")?.parse()?
            }
            "--guest-ios" => o.guest_ios = it.next().context("--guest-ios needs N")?.parse()?,
            "--keep" => o.keep = true,
            "--no-rust" => o.rust = false,
            "--only" => {
                let list = it.next().context("--only needs STEP[,STEP..]")?;
                o.only
                    .extend(list.split(',').filter(|s| !s.is_empty()).map(String::from));
            }
            other => bail!("qemu-test: unknown option {other}"),
        }
    }
    if !["auto", "kvm", "tcg"].contains(&o.accel.as_str()) {
        bail!("--accel must be kvm, tcg or auto");
    }
    let known: Vec<&str> = REQUIRED_C_STEPS
        .iter()
        .chain(images::REQUIRED_RUST_STEPS)
        .chain(REQUIRED_GPUIO_STEPS)
        .chain(REQUIRED_FILE_STEPS)
        .copied()
        .collect();
    if let Some(bad) = o.only.iter().find(|s| !known.contains(&s.as_str())) {
        bail!("--only: no step named {bad}; steps: {}", known.join(" "));
    }
    Ok(o)
}

pub fn run(args: &[String]) -> Result<()> {
    let t0 = Instant::now();
    let opts = parse(args)?;
    let root = root();
    let target = target_dir(&root);
    let work = target.join("qemu");
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    fs::create_dir_all(&work)?;

    let kernel = find_kernel()?;
    eprintln!(
        "qemu-test: guest kernel {} ({})",
        kernel.version,
        kernel.vmlinuz.display()
    );

    build_module(&root, &kernel)?;
    let kmod_test = build_kmod_test(&root, &work)?;
    let rust_bins = if opts.rust {
        build_rust(&target)?
    } else {
        Vec::new()
    };

    let initramfs = work.join("initramfs.cpio");
    let guest = GuestConfig {
        leak_iterations: opts.leak_iterations,
        guest_ios: opts.guest_ios,
        rust: opts.rust,
        only: opts.only.clone(),
        always: ALWAYS_STEPS,
        aer_port: (AER_PORT_SLOT, AER_PORT_ID),
    };
    build_initramfs(
        &root, &work, &kernel, &kmod_test, &rust_bins, &guest, &initramfs,
    )?;

    let images = [work.join("nvme0.img"), work.join("nvme1.img")];
    for img in &images {
        images::create(img, IMAGE_BYTES)?;
    }
    // Two more controllers behind a PCIe-to-PCI bridge: one IOMMU group (the
    // shared-group test); their data is not checked.
    for img in GROUP_IMAGES.iter().chain([&AER_IMAGE]) {
        images::create(&work.join(img), GROUP_IMAGE_BYTES)?;
    }

    let accel = choose_accel(&opts.accel, &kernel)?;
    eprintln!("qemu-test: accelerator {accel}");
    let boot = Instant::now();
    let log = run_qemu(&work, &kernel, &initramfs, &images, &accel, opts.timeout)?;
    let guest_secs = boot.elapsed().as_secs_f64();

    let mut required: Vec<&str> = REQUIRED_C_STEPS.to_vec();
    if opts.rust {
        required.extend_from_slice(images::REQUIRED_RUST_STEPS);
        required.extend_from_slice(REQUIRED_GPUIO_STEPS);
        required.extend_from_slice(REQUIRED_FILE_STEPS);
    }
    if !opts.only.is_empty() {
        required.retain(|s| ALWAYS_STEPS.contains(s) || opts.only.iter().any(|o| o == s));
    }
    let summary = check_log(&log, &required)?;
    if opts.rust {
        let n = images::verify(&log, &images, &work.join("root/tests/data"))?;
        if n == 0 && opts.only.is_empty() {
            bail!("qemu-test: the guest announced no written data to verify");
        }
    }
    eprintln!(
        "qemu-test: PASSED ({summary}); guest {:.0} s with {accel}, total {:.0} s",
        guest_secs,
        t0.elapsed().as_secs_f64()
    );
    if !opts.keep {
        for img in &images {
            let _ = fs::remove_file(img);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------

/// Builds the module with W=1 against the guest kernel's headers and fails on any
/// warning; then compiles it (W=1, warning-free) against every other installed
/// `/usr/src/linux-headers-*-amd64` as well, so the compat shims for newer kernels are
/// compiled too (install-deps.sh installs Debian's newest 6.12 headers for this).
fn build_module(root: &Path, k: &Kernel) -> Result<()> {
    let dir = root.join("kernel-module");
    make_w1(&dir, &k.headers)?;
    for ko in ["bam_nvme.ko", "bam_p2p_stub.ko"] {
        if !dir.join(ko).is_file() {
            bail!("kernel module build produced no {ko}");
        }
    }
    eprintln!(
        "qemu-test: kernel module built warning-free with W=1 against {}",
        k.version
    );
    let mut others: Vec<PathBuf> = fs::read_dir("/usr/src")
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    others.retain(|p| {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        name.starts_with("linux-headers-")
            && name.ends_with("-amd64")
            && p.join("Makefile").is_file()
            && *p != k.headers
    });
    others.sort();
    for headers in others {
        let name = headers
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let copy = root.join("target").join("kmod-compile").join(&name);
        let _ = fs::remove_dir_all(&copy);
        copy_module_sources(&dir, &copy)?;
        make_w1(&copy, &headers)?;
        eprintln!("qemu-test: kernel module also compiles warning-free with W=1 against {name}");
    }
    Ok(())
}

/// Copies the module's sources (C files and headers, Makefile, Kbuild; not build
/// products) from `src` to `dst`, recursively.
fn copy_module_sources(src: &Path, dst: &Path) -> Result<()> {
    fs::create_dir_all(dst)?;
    for e in fs::read_dir(src)?.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() && !name.starts_with('.') {
            copy_module_sources(&p, &dst.join(&name))?;
        } else if p.is_file()
            && !name.ends_with(".mod.c")
            && (name.ends_with(".c")
                || name.ends_with(".h")
                || name == "Makefile"
                || name == "Kbuild")
        {
            fs::copy(&p, dst.join(&name))?;
        }
    }
    Ok(())
}

/// `make -C dir KDIR=headers W=1 modules`, failing on errors and on any warning.
fn make_w1(dir: &Path, headers: &Path) -> Result<()> {
    let kdir = format!("KDIR={}", headers.display());
    let _ = Command::new("make")
        .arg("-C")
        .arg(dir)
        .args([&kdir, "clean"])
        .output();
    eprintln!("+ make -C {} {kdir} W=1", dir.display());
    let out = Command::new("make")
        .arg("-C")
        .arg(dir)
        .args([&kdir, "W=1", "modules"])
        .output()
        .context("running make (apt-get install make gcc)")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!(
            "kernel module build against {} failed:\n{text}",
            headers.display()
        );
    }
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("warning:")).collect();
    if !warnings.is_empty() {
        bail!(
            "kernel module build (W=1) against {} has warnings:\n{}",
            headers.display(),
            warnings.join("\n")
        );
    }
    Ok(())
}

fn build_kmod_test(root: &Path, work: &Path) -> Result<PathBuf> {
    let out = work.join("kmod_test");
    crate::util::run(
        Command::new("gcc")
            .args(["-static", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
            .arg(root.join("kernel-module/include"))
            .arg("-o")
            .arg(&out)
            .arg(root.join("tests/qemu/kmod_test.c")),
    )?;
    Ok(out)
}

/// Cargo's target directory (`CARGO_TARGET_DIR` or `target/`).
fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => root.join(d),
        _ => root.join("target"),
    }
}

/// Builds the Rust binaries the guest runs; returns their paths.
fn build_rust(target: &Path) -> Result<Vec<PathBuf>> {
    crate::util::run(cargo().args(["build", "--release", "-p", "bam-cli", "--bin", "bam"]))?;
    crate::util::run(cargo().args([
        "build",
        "--release",
        "-p",
        "xtask",
        "--bin",
        "qemu-guest-io",
    ]))?;
    // the attach test needs the `bam` crate (nvcc at build time): its own crate
    crate::util::run(cargo().args(["build", "--release", "-p", "qemu-gpuio"]))?;
    // the file backend's service check (no GPU)
    crate::util::run(cargo().args([
        "build",
        "--release",
        "-p",
        "bam-tests",
        "--bin",
        "bam-file-check",
    ]))?;
    let bins = vec![
        target.join("release/bam"),
        target.join("release/qemu-guest-io"),
        target.join("release/qemu-gpuio"),
        target.join("release/bam-file-check"),
        PathBuf::from("/usr/sbin/dmsetup"),
    ];
    for b in &bins {
        if !b.is_file() {
            bail!("cargo build produced no {}", b.display());
        }
    }
    Ok(bins)
}

/// KVM if it can create a VM here and really boots the guest kernel, else TCG.
fn choose_accel(want: &str, k: &Kernel) -> Result<String> {
    match want {
        "kvm" | "tcg" => Ok(want.to_string()),
        _ => Ok(if kvm_works() && kvm_boots(k) {
            "kvm".into()
        } else {
            "tcg".into()
        }),
    }
}

/// Nested or half-working KVM can create VMs and still never run the guest: boot the
/// kernel without an initramfs and wait (bounded) for its first console line.
fn kvm_boots(k: &Kernel) -> bool {
    let child = Command::new("qemu-system-x86_64")
        .args(["-machine", "q35,accel=kvm", "-cpu", "host", "-m", "256"])
        .args([
            "-nographic",
            "-no-reboot",
            "-nodefaults",
            "-serial",
            "stdio",
        ])
        .arg("-kernel")
        .arg(&k.vmlinuz)
        .args([
            "-append",
            "console=ttyS0 panic=-1 rdinit=/nonexistent root=/dev/nonexistent",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else { return false };
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if line.contains("Linux version") {
                let _ = tx.send(());
                return;
            }
        }
    });
    let ok = rx.recv_timeout(Duration::from_secs(20)).is_ok();
    let _ = child.kill();
    let _ = child.wait();
    if !ok {
        eprintln!("qemu-test: /dev/kvm is there but a KVM guest does not boot; using TCG");
    }
    ok
}

fn kvm_works() -> bool {
    const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
    const KVM_CREATE_VM: libc::c_ulong = 0xAE01;
    let Ok(f) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    else {
        return false;
    };
    use std::os::fd::AsRawFd;
    // SAFETY: plain KVM ioctls on a file descriptor we own; no pointers are passed.
    unsafe {
        if libc::ioctl(f.as_raw_fd(), KVM_GET_API_VERSION, 0) != 12 {
            return false;
        }
        let vm = libc::ioctl(f.as_raw_fd(), KVM_CREATE_VM, 0);
        if vm < 0 {
            return false;
        }
        libc::close(vm);
    }
    true
}

fn run_qemu(
    work: &Path,
    k: &Kernel,
    initramfs: &Path,
    images: &[PathBuf],
    accel: &str,
    timeout: Duration,
) -> Result<String> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args([
        "-machine",
        &format!("q35,accel={accel},kernel-irqchip=split"),
    ])
    .args(["-cpu", if accel == "kvm" { "host" } else { "max" }])
    .args(["-smp", "2", "-m", "2048"])
    .args([
        "-nographic",
        "-no-reboot",
        "-nodefaults",
        "-serial",
        "stdio",
    ])
    // the vIOMMU first: DMA remapping for every device (our module and VFIO), and
    // interrupt remapping, without which vfio_iommu_type1 refuses the container
    .args(["-device", "intel-iommu,intremap=on"])
    .arg("-kernel")
    .arg(&k.vmlinuz)
    .arg("-initrd")
    .arg(initramfs)
    // slub_debug=FZP (sanity checks, red zones, poisoning) and init_on_free=1 make a
    // use-after-free in the module or the stand-in visible (a slub report, which
    // dmesg-clean rejects, or zeroed data) instead of silently reading stale memory.
    // tsc=reliable: under TCG on a busy host the clocksource watchdog can find the TSC
    // skewed and mark it unstable; the kernel then patches sched_clock's static key with
    // int3 breakpoints while the other vCPU runs through it, and TCG guests have died
    // of that patching ("Oops: int3" in sched_clock_cpu, kernel panic) mid-run.
    .args([
        "-append",
        "console=ttyS0 intel_iommu=on iommu.strict=1 slub_debug=FZP init_on_free=1 panic=-1 oops=panic loglevel=4 tsc=reliable rdinit=/init",
    ]);
    add_controllers(&mut cmd, work, images);
    let qmp = work.join("qmp.sock");
    let _ = fs::remove_file(&qmp);
    cmd.arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", qmp.display()));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    eprintln!("+ {cmd:?}");
    let mut child = cmd
        .spawn()
        .context("starting qemu-system-x86_64 (apt-get install qemu-system-x86)")?;
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            let _ = tx.send(line);
        }
    });
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            let _ = tx2.send(format!("[qemu stderr] {line}"));
        }
    });

    let mut log = String::new();
    let mut logfile = fs::File::create(work.join("console.log"))?;
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let line = line.trim_end_matches('\r').to_string();
                println!("{line}");
                writeln!(logfile, "{line}")?;
                log.push_str(&line);
                log.push('\n');
                if let Some(req) = line.split_once("BAMQMP ").map(|(_, r)| r.trim()) {
                    let answer = match qmp_inject(&qmp, req) {
                        Ok(a) => format!("[qmp] {req}: {a}"),
                        Err(e) => format!("[qmp] {req}: FAILED: {e:#}"),
                    };
                    println!("{answer}");
                    writeln!(logfile, "{answer}")?;
                    log.push_str(&answer);
                    log.push('\n');
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() > deadline {
            timed_out = true;
            let _ = child.kill();
            break;
        }
    }
    let status = child.wait()?;
    if timed_out {
        bail!(
            "qemu-test: guest did not finish within {} s (log: target/qemu/console.log)",
            timeout.as_secs()
        );
    }
    if !status.success() {
        bail!("qemu exited with {status}");
    }
    Ok(log)
}

/// The guest's NVMe controllers: one per image of `images` on the root bus; two behind a
/// PCIe-to-PCI bridge, in one IOMMU group; one alone behind a root port with AER.
fn add_controllers(cmd: &mut Command, work: &Path, images: &[PathBuf]) {
    for (i, img) in images.iter().enumerate() {
        cmd.args([
            "-drive",
            &format!("file={},if=none,id=nvm{i},format=raw", img.display()),
        ])
        .args(["-device", &format!("nvme,serial=bamtest{i},drive=nvm{i}")]);
    }
    // A root port, a PCIe-to-PCI bridge below it and two controllers on the bridge's
    // conventional bus: they reach the IOMMU with the bridge's requester id, so Linux
    // puts them in one IOMMU group. They enumerate after the two above (a higher bus).
    cmd.args([
        "-device",
        "pcie-root-port,id=grprp,bus=pcie.0,chassis=9,addr=0x9",
        "-device",
        "pcie-pci-bridge,id=grpbr,bus=grprp",
    ]);
    for (i, img) in GROUP_IMAGES.iter().enumerate() {
        cmd.args([
            "-drive",
            &format!(
                "file={},if=none,id=grp{i},format=raw",
                work.join(img).display()
            ),
        ])
        .args([
            "-device",
            &format!(
                "nvme,serial=bamgroup{i},drive=grp{i},bus=grpbr,addr={}",
                i + 1
            ),
        ]);
    }
    // The fifth controller, alone behind a root port with AER: the guest's error
    // injections (pcie_aer_inject_error at the port) and removal steps use it.
    cmd.args([
        "-device",
        &format!("pcie-root-port,id={AER_PORT_ID},bus=pcie.0,chassis=10,addr={AER_PORT_SLOT:#x},x-speed=5"),
        "-drive",
        &format!(
            "file={},if=none,id=aer0,format=raw",
            work.join(AER_IMAGE).display()
        ),
        "-device",
        &format!("nvme,serial=bamaer0,drive=aer0,bus={AER_PORT_ID}"),
    ]);
}

/// Passes a guest's request `pcie_aer_inject_error <id> <error>` to QEMU's monitor
/// through the QMP socket (`human-monitor-command`: QEMU has no QMP command for it);
/// returns QEMU's answer (empty output means the error was injected). Any other
/// request is refused.
fn qmp_inject(sock: &Path, req: &str) -> Result<String> {
    use std::os::unix::net::UnixStream;
    let words: Vec<&str> = req.split_whitespace().collect();
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    };
    if words.len() != 3 || words[0] != "pcie_aer_inject_error" || !words.iter().all(|w| plain(w)) {
        bail!("refused: only `pcie_aer_inject_error <id> <error>` is passed to QEMU");
    }
    let mut s =
        UnixStream::connect(sock).with_context(|| format!("connecting {}", sock.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(s.try_clone()?);
    // a reply, skipping asynchronous events
    let mut reply = || -> Result<String> {
        loop {
            let mut l = String::new();
            if r.read_line(&mut l)? == 0 {
                bail!("QMP socket closed");
            }
            if l.contains("\"return\"") || l.contains("\"error\"") || l.contains("\"QMP\"") {
                return Ok(l.trim().to_string());
            }
        }
    };
    reply()?; // greeting
    s.write_all(b"{\"execute\":\"qmp_capabilities\"}\n")?;
    reply()?;
    s.write_all(
        format!(
            "{{\"execute\":\"human-monitor-command\",\"arguments\":{{\"command-line\":\"{}\"}}}}\n",
            words.join(" ")
        )
        .as_bytes(),
    )?;
    let answer = reply()?;
    if answer.contains("\"error\"") {
        bail!("{answer}");
    }
    Ok(answer)
}

/// Checks the console log; returns the guest's summary line.
fn check_log(log: &str, required: &[&str]) -> Result<String> {
    if !log.contains("BAMTEST-BOOTED") {
        bail!("the guest never reached its init (see target/qemu/console.log)");
    }
    let mut passed = BTreeSet::new();
    let mut failed = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.strip_prefix("BAMTEST PASS ") {
            passed.insert(rest.split_whitespace().next().unwrap_or("").to_string());
        } else if let Some(rest) = line.strip_prefix("BAMTEST FAIL ") {
            failed.push(rest.to_string());
        }
    }
    let summary = log
        .lines()
        .find_map(|l| l.strip_prefix("BAMTEST-DONE "))
        .map(str::to_string);
    // The library logs at ERROR level only for things that must never happen in a
    // passing run (e.g. an IOMMU unmap the kernel refused): any such line fails the test.
    let library_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("bam_nvme::"))
        .collect();
    failed.extend(
        library_errors
            .iter()
            .map(|l| format!("library error logged: {}", l.trim())),
    );
    let missing: Vec<&&str> = required.iter().filter(|s| !passed.contains(**s)).collect();
    if !failed.is_empty() || !missing.is_empty() || summary.is_none() {
        bail!(
            "qemu-test FAILED: failed steps {:?}; required steps not passed {:?}; guest {}",
            failed,
            missing,
            summary.as_deref().unwrap_or("did not finish")
        );
    }
    Ok(summary.unwrap())
}
