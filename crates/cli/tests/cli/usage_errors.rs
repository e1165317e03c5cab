//! Help text and the errors of bad command lines, devices and addresses.

use super::*;

#[test]
fn help_teaches_device_forms_and_units() {
    let dir = tempfile::tempdir().unwrap();
    let h = stdout(&ok(bam(dir.path(), &["--help"])));
    for s in [
        "model:PATH",
        "model:ram:SIZE",
        "vfio:",
        "kmod:",
        "model:./bam-model.img,size=1G",
        "Examples:",
        "GB/s",
        "Exit codes",
    ] {
        assert!(h.contains(s), "--help lacks {s}: {h}");
    }
    for cmd in ["info", "read", "write", "load"] {
        let h = stdout(&ok(bam(dir.path(), &[cmd, "--help"])));
        assert!(h.contains("Examples:"), "{cmd} --help: {h}");
        assert!(h.contains("--device"), "{cmd} --help: {h}");
    }
    // Usage errors exit with 2.
    assert_eq!(bam(dir.path(), &["frobnicate"]).status.code(), Some(2));
    assert_eq!(bam(dir.path(), &[]).status.code(), Some(2));
}

#[test]
fn bad_device_strings_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    for dev in [
        "",
        "nonsense",
        "model:",
        "model:ram",
        "model:ram:0",
        "model:x.img,size=1GB",
        "model:x.img,lba=1000",
        "model:x.img,colour=blue",
        "model:x.img,size=1000",
        "vfio:1:2:3",
        "vfio:0000:01:00.9",
        "vfio:0000:01:20.0",
        "kmod:",
        "nvme:/dev/nvme0n1",
    ] {
        let o = bam(dir.path(), &["info", "--device", dev]);
        let line = fails(&o, 2);
        assert!(line.contains("invalid device string"), "{dev}: {line}");
    }
    // Nothing was created for the rejected model strings.
    assert!(!dir.path().join("x.img").exists());
}

#[test]
fn absent_devices_are_clean_errors() {
    let dir = tempfile::tempdir().unwrap();
    let o = bam(dir.path(), &["info", "--device", "vfio:ffff:fe:1f.7"]);
    let line = fails(&o, 1);
    assert!(line.contains("ffff:fe:1f.7"), "{line}");
    assert!(line.contains(" — "), "{line}");

    let o = bam(dir.path(), &["info", "--device", "vfio:fe:1f.7", "--json"]);
    fails(&o, 1);
    assert_eq!(json(&o)["error"]["device"], "vfio:fe:1f.7");

    let o = bam(
        dir.path(),
        &["info", "--device", "kmod:/dev/bam-nvme-absent"],
    );
    let line = fails(&o, 1);
    assert!(line.contains("kmod:/dev/bam-nvme-absent"), "{line}");

    let o = bam(dir.path(), &["info", "--device", "model:no/such/dir/x.img"]);
    let line = fails(&o, 1);
    assert!(line.contains("model:no/such/dir/x.img"), "{line}");
    let o = bam(
        dir.path(),
        &["info", "--device", "model:no/such/dir/x.img,size=1M"],
    );
    let line = fails(&o, 1);
    assert!(line.contains("cannot open or create"), "{line}");
}

