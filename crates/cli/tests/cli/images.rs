//! The model images: info, the default device, header checks, locks, sizes.

use super::*;

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
