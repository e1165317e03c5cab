//! Developer automation, the cargo-xtask convention: `cargo xtask <task>`.
//!
//! * `cargo xtask ci`        — everything CI runs (format, lints, tests, CUDA build, module build, QEMU).
//! * `cargo xtask qemu-test` — the whole-stack tests in a QEMU guest (kernel module, VFIO).
//! * `cargo xtask fatbins`   — the GPU architectures in the built fatbins (`cuobjdump`).

mod ci;
mod qemu;
mod util;

use anyhow::{bail, Result};

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  ci          run what CI runs: fmt, clippy, tests, CUDA build, kernel module, QEMU tests
  qemu-test   boot a QEMU guest and run the kernel-module and VFIO tests inside it
  fatbins     check that the built fatbins hold every GPU architecture asked for
  packaged    build a user's crate against the packaged bam-gpu (cargo package, unpacked)
";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci::run(&args[1..]),
        Some("qemu-test") => qemu::run(&args[1..]),
        Some("fatbins") => ci::check_fatbins(),
        Some("packaged") => ci::check_packaged(),
        Some("-h") | Some("--help") | None => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown task `{other}`\n\n{USAGE}"),
    }
}
