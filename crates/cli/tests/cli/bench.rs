//! `bam bench` and `bam plot` without a GPU: help, options checked first, clean errors.

use super::*;

#[cfg(feature = "gpu")]
#[test]
fn bench_help_documents_both_forms() {
    let dir = tempfile::tempdir().unwrap();
    let h = stdout(&ok(bam(dir.path(), &["bench", "--help"])));
    for s in [
        "bam bench [OPTIONS]",
        "bam bench cache [OPTIONS]",
        "--device",
        "--rw",
        "--hit-size",
        "--line",
    ] {
        assert!(h.contains(s), "bench --help lacks {s}: {h}");
    }
    let h = stdout(&ok(bam(dir.path(), &["bench", "cache", "--help"])));
    for s in [
        "hit",
        "miss",
        "latency",
        "linear",
        "random",
        "cla",
        "cache-line-aware",
        "HBM",
        "zero-copy",
        "wrong",
        "NVIDIA GPU",
        "Examples:",
        "bam bench cache --hit-size 256M",
        "--random-per-thread",
        "--latency-samples",
        "--miss-slots",
        "--sim-sms",
        "--output",
        "[default: 4096,16384,65536,131072,262144]",
    ] {
        assert!(h.contains(s), "bench cache --help lacks {s}: {h}");
    }
    // The raw I/O benchmark's flags and the subcommand do not mix.
    assert_eq!(
        bam(dir.path(), &["bench", "--rw", "randread", "cache"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        bam(dir.path(), &["bench", "cache", "--rw", "randread"])
            .status
            .code(),
        Some(2)
    );
}

/// Bad options are usage errors (exit 2) found before the GPU is looked at: on a machine
/// without one, checking the GPU first would give the no-GPU error (exit 1) instead.
#[cfg(feature = "gpu")]
#[test]
fn bench_cache_rejects_bad_options_before_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for (args, needle) in [
        (&["--line", "1000"][..], "line size 1000 B"),
        (&["--line", "128K"][..], "line size 131072 B"),
        (&["--threads", "0"][..], "thread count 0"),
        (&["--threads", "4096,1000"][..], "multiple of 256"),
        (&["--hit-size", "1000"][..], "hit data size 1000 B"),
        (&["--miss-size", "0"][..], "miss data size 0 B"),
        (&["--miss-slots", "0"][..], "slots"),
        (&["--reps", "0"][..], "reps"),
        (&["--random-per-thread", "0"][..], "random reads"),
        (&["--latency-samples", "0"][..], "latency samples"),
        (&["--queues", "0"][..], "queues"),
        (&["--sim-sms", "0"][..], "SMs"),
    ] {
        let mut a = vec!["bench", "cache", "--output", "r.json"];
        a.extend_from_slice(args);
        let line = fails(&bam(p, &a), 2);
        assert!(line.contains("cannot run the cache benchmark"), "{line}");
        assert!(line.contains(needle), "{args:?}: {line}");
        assert!(line.contains("bam bench cache --help"), "{line}");
    }
    // With --json the error is JSON on stdout too.
    let o = bam(p, &["bench", "cache", "--line", "1000", "--json"]);
    fails(&o, 2);
    assert!(json(&o)["error"]["cause"]
        .as_str()
        .unwrap()
        .contains("line size 1000 B"));
    // Malformed values are refused by the parser, naming the flag.
    for (flag, value, needle) in [
        ("--hit-size", "foo", "a size starts with a whole number"),
        ("--miss-size", "1GB", "binary"),
        ("--line", "4X", "unknown unit"),
        ("--threads", "4096,x", "`x` is not a whole number"),
        ("--reps", "two", "--reps <N>"),
    ] {
        let o = bam(p, &["bench", "cache", flag, value]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
        assert!(err.contains(needle), "{flag} {value}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!p.join("r.json").exists(), "no report for rejected options");
}

#[cfg(feature = "gpu")]
#[test]
fn bench_cache_without_a_gpu_is_a_clean_error() {
    if bam::gpu_available() {
        eprintln!("skipped: this machine has a GPU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let o = bam(p, &["bench", "cache", "--output", "r.json"]);
    let line = fails(&o, 1);
    assert!(line.contains("cannot run the cache benchmark"), "{line}");
    assert!(line.contains("no NVIDIA GPU"), "{line}");
    assert!(line.contains(" — "), "{line}");
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    assert!(!p.join("r.json").exists());
    let o = bam(p, &["bench", "cache", "--json"]);
    fails(&o, 1);
    assert!(json(&o)["error"]["cause"]
        .as_str()
        .unwrap()
        .contains("no NVIDIA GPU"));
}

/// The GPU device grammar is checked before the GPU is touched: a wrong string is a usage
/// error (exit 2) that says which forms GPU threads can drive, on any machine.
#[cfg(feature = "gpu")]
#[test]
fn bench_device_strings_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let e = fails(
        &bam(dir.path(), &["bench", "--device", "vfio:0000:01:00.0"]),
        2,
    );
    assert!(
        e.contains("cannot map GPU memory") && e.contains("kmod:"),
        "{e}"
    );
    let e = fails(&bam(dir.path(), &["bench", "--device", "model:ram:1G"]), 2);
    assert!(e.contains("hostctl"), "{e}");
    let e = fails(
        &bam(dir.path(), &["bench", "--device", "hostctl:ssds=0"]),
        2,
    );
    assert!(e.contains("ssds=0"), "{e}");
    let e = fails(
        &bam(dir.path(), &["bench", "cache", "--device", "sim:nope"]),
        2,
    );
    assert!(e.contains("unknown preset"), "{e}");
    // And the CPU-side commands say where GPU backends belong.
    let e = fails(&bam(dir.path(), &["info", "--device", "hostctl:ssds=2"]), 2);
    assert!(e.contains("GPU backend"), "{e}");
}

/// `bam bench` checks every option before the GPU: these exit 2 on any machine (a GPU
/// would only be opened after them).
#[cfg(feature = "gpu")]
#[test]
fn bench_options_are_checked_before_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--rw", "foo"][..],
        &["--bs", "3"],
        &["--bs", "4KB"],
        &["--bs", "2M"],
        &["--bs", "30000000000000G"],
        &["--threads", "0"],
        &["--threads", "1,,2"],
        &["--queues", "0"],
        &["--ssds", "0"],
        &["--rwmix", "200"],
        &["--runtime", "0"],
        &["--qdepth", "1"],
        &["--ios", "0"],
        &["--device", "kmod:/dev/bam-nvme0", "--verify"],
        &["--device", "kmod:/dev/bam-nvme0", "--ssds", "2"],
        &["--output", "/nonexistent-dir/r.json"],
        &["--plot", "/nonexistent-dir/r.svg"],
    ] {
        let mut a = vec!["bench"];
        a.extend_from_slice(args);
        let o = bam(dir.path(), &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

/// `bam plot` draws saved reports of both benchmarks without a GPU; other JSON is refused.
#[test]
fn plot_saved_reports() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/baselines/plots");
    for (report, needle) in [
        ("threads-h100-7b5ecf7.json", "GPU threads"),
        ("cache-h100-046c06b.json", "hit random"),
    ] {
        let src = results.join(report);
        let out = p.join("out.svg");
        let o = ok(bam(
            p,
            &[
                "plot",
                src.to_str().unwrap(),
                "--output",
                out.to_str().unwrap(),
            ],
        ));
        assert!(stdout(&o).contains("plotted"), "{}", stdout(&o));
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(svg.starts_with("<svg"), "{report}");
        assert!(svg.contains(needle), "{report}");
    }
    std::fs::write(p.join("other.json"), "{\"x\": 1}").unwrap();
    let line = fails(&bam(p, &["plot", "other.json"]), 1);
    assert!(line.contains("not a report"), "{line}");
    assert!(!p.join("other.svg").exists());
}
