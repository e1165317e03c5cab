//! `cargo xtask ci`: the checks CI runs, in order, failing fast.

use crate::util::{cargo, run};
use anyhow::Result;

pub fn run_ci(skip_qemu: bool) -> Result<()> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    run(cargo().args(["test", "--workspace"]))?;
    if !skip_qemu {
        crate::qemu::run(&[])?;
    }
    Ok(())
}

pub fn run(args: &[String]) -> Result<()> {
    let skip_qemu = args.iter().any(|a| a == "--no-qemu");
    run_ci(skip_qemu)
}
