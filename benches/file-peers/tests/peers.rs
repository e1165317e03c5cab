//! The binary end to end on temporary files: the uring peer reads the right bytes
//! (buffered and O_DIRECT), --verify catches a wrong byte, pread-memcpy runs or says
//! SKIPPED, bad input is an error and never a panic.

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The pattern's key (src/pattern.rs; kvikio_read.py has it too).
const KEY: u64 = 0xB5AD_4ECE_DA1C_E2A9;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bam-file-peers"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run bam-file-peers")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A pattern file of `size` bytes in `dir`.
fn make(dir: &Path, size: u64) -> PathBuf {
    let p = dir.join("peers.bin");
    let out = run(&[
        "--make-file",
        p.to_str().expect("utf-8 path"),
        "--size",
        &size.to_string(),
    ]);
    assert!(out.status.success(), "make-file: {}", text(&out.stderr));
    p
}

/// The JSON lines a run printed.
fn lines(out: &Output) -> Vec<serde_json::Value> {
    text(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Runs the uring peer on `file` with `extra`, expecting success and one clean line.
fn uring_clean(file: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![file.to_str().expect("utf-8"), "--peer", "uring", "--verify"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let v = lines(&out);
    assert_eq!(v.len(), 1, "{}", text(&out.stdout));
    let r = v[0].clone();
    assert_eq!(r["peer"], "uring");
    assert!(r["ops"].as_u64().expect("ops") > 0, "{r}");
    assert_eq!(r["verify_errors"], 0, "{r}");
    r
}

fn direct_supported(dir: &Path) -> bool {
    let p = dir.join("probe");
    std::fs::write(&p, [0u8; 4096]).expect("probe file");
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&p)
        .is_ok()
}

#[test]
fn uring_buffered_random_reads_are_the_files_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = make(dir.path(), 4 << 20);
    let r = uring_clean(&f, &["--seconds", "0.3", "--threads", "2", "--depth", "8"]);
    assert_eq!(r["mode"], "randread");
    assert_eq!(r["direct"], false);
    for k in [
        "seconds",
        "iops",
        "gbps",
        "cpu_cores_busy",
        "cores_per_miops",
    ] {
        assert!(r[k].as_f64().expect(k) > 0.0, "{k}: {r}");
    }
}

#[test]
fn uring_direct_random_reads_are_the_files_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    if !direct_supported(dir.path()) {
        println!(
            "SKIPPED: {} does not support O_DIRECT",
            dir.path().display()
        );
        return;
    }
    let f = make(dir.path(), 4 << 20);
    let r = uring_clean(&f, &["--direct", "--seconds", "0.3", "--threads", "2"]);
    assert_eq!(r["direct"], true);
}

#[test]
fn uring_sequential_reads_cover_every_piece() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = make(dir.path(), 1 << 20);
    let r = uring_clean(
        &f,
        &[
            "--seq",
            "--bs",
            "64K",
            "--threads",
            "2",
            "--depth",
            "4",
            "--ops",
            "48",
        ],
    );
    assert_eq!(r["mode"], "seqread");
    assert_eq!(r["ops"], 48);
}

#[test]
fn a_file_that_ends_inside_a_piece_reads_only_whole_pieces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = make(dir.path(), 3 * 4096 + 100);
    uring_clean(&f, &["--ops", "500", "--threads", "3"]);
}

/// Flips one byte at `at` of `file`.
fn corrupt(file: &Path, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .expect("open");
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).expect("read");
    f.write_all_at(&[b[0] ^ 0x01], at).expect("write");
}

#[test]
fn verify_finds_a_corrupted_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = make(dir.path(), 64 << 10);
    corrupt(&f, 40_000);
    let path = f.to_str().expect("utf-8");
    for extra in [
        &["--seq", "--threads", "1", "--ops", "16"][..],
        &["--threads", "2", "--ops", "4000"][..],
    ] {
        let mut args = vec![path, "--peer", "uring", "--verify"];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{extra:?}: {}",
            text(&out.stderr)
        );
        let v = lines(&out);
        assert_eq!(v.len(), 1);
        assert!(
            v[0]["verify_errors"].as_u64().expect("verify_errors") >= 1,
            "{}",
            v[0]
        );
        assert!(
            text(&out.stderr).contains("offset 40000"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn pread_memcpy_runs_or_says_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = make(dir.path(), 1 << 20);
    let out = run(&[
        f.to_str().expect("utf-8"),
        "--peer",
        "pread-memcpy",
        "--ops",
        "64",
        "--verify",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    if stdout.starts_with("SKIPPED: pread-memcpy needs a GPU (") {
        println!("{}", stdout.trim());
        return;
    }
    let v = lines(&out);
    assert_eq!(v.len(), 1, "{stdout}");
    assert_eq!(v[0]["peer"], "pread-memcpy");
    assert_eq!(v[0]["ops"], 64);
    assert_eq!(v[0]["verify_errors"], 0);
}

#[test]
fn make_file_writes_offset_xor_key_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = make(dir.path(), 1 << 20);
    let bytes = std::fs::read(&f).expect("read");
    assert_eq!(bytes.len(), 1 << 20);
    for off in [0usize, 8, 4096, (1 << 20) - 8] {
        let w = u64::from_le_bytes(bytes[off..off + 8].try_into().expect("8 bytes"));
        assert_eq!(w, off as u64 ^ KEY, "word at {off}");
    }
}

#[test]
fn emitted_offsets_are_aligned_pieces_inside_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = make(dir.path(), 1 << 20);
    let o = dir.path().join("offsets.bin");
    let out = run(&[
        f.to_str().expect("utf-8"),
        "--emit-offsets",
        o.to_str().expect("utf-8"),
        "--ops",
        "1000",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let b = std::fs::read(&o).expect("offsets");
    assert_eq!(b.len(), 8000);
    let offs: Vec<u64> = b
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    assert!(offs.iter().all(|&x| x % 4096 == 0 && x < 1 << 20));
    assert!(offs.iter().collect::<std::collections::HashSet<_>>().len() > 200);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = make(dir.path(), 64 << 10);
    let p = f.to_str().expect("utf-8");
    let missing = dir.path().join("missing");
    let cases: Vec<Vec<&str>> = vec![
        vec![missing.to_str().expect("utf-8")],
        vec![p, "--bs", "0"],
        vec![p, "--bs", "4X"],
        vec![p, "--bs", "1000", "--direct"],
        vec![p, "--threads", "0"],
        vec![p, "--depth", "0"],
        vec![p, "--seconds", "-1"],
        vec![p, "--ops", "0"],
        vec![p, "--bs", "1M"],
        vec![p, "--seq", "--threads", "32"],
        vec!["--make-file", p],
        vec![],
    ];
    for args in cases {
        let out = run(&args);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.trim().is_empty(), "{args:?}: no message");
    }
}

#[test]
fn help_teaches_the_peers_and_the_cases() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    let h = text(&out.stdout);
    for want in [
        "uring",
        "pread-memcpy",
        "kvikio_read.py",
        "--direct --bs 4K --depth 32",
        "--warm --bs 4K --depth 32 --threads 8",
        "--seq --bs 1M",
        "--make-file",
        "--emit-offsets",
        "cores_per_miops",
    ] {
        assert!(h.contains(want), "--help lacks {want:?}");
    }
}
