//! Runs the real `bam` binary against file-backed and RAM controller models.

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
fn info_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let dev = format!("model:{}/m.img,size=64M", dir.path().display());
    let text = stdout(&ok(bam(dir.path(), &["info", "--device", &dev])));
    for s in [
        "NVMe version",
        "max queue entries",
        "doorbell stride",
        "MDTS",
        "I/O queue pairs",
        "LBA FORMATS",
        "131072", // blocks of 512 bytes in 64 MiB
    ] {
        assert!(text.contains(s), "info lacks {s}: {text}");
    }
    assert_eq!(image_data(&dir.path().join("m.img")).len(), 64 << 20);

    let o = ok(bam(
        dir.path(),
        &["info", "--json", "--device", "model:ram:1G,lba=4096"],
    ));
    let v = json(&o);
    assert_eq!(v["device"], "model:ram:1G,lba=4096");
    assert_eq!(v["transport"], "model");
    assert_eq!(v["nvme_version"], "1.4.0");
    assert!(v["max_queue_entries"].as_u64().unwrap() >= 2);
    assert!(v["doorbell_stride_bytes"].as_u64().unwrap() >= 4);
    assert!(v["mdts_bytes"].as_u64().unwrap() >= 4096);
    assert!(v["io_queue_pairs"].as_u64().unwrap() >= 1);
    let ns = &v["namespaces"][0];
    assert_eq!(ns["nsid"], 1);
    assert_eq!(ns["blocks"], 262144);
    assert_eq!(ns["block_size"], 4096);
    assert_eq!(ns["capacity_bytes"], 1u64 << 30);
    assert_eq!(ns["capacity_gib"], 1.0);
    assert!((ns["capacity_gb"].as_f64().unwrap() - 1.073741824).abs() < 1e-9);
    assert_eq!(ns["lba_formats"][0]["block_size"], 4096);
    assert_eq!(ns["lba_formats"][0]["in_use"], true);
}

/// The default device is ./bam-model.img, used only once it exists: bam creates nothing
/// unasked, and the error says how to create it.
#[test]
fn default_device_is_an_existing_image_in_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for args in [
        &["info"][..],
        &["read", "--lba", "0", "--blocks", "1", "-o", "x.bin"],
        &["write", "--lba", "0", "--input", "-"],
    ] {
        let line = fails(&bam(p, args), 1);
        assert!(line.contains("device model:./bam-model.img"), "{line}");
        assert!(line.contains("no such model image"), "{line}");
        assert!(
            line.contains("--device model:./bam-model.img,size=1G"),
            "{line}"
        );
    }
    assert!(!p.join("bam-model.img").exists(), "nothing created");
    // Created once, explicitly; then the default finds it.
    ok(bam(p, &["info", "-d", "model:./bam-model.img,size=1G"]));
    let v = json(&ok(bam(p, &["info", "--json"])));
    assert_eq!(v["namespaces"][0]["capacity_bytes"], 1u64 << 30);
    let img = p.join("bam-model.img");
    assert_eq!(std::fs::metadata(img).unwrap().len(), (1 << 30) + 4096);
}

