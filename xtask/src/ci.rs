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
    if !skip_qemu {
        crate::qemu::run(&[])?;
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
