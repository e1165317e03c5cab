//! `cargo xtask ci`: the checks CI runs, in order, failing fast.

use crate::util::{cargo, root, run as sh};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags: `--no-qemu` skips the QEMU guest tests.
pub fn run(args: &[String]) -> Result<()> {
    let skip_qemu = args.iter().any(|a| a == "--no-qemu");
    sh(cargo().args(["fmt", "--all", "--", "--check"]))?;
    let example = crate::util::root().join("examples/out-of-tree/Cargo.toml");
    sh(cargo()
        .args(["fmt", "--manifest-path"])
        .arg(&example)
        .args(["--", "--check"]))?;
    sh(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    sh(cargo().args(["test", "--workspace", "--exclude", "bam-tests"]))?;
    // The GPU suites, uncaptured: on a machine without a GPU they print SKIPPED, and the
    // log must show it (a bare `ok` would claim GPU paths passed that never ran).
    sh(cargo().args(["test", "-p", "bam-tests", "--", "--nocapture"]))?;
    // The CLI without its GPU feature (the CPU-side commands build and pass alone).
    sh(cargo().args(["test", "-p", "bam-cli", "--no-default-features"]))?;
    check_fatbins()?;
    // A user's crate outside the workspace: the runtime as a dependency, its own kernel
    // (prints SKIPPED here: no GPU; run on a GPU machine it checks its sum).
    let target = crate::util::root().join("target");
    sh(cargo()
        .args(["clippy", "--manifest-path"])
        .arg(&example)
        .arg("--target-dir")
        .arg(&target)
        .args(["--", "-D", "warnings"]))?;
    sh(cargo()
        .args(["run", "--manifest-path"])
        .arg(&example)
        .arg("--target-dir")
        .arg(&target))?;
    // The same user's crate against the runtime as `cargo package` ships it.
    check_packaged()?;
    if !skip_qemu {
        crate::qemu::run(&[])?;
    }
    Ok(())
}

/// The crates a user's crate needs from this workspace, in the order they depend on each
/// other: what `cargo package` must ship for a GPU application to build from the registry.
const PACKAGED: [&str; 3] = ["bam-cuda-build", "bam-nvme", "bam-gpu"];

/// Files build.rs compiles that must be in the `bam-gpu` package (a sample of each kind:
/// the runtime's kernels, the simulator's ABI beside them, the public API, its internals).
const PACKAGED_CUDA: [&str; 6] = [
    "cuda/src/sim.cu",
    "cuda/src/cache.cu",
    "cuda/src/scan.cu",
    "cuda/src/sim_abi.h",
    "cuda/include/bam/array.cuh",
    "cuda/include/bam/detail/queue.cuh",
];

/// A user's crate against the *packaged* runtime: `cargo package` the crates of
/// [`PACKAGED`] (the working tree as it is, without verification builds), unpack the
/// `.crate` files into a folder outside the workspace, and build and run a copy of
/// `examples/out-of-tree` there whose dependencies name versions, patched to the unpacked
/// packages (`[patch.crates-io]`), as if they came from crates.io. Checks that `bam-gpu`'s
/// package holds its CUDA sources and that no crate of the build comes from the
/// repository's `crates/`.
pub fn check_packaged() -> Result<()> {
    let root = root();
    let target = root.join("target");
    let version = env!("CARGO_PKG_VERSION");
    let mut package = cargo();
    package.args(["package", "--no-verify", "--allow-dirty"]);
    for p in PACKAGED {
        package.args(["-p", p]);
    }
    sh(&mut package)?;
    let work = std::env::temp_dir().join(format!("bam-packaged-user-{}", std::process::id()));
    let result = build_packaged_user(&root, &target, &work, version);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn build_packaged_user(root: &Path, target: &Path, work: &Path, version: &str) -> Result<()> {
    let crates = work.join("crates");
    std::fs::create_dir_all(&crates)?;
    let mut patches = String::new();
    for p in PACKAGED {
        let file = target.join(format!("package/{p}-{version}.crate"));
        sh(Command::new("tar")
            .arg("-xzf")
            .arg(&file)
            .arg("-C")
            .arg(&crates))?;
        patches += &format!("{p} = {{ path = \"../crates/{p}-{version}\" }}\n");
    }
    let bam = crates.join(format!("bam-gpu-{version}"));
    for f in PACKAGED_CUDA {
        if !bam.join(f).is_file() {
            bail!("the bam-gpu package lacks {f}");
        }
    }
    let mut cuda_files = Vec::new();
    list_files(&bam, Path::new("cuda"), &mut cuda_files)?;
    cuda_files.sort();
    // The user's crate: the out-of-tree example's sources, a manifest naming versions.
    let example = root.join("examples/out-of-tree");
    let user = work.join("user");
    std::fs::create_dir_all(user.join("src"))?;
    for f in ["build.rs", "kernels.cu", "src/main.rs", "Cargo.lock"] {
        std::fs::copy(example.join(f), user.join(f)).with_context(|| format!("copy {f}"))?;
    }
    std::fs::write(
        user.join("Cargo.toml"),
        format!(
            "[package]\nname = \"bam-out-of-tree-example\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             publish = false\n\n[workspace]\n\n[dependencies]\n\
             bam = {{ package = \"bam-gpu\", version = \"{version}\" }}\n\n\
             [build-dependencies]\nbam-cuda-build = \"{version}\"\n\n[patch.crates-io]\n{patches}"
        ),
    )?;
    let manifest = user.join("Cargo.toml");
    // Where every crate of the build comes from: the unpacked packages, never crates/.
    let meta = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(&manifest)
        .output()
        .context("cargo metadata")?;
    if !meta.status.success() {
        bail!(
            "cargo metadata of the packaged user's crate failed:\n{}",
            String::from_utf8_lossy(&meta.stderr)
        );
    }
    let meta = String::from_utf8_lossy(&meta.stdout);
    let repo_crates = format!("\"{}/", root.join("crates").display());
    if meta.contains(&repo_crates) {
        bail!("the packaged user's crate resolved a crate from {repo_crates}: not the package");
    }
    for p in PACKAGED {
        let unpacked = format!("{}/{p}-{version}/Cargo.toml", crates.display());
        if !meta.contains(&unpacked) {
            bail!("{p} does not come from its package ({unpacked})");
        }
    }
    sh(cargo()
        .args(["build", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target))?;
    sh(cargo()
        .args(["run", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target))?;
    println!(
        "packaged: {} packaged (--no-verify); bam-gpu-{version}.crate holds {} CUDA files:",
        PACKAGED.join(", "),
        cuda_files.len()
    );
    for f in &cuda_files {
        println!("  {f}");
    }
    println!(
        "packaged: a user's crate (examples/out-of-tree's sources, dependencies by version, \
         [patch.crates-io] to the unpacked .crate files in {}, removed afterwards) built and \
         ran with no crate from {}",
        crates.display(),
        root.join("crates").display()
    );
    Ok(())
}

/// The files under `base/rel`, recursively, as paths relative to `base`.
fn list_files(base: &Path, rel: &Path, out: &mut Vec<String>) -> Result<()> {
    let dir = base.join(rel);
    for e in std::fs::read_dir(&dir).with_context(|| format!("read {}", dir.display()))? {
        let e = e?;
        let r = rel.join(e.file_name());
        if e.file_type()?.is_dir() {
            list_files(base, &r, out)?;
        } else {
            out.push(r.display().to_string());
        }
    }
    Ok(())
}

/// Every fatbin the build embedded holds SASS for each architecture asked for
/// (`BAM_CUDA_ARCHS`, default `bam_cuda_build::DEFAULT_ARCHS`) and PTX: checked with
/// `cuobjdump --list-elf` / `--list-ptx` (installed beside nvcc by .ci/install-cuda.sh).
pub fn check_fatbins() -> Result<()> {
    let nvcc = bam_cuda_build::candidates()
        .into_iter()
        .find(|p| p.is_file())
        .context("nvcc not found (run scripts/install-deps.sh)")?;
    let cuobjdump = nvcc.with_file_name("cuobjdump");
    if !cuobjdump.is_file() {
        bail!(
            "{} is missing: run .ci/install-cuda.sh",
            cuobjdump.display()
        );
    }
    let want: Vec<String> = std::env::var("BAM_CUDA_ARCHS")
        .unwrap_or_else(|_| bam_cuda_build::DEFAULT_ARCHS.into())
        .split(',')
        .map(|a| format!("sm_{}", a.trim()))
        .collect();
    let fatbins = find_fatbins(&root().join("target/debug/build"));
    if fatbins.is_empty() {
        bail!("no fatbin under target/debug/build: did the build run?");
    }
    for f in &fatbins {
        let list = |flag: &str| -> Result<String> {
            let o = Command::new(&cuobjdump).arg(flag).arg(f).output()?;
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let elf = list("--list-elf")?;
        let missing: Vec<&String> = want
            .iter()
            .filter(|a| !elf.lines().any(|l| l.ends_with(&format!(".{a}.cubin"))))
            .collect();
        if !missing.is_empty() {
            bail!("{}: no SASS for {missing:?}; it has:\n{elf}", f.display());
        }
        if !list("--list-ptx")?.contains(".ptx") {
            bail!("{}: no PTX", f.display());
        }
    }
    println!(
        "fatbins: {} checked, each with SASS for {} and PTX",
        fatbins.len(),
        want.join(", ")
    );
    Ok(())
}

/// The fatbins of the newest build of each crate (a build tree can hold older ones,
/// from other flags or sources, in other hash-named folders).
fn find_fatbins(build: &Path) -> Vec<PathBuf> {
    use std::collections::HashMap;
    let mut newest: HashMap<String, (std::time::SystemTime, Vec<PathBuf>)> = HashMap::new();
    for e in std::fs::read_dir(build).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let krate = name
            .rsplit_once('-')
            .map_or(name.clone(), |(k, _)| k.to_string());
        let mut files = Vec::new();
        let mut when = std::time::UNIX_EPOCH;
        for f in std::fs::read_dir(e.path().join("out"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = f.path();
            if p.extension().is_some_and(|x| x == "fatbin") {
                if let Ok(t) = f.metadata().and_then(|m| m.modified()) {
                    when = when.max(t);
                }
                files.push(p);
            }
        }
        if files.is_empty() {
            continue;
        }
        match newest.get(&krate) {
            Some((t, _)) if *t >= when => {}
            _ => {
                newest.insert(krate, (when, files));
            }
        }
    }
    let mut out: Vec<PathBuf> = newest.into_values().flat_map(|(_, f)| f).collect();
    out.sort();
    out
}