/// Mistyped paths, raw files, other geometry: each a one-line error with what to do, and
/// the files are left as they were.
#[test]
fn model_images_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let line = fails(&bam(p, &["info", "-d", "model:dsik.img"]), 1);
    assert!(
        line.contains("model image dsik.img: no such model image"),
        "{line}"
    );
    assert!(line.contains("check the path"), "{line}");
    assert!(!p.join("dsik.img").exists());

    let raw: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(p.join("raw.img"), &raw).unwrap();
    for args in [
        &["info", "-d", "model:raw.img"][..],
        &[
            "write",
            "-d",
            "model:raw.img,size=1M",
            "--lba",
            "0",
            "--input",
            "raw.img",
        ],
        &[
            "read",
            "-d",
            "model:raw.img",
            "--lba",
            "0",
            "--blocks",
            "1",
            "-o",
            "x",
        ],
    ] {
        let line = fails(&bam(p, args), 1);
        assert!(line.contains("not a bam model image"), "{line}");
        assert!(
            line.contains("bam load raw.img --device model:NEW.img,size=SIZE"),
            "{line}"
        );
    }
    assert!(
        std::fs::read(p.join("raw.img")).unwrap() == raw,
        "raw file changed"
    );
    // Importing it as the hint says.
    ok(bam(
        p,
        &["load", "raw.img", "-d", "model:new.img,size=1M", "--verify"],
    ));
    assert!(image_data(&p.join("new.img")) == raw);

    for (dev, expect, hint) in [
        (
            "model:new.img,lba=4K",
            "512-byte blocks, not the 4096",
            "drop lba=",
        ),
        ("model:new.img,size=2M", "holds 1048576 bytes", "drop size="),
    ] {
        let line = fails(&bam(p, &["info", "-d", dev]), 1);
        assert!(line.contains(expect), "{line}");
        assert!(line.contains(hint), "{line}");
    }
    // A damaged header.
    let mut img = std::fs::read(p.join("new.img")).unwrap();
    img[20] = 1;
    std::fs::write(p.join("bad.img"), &img).unwrap();
    let line = fails(&bam(p, &["info", "-d", "model:bad.img"]), 1);
    assert!(line.contains("header is corrupt"), "{line}");
    img[8] = 9;
    std::fs::write(p.join("bad.img"), &img).unwrap();
    let line = fails(&bam(p, &["info", "-d", "model:bad.img", "--json"]), 1);
    assert!(line.contains("version 9 is not supported"), "{line}");
    std::fs::write(p.join("bad.img"), &img[..1000]).unwrap();
    let line = fails(
        &bam(
            p,
            &[
                "read",
                "-d",
                "model:bad.img",
                "--lba",
                "0",
                "--blocks",
                "1",
                "-o",
                "x",
            ],
        ),
        1,
    );
    assert!(line.contains("truncated"), "{line}");
    assert!(!p.join("x").exists());
}

/// One writing command at a time per image: a second writer, or a reader, gets a clear
/// "in use" error while a `bam write` holds the image; afterwards both work.
#[test]
fn an_image_in_use_is_refused() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let dev = "model:img.bin,size=1M";
    ok(bam(p, &["info", "-d", dev]));
    let mut child = Command::new(env!("CARGO_BIN_EXE_bam"))
        .args(["write", "-d", dev, "--lba", "0", "--input", "-"])
        .current_dir(p)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&[0xA5; 512]).unwrap();
    // The writer holds the image until its input ends; wait until it has locked it
    // (/proc/locks; probing with another bam could make the writer itself meet a lock).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let pid = format!(" {} ", child.id());
    while !std::fs::read_to_string("/proc/locks")
        .unwrap()
        .lines()
        .any(|l| l.contains("FLOCK") && l.contains("WRITE") && l.contains(&pid))
    {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the writer ended ({status}) before locking the image");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never locked the image"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let busy = fails(&bam(p, &["info", "-d", "model:img.bin"]), 1);
    assert!(busy.contains("in use by another process"), "{busy}");
    assert!(busy.contains("for writing"), "{busy}");
    assert!(busy.contains("wait for it to finish"), "{busy}");
    std::fs::write(p.join("in.bin"), [1u8; 512]).unwrap();
    let line = fails(
        &bam(
            p,
            &[
                "write",
                "-d",
                "model:img.bin",
                "--lba",
                "9",
                "--input",
                "in.bin",
            ],
        ),
        1,
    );
    assert!(line.contains("in use"), "{line}");
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    ok(bam(
        p,
        &[
            "write",
            "-d",
            "model:img.bin",
            "--lba",
            "9",
            "--input",
            "in.bin",
        ],
    ));
    let img = image_data(&p.join("img.bin"));
    assert!(img[..512].iter().all(|&b| b == 0xA5));
    assert!(img[9 * 512..10 * 512].iter().all(|&b| b == 1));
}

