//! The file backend's CPU service, driven from the CPU alone: a test producer plays the
//! GPU forwarder's part of the ring protocol (crates/bam/cuda/src/file_abi.h) against
//! temporary files: verified reads and writes at random offsets on several queues and
//! threads, flushes, `O_DIRECT`, and the errors a file can give (reads past the
//! namespace, writes to a read-only array, a file truncated underneath, malformed
//! requests). No GPU needed.

use bam::storage::file::abi::*;
use bam::storage::file::media::open_all;
use bam::storage::file::rings::QueueRings;
use bam::storage::file::service::{status, Files, Service};
use bam::storage::file::{FileConfig, FileMode};
use bam_tests::file_check::{check, pattern, CheckOptions, Producer, SLOT};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request in flight: (slot, op, file, offset, bytes).
type Posted = (u16, u8, u16, u64, u32);

/// A temporary directory on a file system that `dir` names, else the system's.
fn temp_dir() -> tempfile::TempDir {
    match std::env::var_os("BAM_TEST_FILE_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

fn make_file(path: &PathBuf, ssd: u32, len: u64) {
    std::fs::write(path, pattern(ssd, 0, len as usize, 0)).unwrap();
}

fn files(cfg: &FileConfig) -> Arc<Files> {
    Arc::new(Files::open(cfg).unwrap())
}

/// Random verified reads and writes on 4 queues served by 2 threads, two files; then
/// what reached the files is read back behind the service's back.
fn random_io(mode: FileMode) {
    let dir = temp_dir();
    let paths: Vec<PathBuf> = (0..2).map(|i| dir.path().join(format!("f{i}"))).collect();
    let len = 8u64 << 20;
    for (i, p) in paths.iter().enumerate() {
        make_file(p, i as u32, len);
    }
    let cfg = FileConfig {
        mode,
        writable: true,
        ..FileConfig::new(paths.clone())
    };
    let f = match std::panic::catch_unwind(|| files(&cfg)) {
        Ok(f) => f,
        Err(_) if mode == FileMode::Direct => {
            println!("SKIPPED: this file system refuses O_DIRECT");
            return;
        }
        Err(e) => std::panic::resume_unwind(e),
    };
    let rings: Vec<QueueRings> = (0..4)
        .map(|_| QueueRings::in_host_memory(32, SLOT).unwrap())
        .collect();
    let mut svc = Service::start(f.clone(), rings.clone(), 2).unwrap();
    let mut prods: Vec<Producer> = rings.into_iter().map(Producer::new).collect();
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Which 4 KiB blocks were rewritten (generation 1), per file.
    let blocks = len / 4096;
    let mut written = vec![vec![false; blocks as usize]; 2];
    let mut checked = 0;
    for round in 0..200 {
        // Each queue: up to 16 requests in flight, then all completions checked.
        let mut posted: Vec<Vec<Posted>> = vec![Vec::new(); 4];
        for (qi, p) in prods.iter_mut().enumerate() {
            for _ in 0..16 {
                let ssd = (next() % 2) as u16;
                let block = next() % blocks;
                let nblocks = 1 + (next() % 2) as u32;
                let nblocks = nblocks.min((blocks - block) as u32);
                let (off, bytes) = (block * 4096, nblocks * 4096);
                // Every third request of a queue writes; no two requests in flight touch
                // the same blocks (they could complete in any order).
                let overlaps = posted.iter().flatten().any(|&(_, _, s, o, b)| {
                    s == ssd && o < off + bytes as u64 && off < o + b as u64
                });
                if overlaps {
                    continue;
                }
                let op = if next() % 3 == 0 {
                    BAM_FILE_OP_WRITE
                } else {
                    BAM_FILE_OP_READ
                };
                let slot = p
                    .post(op, ssd, off, bytes, |s| {
                        if op == BAM_FILE_OP_WRITE {
                            s[..bytes as usize].copy_from_slice(&pattern(
                                ssd as u32,
                                off,
                                bytes as usize,
                                1,
                            ));
                        }
                    })
                    .unwrap();
                posted[qi].push((slot, op, ssd, off, bytes));
            }
        }
        for (qi, p) in prods.iter_mut().enumerate() {
            for _ in 0..posted[qi].len() {
                let (slot, st, data) = p.complete_next().unwrap();
                let &(_, op, ssd, off, bytes) = posted[qi].iter().find(|r| r.0 == slot).unwrap();
                assert_eq!(st, 0, "round {round}: status {st:#x} for op {op} at {off}");
                let first = (off / 4096) as usize;
                for b in 0..(bytes / 4096) as usize {
                    if op == BAM_FILE_OP_WRITE {
                        written[ssd as usize][first + b] = true;
                    } else {
                        let gen = written[ssd as usize][first + b] as u32;
                        let at = off + b as u64 * 4096;
                        assert_eq!(
                            &data[b * 4096..(b + 1) * 4096],
                            &pattern(ssd as u32, at, 4096, gen)[..],
                            "round {round}: file {ssd} block at {at} (generation {gen})"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    // A flush on each file, then what the files hold.
    for ssd in 0..2u16 {
        prods[0].post(BAM_FILE_OP_FLUSH, ssd, 0, 0, |_| {}).unwrap();
        let (_, st, _) = prods[0].complete_next().unwrap();
        assert_eq!(st, 0, "flush of file {ssd}");
    }
    svc.stop();
    for (ssd, w) in written.iter().enumerate() {
        let bytes = std::fs::read(&paths[ssd]).unwrap();
        for (b, &gen) in w.iter().enumerate() {
            let at = b as u64 * 4096;
            assert_eq!(
                &bytes[b * 4096..(b + 1) * 4096],
                &pattern(ssd as u32, at, 4096, gen as u32)[..],
                "file {ssd} block at {at} after the run"
            );
        }
    }
    assert!(checked > 1000, "only {checked} blocks read");
    assert_eq!(svc.control().errors(), vec![]);
    println!(
        "{checked} blocks read and verified, {} requests completed",
        svc.control()
            .completed
            .load(std::sync::atomic::Ordering::Relaxed)
    );
}

#[test]
fn random_reads_and_writes_buffered() {
    random_io(FileMode::Buffered);
}

#[test]
fn random_reads_and_writes_direct() {
    random_io(FileMode::Direct);
}

/// One queue, one thread, one file of 10000 bytes (not a multiple of the block): each
/// error a file can give completes with its status, and nothing hangs.
#[test]
fn errors_complete_with_their_status() {
    let dir = temp_dir();
    let path = dir.path().join("small");
    make_file(&path, 0, 10000);
    // Read-only (the default).
    let ro = files(&FileConfig::new(vec![path.clone()]));
    let unit = FileConfig::new(vec![]).io.slot_bytes;
    let ns = 10000u64.div_ceil(unit) * unit;
    assert_eq!(ro.ns_bytes, vec![ns], "namespace: whole buffer slots");
    let rings = QueueRings::in_host_memory(8, SLOT).unwrap();
    let mut svc = Service::start(ro, vec![rings.clone()], 1).unwrap();
    let mut p = Producer::new(rings);
    // The last block runs past the end of the file: zeros there.
    p.post(BAM_FILE_OP_READ, 0, 9728, 512, |_| {}).unwrap();
    let (_, st, data) = p.complete_next().unwrap();
    assert_eq!(st, 0);
    assert_eq!(&data[..272], &pattern(0, 9728, 272, 0)[..]);
    assert!(
        data[272..512].iter().all(|&b| b == 0),
        "past the end of the file: zeros"
    );
    p.post(BAM_FILE_OP_READ, 0, ns - 512, 512, |_| {}).unwrap();
    let (_, st, data) = p.complete_next().unwrap();
    assert_eq!(st, 0);
    assert!(
        data.iter().all(|&b| b == 0),
        "the namespace's last block: zeros"
    );
    // Past the namespace.
    p.post(BAM_FILE_OP_READ, 0, ns, 512, |_| {}).unwrap();
    assert_eq!(p.complete_next().unwrap().1, status::LBA_OUT_OF_RANGE);
    // A file that does not exist in the array.
    p.post(BAM_FILE_OP_READ, 3, 0, 512, |_| {}).unwrap();
    assert_eq!(p.complete_next().unwrap().1, status::LBA_OUT_OF_RANGE);
    // Writes to a read-only array.
    p.post(BAM_FILE_OP_WRITE, 0, 0, 512, |_| {}).unwrap();
    assert_eq!(p.complete_next().unwrap().1, status::WRITE_PROTECTED);
    // An echo completes with its status.
    let slot = p.free.pop_front().unwrap();
    let seq = p.req_prod;
    p.rings.set_req(
        seq,
        FileReq {
            offset: 0,
            bytes: 0,
            slot,
            op: BAM_FILE_OP_ECHO,
            pad: 0,
            ssd: 0,
            status: 0x0b,
            seq,
        },
    );
    p.req_prod += 1;
    p.rings.publish_reqs(p.req_prod);
    assert_eq!(p.complete_next().unwrap().1, 0x0b);
    // The file truncated underneath: a read before the old end fails, typed.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4096)
        .unwrap();
    p.post(BAM_FILE_OP_READ, 0, 8192, 512, |_| {}).unwrap();
    assert_eq!(p.complete_next().unwrap().1, status::LBA_OUT_OF_RANGE);
    // Malformed: out of sequence and a slot past the last are refused, never executed.
    let seq = p.req_prod;
    p.rings.set_req(
        seq,
        FileReq {
            offset: 0,
            bytes: 512,
            slot: 0,
            op: BAM_FILE_OP_READ,
            pad: 0,
            ssd: 0,
            status: 0,
            seq: seq + 7,
        },
    );
    p.rings.set_req(
        seq + 1,
        FileReq {
            offset: 0,
            bytes: 512,
            slot: 99,
            op: BAM_FILE_OP_READ,
            pad: 0,
            ssd: 0,
            status: 0,
            seq: seq + 1,
        },
    );
    p.req_prod += 2;
    p.rings.publish_reqs(p.req_prod);
    let t0 = Instant::now();
    while svc
        .control()
        .refused
        .load(std::sync::atomic::Ordering::Relaxed)
        < 2
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "malformed requests not refused"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        p.rings.cpl_prod(),
        p.cpl_cons,
        "a refused request completes nothing"
    );
    let errs = svc.control().errors();
    assert!(
        errs.iter().any(|e| e.what.contains("truncated")),
        "{errs:?}"
    );
    assert!(errs.iter().any(|e| e.what.contains("sequence")), "{errs:?}");
    svc.stop();
}

/// A stalled service leaves requests in the ring; resumed, it serves them.
#[test]
fn stall_and_resume() {
    let dir = temp_dir();
    let path = dir.path().join("s");
    make_file(&path, 0, 1 << 20);
    let f = files(&FileConfig::new(vec![path]));
    let rings = QueueRings::in_host_memory(8, SLOT).unwrap();
    let svc = Service::start(f, vec![rings.clone()], 1).unwrap();
    let mut p = Producer::new(rings);
    svc.set_stall(true);
    std::thread::sleep(Duration::from_millis(5));
    p.post(BAM_FILE_OP_READ, 0, 4096, 4096, |_| {}).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        p.rings.cpl_prod(),
        0,
        "a stalled service completed a request"
    );
    svc.set_stall(false);
    let (_, st, data) = p.complete_next().unwrap();
    assert_eq!(st, 0);
    assert_eq!(&data[..4096], &pattern(0, 4096, 4096, 0)[..]);
    svc.health().unwrap();
}

/// A file locked by a writer cannot be opened again, for reading or writing.
#[test]
fn writers_lock_the_file() {
    let dir = temp_dir();
    let path = dir.path().join("l");
    make_file(&path, 0, 4096);
    let rw = FileConfig {
        writable: true,
        ..FileConfig::new(vec![path.clone()])
    };
    let held = open_all(&rw).unwrap();
    let e = open_all(&FileConfig::new(vec![path.clone()]))
        .err()
        .expect("opened a locked file");
    assert!(e.to_string().contains("locked"), "{e}");
    drop(held);
    let r1 = open_all(&FileConfig::new(vec![path.clone()])).unwrap();
    let _r2 = open_all(&FileConfig::new(vec![path.clone()])).expect("two readers share it");
    assert!(open_all(&rw).is_err(), "a writer while it is read");
    drop(r1);
    let missing = open_all(&FileConfig::new(vec![dir.path().join("nope")]))
        .err()
        .unwrap();
    assert!(missing.to_string().contains("size="), "{missing}");
}

/// The verification `bam-file-check` runs in the QEMU guest, here on a temporary file:
/// verified writes, a flush, verified reads.
#[test]
fn check_on_a_file() {
    let dir = temp_dir();
    let path = dir.path().join("c");
    make_file(&path, 0, 4 << 20);
    for direct in [false, true] {
        let o = CheckOptions {
            path: path.clone(),
            direct,
            bytes: 4 << 20,
            error_range: None,
            expect_full: false,
        };
        match check(&o) {
            Ok(line) => println!("{line}"),
            Err(e) if direct && e.contains("O_DIRECT") => println!("SKIPPED: {e}"),
            Err(e) => panic!("direct={direct}: {e}"),
        }
    }
}