#[test]
fn lba_beyond_the_namespace_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("in.bin"), b"hello").unwrap();
    let dev = "model:ram:1M"; // 2048 blocks
    let o = bam(
        p,
        &["write", "-d", dev, "--lba", "2048", "--input", "in.bin"],
    );
    let line = fails(&o, 1);
    assert!(line.contains("beyond namespace 1"), "{line}");
    assert!(
        line.contains("use a smaller --lba or a larger device"),
        "{line}"
    );

    let o = bam(
        p,
        &[
            "read", "-d", dev, "--lba", "2040", "--blocks", "9", "-o", "o.bin",
        ],
    );
    let line = fails(&o, 1);
    assert!(line.contains("LBA 2040..2049"), "{line}");
    assert!(!p.join("o.bin").exists(), "no output file on error");

    let o = bam(
        p,
        &[
            "read",
            "-d",
            dev,
            "--lba",
            "18446744073709551615",
            "--blocks",
            "2",
            "-o",
            "o.bin",
        ],
    );
    fails(&o, 1);

    let o = bam(
        p,
        &[
            "read", "-d", dev, "--lba", "0", "--blocks", "0", "-o", "o.bin",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "a zero length is a usage error");

    let o = bam(
        p,
        &[
            "read", "-d", dev, "--lba", "0", "--blocks", "1", "--nsid", "7", "-o", "o.bin",
        ],
    );
    let line = fails(&o, 1);
    assert!(line.contains("namespace 7"), "{line}");
}

#[test]
fn other_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("empty.bin"), b"").unwrap();
    let dev = "model:ram:1M";

    let line = fails(
        &bam(
            p,
            &["write", "-d", dev, "--lba", "0", "--input", "empty.bin"],
        ),
        1,
    );
    assert!(line.contains("empty"), "{line}");
    let line = fails(
        &bam(
            p,
            &["write", "-d", dev, "--lba", "0", "--input", "missing.bin"],
        ),
        1,
    );
    assert!(line.contains("missing.bin"), "{line}");
    let line = fails(&bam(p, &["load", "missing.bin", "-d", dev]), 1);
    assert!(line.contains("missing.bin"), "{line}");
    let line = fails(&bam(p, &["load", "empty.bin", "-d", dev]), 1);
    assert!(line.contains("empty"), "{line}");
    let line = fails(&bam(p, &["load", ".", "-d", dev]), 1);
    assert!(line.contains("not a regular file"), "{line}");

    // Contradictory or missing flags are usage errors (exit 2).
    fails(
        &bam(
            p,
            &[
                "read", "-d", dev, "--lba", "0", "-o", "-", "--blocks", "1", "--json",
            ],
        ),
        2,
    );
    assert_eq!(
        bam(p, &["read", "-d", dev, "--lba", "0", "-o", "x"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        bam(
            p,
            &["read", "-d", dev, "--lba", "0", "--blocks", "1", "--bytes", "1", "-o", "x"]
        )
        .status
        .code(),
        Some(2)
    );
    assert_eq!(
        bam(p, &["write", "-d", dev, "--input", "x"]).status.code(),
        Some(2)
    );
    assert_eq!(
        bam(p, &["load", "x", "--queues", "0"]).status.code(),
        Some(2)
    );
    assert_eq!(
        bam(p, &["load", "x", "--qdepth", "1"]).status.code(),
        Some(2)
    );
    assert_eq!(
        bam(p, &["read", "--lba", "-1", "--blocks", "1", "-o", "x"])
            .status
            .code(),
        Some(2)
    );
}

/// Bad command lines exit with 2 before any device is opened (the image is never made).
#[test]
fn bad_command_lines_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("f.bin"), b"data").unwrap();
    let dev = "model:img.bin,size=1M";
    for args in [
        &["read", "-d", dev, "--lba", "0", "--blocks", "0", "-o", "x"][..],
        &["read", "-d", dev, "--lba", "0", "--bytes", "0", "-o", "x"],
        &["read", "-d", dev, "--lba", "0", "--bytes", "4KB", "-o", "x"],
        &[
            "read", "-d", dev, "--lba", "0", "--blocks", "1", "--nsid", "0", "-o", "x",
        ],
        &["write", "-d", dev, "--lba", "x", "--input", "f.bin"],
        &["load", "f.bin", "-d", dev, "--qdepth", "1"],
        &["load", "f.bin", "-d", dev, "--lba", "-1"],
        &["bind", "--driver", "nvme", "0000:01:00.0"],
        &["plot"],
    ] {
        let o = bam(p, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    assert!(!p.join("img.bin").exists());
    assert!(!p.join("x").exists());
}
