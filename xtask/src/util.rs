//! Small helpers shared by the tasks.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// The workspace root (the parent of `xtask/`).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Run a command in the workspace root, echoing it, and fail if it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("+ {cmd:?}");
    let status = cmd
        .current_dir(root())
        .status()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// `cargo` with the toolchain that runs this xtask.
pub fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}