#[test]
fn write_read_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let dev = "model:disk.img,size=16M";
    let data = random_bytes(10_000); // 19 blocks and 272 bytes
    std::fs::write(p.join("in.bin"), &data).unwrap();

    let o = ok(bam(
        p,
        &["write", "-d", dev, "--lba", "5", "--input", "in.bin"],
    ));
    let text = stdout(&o);
    assert!(text.contains("padded with 240 zero bytes"), "{text}");
    let o = ok(bam(
        p,
        &[
            "write", "-d", dev, "--lba", "5", "--input", "in.bin", "--json",
        ],
    ));
    let v = json(&o);
    assert_eq!(v["blocks"], 20);
    assert_eq!(v["bytes"], 10_000);
    assert_eq!(v["padded_bytes"], 240);

    // --bytes gives exactly the input back.
    ok(bam(
        p,
        &[
            "read", "-d", dev, "--lba", "5", "--bytes", "10000", "--output", "out.bin",
        ],
    ));
    assert_eq!(std::fs::read(p.join("out.bin")).unwrap(), data);

    // --blocks gives whole blocks: the data and the zero padding.
    let o = ok(bam(
        p,
        &[
            "read",
            "-d",
            dev,
            "--lba",
            "5",
            "--blocks",
            "20",
            "-o",
            "blocks.bin",
            "--json",
        ],
    ));
    assert_eq!(json(&o)["bytes"], 10_240);
    let back = std::fs::read(p.join("blocks.bin")).unwrap();
    assert_eq!(&back[..10_000], &data[..]);
    assert!(back[10_000..].iter().all(|&b| b == 0));

    // To stdout, with a unit suffix.
    let o = ok(bam(
        p,
        &["read", "-d", dev, "--lba", "5", "--bytes", "4K", "-o", "-"],
    ));
    assert_eq!(o.stdout, &data[..4096]);

    // The image holds the data at LBA 5.
    let img = image_data(&p.join("disk.img"));
    assert_eq!(&img[5 * 512..5 * 512 + 10_000], &data[..]);
}

#[test]
fn load_verify_puts_the_file_at_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let data = random_bytes((6 << 20) + 1234); // more than one 4 MiB chunk, partial block
    std::fs::write(p.join("data.bin"), &data).unwrap();
    let offset = 100u64;
    let o = ok(bam(
        p,
        &[
            "load",
            "data.bin",
            "--device",
            "model:img.bin,size=32M,lba=4096",
            "--lba",
            "100",
            "--verify",
            "--queues",
            "3",
            "--qdepth",
            "16",
            "--json",
        ],
    ));
    let v = json(&o);
    assert_eq!(v["bytes"], data.len() as u64);
    assert_eq!(v["verified"], true);
    assert_eq!(v["queues"], 3);
    assert_eq!(v["block_size"], 4096);
    assert_eq!(v["blocks"], (data.len() as u64).div_ceil(4096));
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    assert!(v["gb_per_s"].as_f64().unwrap() > 0.0);
    assert!(
        stderr(&o).is_empty(),
        "no progress with --json: {}",
        stderr(&o)
    );

    let img = image_data(&p.join("img.bin"));
    assert_eq!(img.len(), 32 << 20);
    let start = (offset * 4096) as usize;
    assert!(
        img[..start].iter().all(|&b| b == 0),
        "nothing before the offset"
    );
    assert!(
        img[start..start + data.len()] == data[..],
        "image differs from the file"
    );
    assert!(img[start + data.len()..].iter().all(|&b| b == 0));

    // Text output names the throughput unit and the verification.
    let o = ok(bam(
        p,
        &["load", "data.bin", "-d", "model:img.bin", "--verify"],
    ));
    let text = stdout(&o);
    assert!(text.contains("GB/s (decimal)"), "{text}");
    assert!(text.contains("verified: yes"), "{text}");
    let o = ok(bam(p, &["load", "data.bin", "-d", "model:img.bin"]));
    assert!(stdout(&o).contains("verified: no"));
}

