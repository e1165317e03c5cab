//! `cargo xtask ci`: the checks CI runs, in order, failing fast.

use crate::util::{cargo, run as sh};
use anyhow::Result;

/// Flags: `--no-qemu` skips the QEMU guest tests.
pub fn run(args: &[String]) -> Result<()> {
    let skip_qemu = args.iter().any(|a| a == "--no-qemu");
    sh(cargo().args(["fmt", "--all", "--", "--check"]))?;
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
    if !skip_qemu {
        crate::qemu::run(&[])?;
    }
    Ok(())
}
