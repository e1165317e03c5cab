//! Runs the real `bam` binary against file-backed and RAM controller models: the shared
//! helpers here, the cases by subject in the modules.

mod bench;
mod doctor;
mod images;
mod transfers;
mod usage_errors;

use rand::RngCore;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn bam(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bam"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run bam")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "bam failed ({:?}): {}",
        o.status.code(),
        stderr(&o)
    );
    o
}

/// Asserts a failure with `code` and a single `bam: error:` line on stderr; returns it.
fn fails(o: &Output, code: i32) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected, got: {err}");
    assert!(lines[0].starts_with("bam: error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    lines[0].to_string()
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut v);
    v
}

/// The blocks of a model image: the file after its 4 KiB header.
fn image_data(path: &Path) -> Vec<u8> {
    let mut img = std::fs::read(path).unwrap();
    assert_eq!(
        &img[..8],
        b"BAMMODEL",
        "{} has no image header",
        path.display()
    );
    img.drain(..4096);
    img
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}