/// `bam load --name`: files become named datasets placed one after the other, recorded in
/// the catalog at the end of the namespace that `bam info` lists (text and JSON); a taken
/// name, a file that is not whole elements and an --lba over a dataset are refused, and
/// the data lands where the catalog says.
#[test]
fn load_named_datasets_and_info_lists_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let edges = random_bytes(1_000_000);
    let weights = random_bytes(40_000);
    std::fs::write(p.join("edges.bin"), &edges).unwrap();
    std::fs::write(p.join("w.bin"), &weights).unwrap();
    let load = |f: &str, name: &str, eb: &str| {
        bam(
            p,
            &[
                "load",
                f,
                "-d",
                "model:img.bin,size=16M",
                "--name",
                name,
                "--elem-bytes",
                eb,
                "--json",
            ],
        )
    };
    let v = json(&ok(load("edges.bin", "edges", "4")));
    assert_eq!(
        (v["lba"].as_u64(), v["dataset"].as_str()),
        (Some(0), Some("edges"))
    );
    let v = json(&ok(load("w.bin", "weights", "8")));
    // edges takes 1,000,000 bytes = 1954 blocks of 512, rounded up to whole 4 KiB: 1960.
    assert_eq!(v["lba"], 1960);
    assert!(fails(&load("w.bin", "weights", "8"), 1).contains("a dataset named \"weights\" exists"));
    assert!(fails(&load("w.bin", "odd", "3"), 2).contains("not a whole number of 3-byte elements"));
    let o = bam(
        p,
        &[
            "load",
            "w.bin",
            "-d",
            "model:img.bin",
            "--name",
            "over",
            "--lba",
            "100",
        ],
    );
    assert!(fails(&o, 1).contains("overlap"));
    let v = json(&ok(bam(p, &["info", "-d", "model:img.bin", "--json"])));
    let sets = v["namespaces"][0]["datasets"].as_array().unwrap().clone();
    let names: Vec<&str> = sets.iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["edges", "weights"]);
    assert_eq!(
        (sets[0]["len"].as_u64(), sets[0]["elem_size"].as_u64()),
        (Some(250_000), Some(4))
    );
    assert_eq!(
        (sets[1]["len"].as_u64(), sets[1]["start_lba"].as_u64()),
        (Some(5_000), Some(1960))
    );
    let text = stdout(&ok(bam(p, &["info", "-d", "model:img.bin"])));
    assert!(text.contains("datasets on namespace 1 (2;"), "{text}");
    assert!(text.contains("weights"), "{text}");
    let img = image_data(&p.join("img.bin"));
    assert!(img[..edges.len()] == edges[..]);
    assert!(img[1960 * 512..1960 * 512 + weights.len()] == weights[..]);
    // A fresh image has no catalog: `datasets` is null.
    let v = json(&ok(bam(
        p,
        &["info", "-d", "model:fresh.img,size=4M", "--json"],
    )));
    assert!(v["namespaces"][0]["datasets"].is_null());
}

#[test]
fn load_too_large_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    ok(bam(p, &["info", "-d", "model:small.img,size=1M"]));
    let image = std::fs::read(p.join("small.img")).unwrap();
    std::fs::write(p.join("big.bin"), random_bytes(2 << 20)).unwrap();
    std::fs::write(p.join("half.bin"), random_bytes(600 << 10)).unwrap();

    let o = bam(p, &["load", "big.bin", "--device", "model:small.img"]);
    let line = fails(&o, 1);
    assert!(line.contains("does not fit"), "{line}");
    assert!(line.contains("device model:small.img"), "{line}");
    assert!(line.contains("nothing was written"), "{line}");

    // Fits the device, but not at this offset.
    let o = bam(
        p,
        &[
            "load",
            "half.bin",
            "-d",
            "model:small.img",
            "--offset",
            "1000",
            "--json",
        ],
    );
    let line = fails(&o, 1);
    assert!(line.contains("at LBA 1000"), "{line}");
    assert!(json(&o)["error"]["cause"]
        .as_str()
        .unwrap()
        .contains("does not fit"));

    // An impossible queue depth is refused before any data moves.
    let o = bam(
        p,
        &[
            "load",
            "half.bin",
            "-d",
            "model:small.img",
            "--qdepth",
            "60000",
        ],
    );
    let line = fails(&o, 1);
    assert!(line.contains("--qdepth"), "{line}");

    assert!(
        std::fs::read(p.join("small.img")).unwrap() == image,
        "image changed"
    );
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

