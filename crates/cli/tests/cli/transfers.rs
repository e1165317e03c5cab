//! Moving data: write, read, load (named datasets among them), stdin, SIGINT.

use super::*;

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
