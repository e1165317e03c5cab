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
    sh(cargo().args(["test", "--workspace"]))?;
    if !skip_qemu {
        crate::qemu::run(&[])?;
    }
    Ok(())
}