/// Every check `bam doctor` makes, as its lines name them.
const DOCTOR_CHECKS: [&str; 8] = [
    "gpu",
    "nvidia-driver",
    "nvidia-p2p",
    "bam-module",
    "controllers",
    "iommu",
    "topology",
    "memlock",
];

#[test]
fn doctor_help_teaches_each_check_and_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    assert!(stdout(&ok(bam(dir.path(), &["--help"]))).contains("bam doctor"));
    let h = stdout(&ok(bam(dir.path(), &["doctor", "--help"])));
    for s in DOCTOR_CHECKS.iter().copied().chain([
        "OK, WARN, FAIL",
        "Exit codes: 0 when no check FAILs, 1 when any does, 2",
        "Resizable BAR",
        "modprobe nvidia",
        "insmod kernel-module/bam_nvme.ko",
        "bam bind BDF",
        "iommu=pt",
        "setpci -s BDF ECAP_ACS+6.w=0",
        "ulimit -l unlimited",
        "needs root",
        "--json",
    ]) {
        assert!(h.contains(s), "doctor --help lacks {s}: {h}");
    }
    assert_eq!(
        bam(dir.path(), &["doctor", "--bogus"]).status.code(),
        Some(2)
    );
}

/// On this machine (no GPU, no bam module): a line for every check, FAIL for the GPU,
/// exit code 1; with --json one valid JSON document with the same content.
#[test]
fn doctor_reports_every_check_and_fails_without_a_gpu() {
    #[cfg(feature = "gpu")]
    if bam::gpu_available() {
        eprintln!("skipped: this machine has a GPU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = bam(dir.path(), &["doctor"]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}\n{}", stderr(&o));
    let line = fails(&o, 1);
    assert!(line.contains("check(s) failed"), "{line}");
    for id in DOCTOR_CHECKS {
        let found = text.lines().any(|l| {
            let mut w = l.split_whitespace();
            matches!(w.next(), Some("OK" | "INFO" | "SKIP" | "WARN" | "FAIL"))
                && w.next() == Some(id)
        });
        assert!(found, "no line for {id}:\n{text}");
    }
    if cfg!(feature = "gpu") {
        assert!(
            text.contains("FAIL  gpu            no NVIDIA GPU/driver"),
            "{text}"
        );
    } else {
        assert!(
            text.contains("SKIP  gpu            built without GPU support"),
            "{text}"
        );
    }
    assert!(text.contains("fix: "), "{text}");
    assert!(text.contains("simulated SSD array (sim:):"), "{text}");
    assert!(
        text.contains("real SSDs from GPU threads (kmod:):"),
        "{text}"
    );
    assert!(
        text.contains("CPU-side commands (model:, vfio:, kmod:):  yes"),
        "{text}"
    );
    assert!(!text.contains("panicked"), "{text}");

    for args in [&["--json", "doctor"][..], &["doctor", "--json"][..]] {
        let o = bam(dir.path(), args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let v = json(&o);
        let checks = v["checks"].as_array().expect("checks array");
        for id in DOCTOR_CHECKS {
            assert!(checks.iter().any(|c| c["check"] == id), "no {id} in {v}");
        }
        for c in checks {
            let s = c["status"].as_str().unwrap();
            assert!(["OK", "INFO", "SKIP", "WARN", "FAIL"].contains(&s), "{c}");
            assert!(c["message"].is_string(), "{c}");
        }
        let gpu = checks.iter().find(|c| c["check"] == "gpu").unwrap();
        assert_eq!(
            gpu["status"],
            if cfg!(feature = "gpu") {
                "FAIL"
            } else {
                "SKIP"
            }
        );
        assert!(v["failures"].as_u64().unwrap() >= 1, "{v}");
        assert_eq!(v["summary"]["cpu_side_commands"]["available"], true);
        assert_eq!(v["summary"]["simulated_ssd_array"]["available"], false);
        assert_eq!(v["summary"]["real_ssds_from_gpu"]["available"], false);
        assert!(
            v.get("error").is_none(),
            "the report is the only JSON document: {v}"
        );
    }
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

/// Ctrl-C during `bam load`: it stops, flushes, says how far it got and exits 130.
#[test]
fn sigint_stops_load_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let f = std::fs::File::create(p.join("big.bin")).unwrap();
    f.set_len(4 << 30).unwrap(); // sparse: reading it costs no disk
    let child = Command::new(env!("CARGO_BIN_EXE_bam"))
        .args([
            "load",
            "big.bin",
            "-d",
            "model:img.bin,size=5G",
            "--queues",
            "2",
        ])
        .current_dir(p)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    let line = fails(&o, 130);
    assert!(line.contains("load stopped at Ctrl-C"), "{line}");
    assert!(line.contains("written and flushed"), "{line}");
    assert!(line.contains("at LBA 0.."), "{line}");
}

/// `bam write --input -` streams: 256 MiB through a pipe with the child's anonymous memory
/// staying far below that; the data lands intact.
#[test]
fn write_from_stdin_streams() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bam"))
        .args([
            "write",
            "-d",
            "model:img.bin,size=300M",
            "--lba",
            "1",
            "--input",
            "-",
        ])
        .current_dir(p)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let chunk: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    let total = 256usize;
    let mut peak_anon_kb = 0u64;
    {
        let mut stdin = child.stdin.take().unwrap();
        for i in 0..total {
            stdin.write_all(&chunk).unwrap();
            if i % 32 == 31 {
                let status =
                    std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
                let anon = status
                    .lines()
                    .find_map(|l| l.strip_prefix("RssAnon:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                    .unwrap_or(0);
                peak_anon_kb = peak_anon_kb.max(anon);
            }
        }
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("({} bytes)", total << 20)),
        "{}",
        stdout(&o)
    );
    assert!(
        peak_anon_kb > 0 && peak_anon_kb < 96 << 10,
        "anonymous memory of bam write: {peak_anon_kb} kB for {total} MiB of input"
    );
    let img = image_data(&p.join("img.bin"));
    for i in [0, 100, total - 1] {
        let at = 512 + (i << 20);
        assert!(img[at..at + (1 << 20)] == chunk[..], "MiB {i}");
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

/// `bam read` whose output is the model image it reads (by name, or through a hard link)
/// is refused before anything is written; the image keeps every byte (an output opened
/// with O_TRUNC would empty the image, and a read that then failed would delete it). A
/// completed read replaces an existing output only at its end.
#[test]
fn read_refuses_the_image_it_reads_as_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let dev = "model:disk.img,size=1M";
    std::fs::write(p.join("in.bin"), random_bytes(4096)).unwrap();
    ok(bam(
        p,
        &["write", "-d", dev, "--lba", "0", "--input", "in.bin"],
    ));
    let before = std::fs::read(p.join("disk.img")).unwrap();
    std::fs::hard_link(p.join("disk.img"), p.join("alias.img")).unwrap();
    for out in ["disk.img", "alias.img", "./disk.img"] {
        let o = bam(
            p,
            &[
                "read", "-d", dev, "--lba", "0", "--blocks", "8", "--output", out,
            ],
        );
        let e = fails(&o, 2);
        assert!(e.contains("destroy"), "{e}");
        assert_eq!(std::fs::read(p.join("disk.img")).unwrap(), before, "{out}");
    }
    std::fs::write(p.join("out.bin"), b"old").unwrap();
    ok(bam(
        p,
        &[
            "read", "-d", dev, "--lba", "0", "--blocks", "8", "--output", "out.bin",
        ],
    ));
    assert_eq!(
        std::fs::read(p.join("out.bin")).unwrap(),
        std::fs::read(p.join("in.bin")).unwrap()
    );
    let partial = std::fs::read_dir(p)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".partial")
        })
        .count();
    assert_eq!(partial, 0, "temporary files left behind");
}

/// `model:ram:1024T` opens at once (no chunk table allocated up front for its whole
/// capacity), and a size past what a u64 holds is a usage error (exit 2).
#[test]
fn huge_ram_model_opens_and_an_overflowing_size_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    ok(bam(dir.path(), &["info", "-d", "model:ram:1024T"]));
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    let o = bam(dir.path(), &["info", "-d", "model:ram:99999999999T"]);
    let e = fails(&o, 2);
    assert!(e.contains("too large"), "{e}");
}
