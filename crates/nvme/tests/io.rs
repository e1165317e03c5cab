//! CPU I/O through queue pairs against the controller model: data integrity, wraparound,
//! concurrency and every bad-input path.

use bam_nvme::model::{ModelConfig, ModelTransport};
use bam_nvme::spec::status::{GenericStatus, MediaStatus};
use bam_nvme::{Controller, ControllerOptions, Error, Transport};
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn setup(cfg: ModelConfig) -> (Arc<ModelTransport>, Controller) {
    let t = Arc::new(ModelTransport::new(cfg.build().unwrap()));
    let ctrl = Controller::new(
        t.clone() as Arc<dyn Transport>,
        ControllerOptions::default(),
    )
    .unwrap();
    (t, ctrl)
}

fn pattern(lba: u64, tag: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((lba * 31 + tag * 7 + i as u64 / 8) % 251) as u8)
        .collect()
}

#[test]
fn depth_two_wraps_every_other_command() {
    let (m, ctrl) = setup(ModelConfig::ram(4 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(2).unwrap();
    for i in 0..1000u64 {
        let lba = (i * 13) % ns.blocks;
        let data = pattern(lba, i, 512);
        qp.write_from(&ns, lba, &data).unwrap();
        let mut back = vec![0; 512];
        qp.read_into(&ns, lba, &mut back).unwrap();
        assert_eq!(back, data, "LBA {lba}");
    }
    assert!(
        m.model().doorbell_errors().is_empty(),
        "{:?}",
        m.model().doorbell_errors()
    );
}

#[test]
fn large_transfers_use_prp_lists_and_pipeline() {
    let mut cfg = ModelConfig::ram(64 << 20);
    cfg.mdts = 9; // 2 MiB
    let (m, ctrl) = setup(cfg);
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(32).unwrap();
    let data: Vec<u8> = (0..(10 << 20) + 512).map(|i| (i % 253) as u8).collect();
    qp.write_from(&ns, 17, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    qp.read_into(&ns, 17, &mut back).unwrap();
    assert!(back == data);
    // And on the medium, at the right offset.
    let mut raw = vec![0u8; 4096];
    m.model()
        .medium()
        .read_at(17 * 512 + 4 * 1024 * 1024, &mut raw)
        .unwrap();
    assert_eq!(raw, &data[4 << 20..(4 << 20) + 4096]);

    // One 2 MiB command straight from a DMA buffer (a chained-free one-page PRP list).
    let mut buf = ctrl.transport().alloc_dma(2 << 20).unwrap();
    qp.read_dma(&ns, 17, &mut buf, 0, 2 << 20).unwrap();
    assert!(buf.as_slice() == &data[..2 << 20]);
    // With an offset into the first page: PRP1 has an offset, the list covers 513 pages.
    let mut big = ctrl.transport().alloc_dma((2 << 20) + 4096).unwrap();
    qp.read_dma(&ns, 17, &mut big, 512, 2 << 20).unwrap();
    assert!(big.as_slice()[512..512 + (2 << 20)] == data[..2 << 20]);
}

#[test]
fn many_threads_random_io_verified() {
    // 8 threads x 12_800 I/Os = 102_400 verified I/Os; each thread owns a disjoint LBA
    // region so it can keep an exact shadow of what it wrote.
    let (m, ctrl) = setup(ModelConfig::ram(64 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let threads = 8u64;
    let per = ns.blocks / threads;
    std::thread::scope(|s| {
        for t in 0..threads {
            let ctrl = ctrl.clone();
            let ns = ns.clone();
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                let mut qp = ctrl
                    .create_io_queue_pair(if t % 2 == 0 { 2 } else { 64 })
                    .unwrap();
                let base = t * per;
                let mut shadow = vec![0u8; (per * 512) as usize];
                for i in 0..12_800u64 {
                    let blocks = rng.gen_range(1..=8u64);
                    let lba = rng.gen_range(0..per - blocks);
                    let range = (lba * 512) as usize..((lba + blocks) * 512) as usize;
                    if rng.gen_bool(0.5) {
                        let data = pattern(base + lba, i, range.len());
                        qp.write_from(&ns, base + lba, &data).unwrap();
                        shadow[range].copy_from_slice(&data);
                    } else {
                        let mut back = vec![0u8; range.len()];
                        qp.read_into(&ns, base + lba, &mut back).unwrap();
                        assert!(
                            back == shadow[range.clone()],
                            "thread {t} LBA {}",
                            base + lba
                        );
                    }
                }
                // Final full comparison of the thread's region.
                let mut all = vec![0u8; shadow.len()];
                qp.read_into(&ns, base, &mut all).unwrap();
                assert!(all == shadow, "thread {t} final image");
            });
        }
    });
    let stats = m.model().stats();
    let ios = stats.reads.load(std::sync::atomic::Ordering::Relaxed)
        + stats.writes.load(std::sync::atomic::Ordering::Relaxed);
    assert!(ios >= 102_400, "{ios} I/Os");
    assert_eq!(stats.errors.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn batched_many() {
    let (_, ctrl) = setup(ModelConfig::ram(4 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(16).unwrap();
    let data: Vec<Vec<u8>> = (0..100u64)
        .map(|i| pattern(i * 40, 1, 512 * (1 + i as usize % 4)))
        .collect();
    let reqs: Vec<(u64, &[u8])> = data
        .iter()
        .enumerate()
        .map(|(i, d)| (i as u64 * 40, &d[..]))
        .collect();
    qp.write_many(&ns, &reqs).unwrap();
    let mut outs: Vec<Vec<u8>> = data.iter().map(|d| vec![0; d.len()]).collect();
    let mut reqs: Vec<(u64, &mut [u8])> = outs
        .iter_mut()
        .enumerate()
        .map(|(i, d)| (i as u64 * 40, &mut d[..]))
        .collect();
    qp.read_many(&ns, &mut reqs).unwrap();
    assert_eq!(outs, data);
}

#[test]
fn out_of_range_writes_nothing() {
    let (m, ctrl) = setup(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let err = qp.write_from(&ns, ns.blocks - 1, &[1u8; 1024]).unwrap_err();
    assert!(
        matches!(err, Error::LbaOutOfRange { lba, blocks: 2, .. } if lba == ns.blocks - 1),
        "{err}"
    );
    let err = qp.write_from(&ns, u64::MAX, &[1u8; 512]).unwrap_err();
    assert!(matches!(err, Error::LbaOutOfRange { .. }), "{err}");
    let mut last = [9u8; 512];
    m.model()
        .medium()
        .read_at((ns.blocks - 1) * 512, &mut last)
        .unwrap();
    assert_eq!(last, [0u8; 512], "nothing written");
    assert_eq!(
        m.model()
            .stats()
            .writes
            .load(std::sync::atomic::Ordering::Relaxed),
        0,
        "nothing sent"
    );
}

#[test]
fn zero_length_misaligned_and_over_mdts() {
    let mut cfg = ModelConfig::ram(4 << 20);
    cfg.mdts = 1; // 8 KiB
    let (_, ctrl) = setup(cfg);
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    assert!(matches!(
        qp.write_from(&ns, 0, &[]),
        Err(Error::ZeroLength { .. })
    ));
    assert!(matches!(
        qp.read_into(&ns, 0, &mut [0u8; 100]),
        Err(Error::Misaligned { align: 512, .. })
    ));
    let mut buf = ctrl.transport().alloc_dma(64 << 10).unwrap();
    assert!(matches!(
        qp.read_dma(&ns, 0, &mut buf, 0, 16 << 10),
        Err(Error::TransferTooLarge {
            bytes: 16384,
            max: 8192
        })
    ));
    assert!(matches!(
        qp.read_dma(&ns, 0, &mut buf, 2, 512),
        Err(Error::Misaligned {
            what: "buffer offset",
            ..
        })
    ));
    assert!(matches!(
        qp.read_dma(&ns, 0, &mut buf, 64 << 10, 512),
        Err(Error::BufferTooSmall { .. })
    ));
    assert!(matches!(
        qp.read_dma(&ns, 0, &mut buf, 0, 0),
        Err(Error::ZeroLength { .. })
    ));
    // Large copies are split at MDTS and still work.
    let data = pattern(3, 3, 40 << 10);
    qp.write_from(&ns, 3, &data).unwrap();
    let mut back = vec![0; data.len()];
    qp.read_into(&ns, 3, &mut back).unwrap();
    assert_eq!(back, data);
}

#[test]
fn media_errors_are_typed_and_logged() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.faults.media_error_lbas = Some(100..104);
    let (_, ctrl) = setup(cfg);
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let err = qp.read_into(&ns, 98, &mut [0u8; 2048]).unwrap_err();
    match &err {
        Error::Io {
            command: "Read",
            lba: 98,
            blocks: 4,
            status,
            ..
        } => {
            assert_eq!(status.media_code(), Some(MediaStatus::UnrecoveredReadError))
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err.to_string().contains("LBA 98"), "{err}");
    let err = qp.write_from(&ns, 103, &[0u8; 512]).unwrap_err();
    assert_eq!(
        err.status().and_then(|s| s.media_code()),
        Some(MediaStatus::WriteFault)
    );
    // Reads elsewhere still work on the same queue.
    qp.read_into(&ns, 0, &mut [0u8; 512]).unwrap();
    let log = ctrl.error_log().unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!((log[0].lba, log[1].lba), (103, 98), "newest first");
    assert_eq!(log[0].sqid, qp.qid());
    let smart = ctrl.smart_log().unwrap();
    assert_eq!(smart.media_errors, 2);
    assert_eq!(smart.host_read_commands, 1);
}

#[test]
fn stalled_device_times_out() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.faults.stall_after_io_commands = Some(3);
    let t = Arc::new(ModelTransport::new(cfg.build().unwrap()));
    let opts = ControllerOptions {
        io_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let ctrl = Controller::new(t as Arc<dyn Transport>, opts).unwrap();
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    for i in 0..3 {
        qp.write_from(&ns, i, &[1u8; 512]).unwrap();
    }
    let start = Instant::now();
    let err = qp.read_into(&ns, 0, &mut [0u8; 512]).unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("Read at LBA 0"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(2));
    // Dropping the queue pair deletes the SQ, which aborts the held command.
    drop(qp);
}

#[test]
fn write_zeroes_deallocate_flush() {
    let (_, ctrl) = setup(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    qp.write_from(&ns, 0, &vec![0xEE; 64 * 512]).unwrap();
    qp.write_zeroes(&ns, 4, 4).unwrap();
    qp.deallocate(&ns, &[(20, 2), (30, 1)]).unwrap();
    qp.flush(&ns).unwrap();
    let mut back = vec![0u8; 64 * 512];
    qp.read_into(&ns, 0, &mut back).unwrap();
    for (lba, block) in back.chunks(512).enumerate() {
        let zero = (4..8).contains(&lba) || (20..22).contains(&lba) || lba == 30;
        assert!(
            block.iter().all(|&b| b == if zero { 0 } else { 0xEE }),
            "LBA {lba}"
        );
    }
    assert!(matches!(
        qp.deallocate(&ns, &[]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        qp.write_zeroes(&ns, ns.blocks, 1),
        Err(Error::LbaOutOfRange { .. })
    ));
}

#[test]
fn file_backed_model_persists() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.img");
    {
        let (_, ctrl) = setup(ModelConfig::file(&path, 2 << 20));
        let ns = ctrl.namespace(1).unwrap();
        let mut qp = ctrl.create_io_queue_pair(8).unwrap();
        qp.write_from(&ns, 10, &pattern(10, 0, 4096)).unwrap();
    }
    // A 4 KiB image header, then the blocks.
    let raw = std::fs::read(&path).unwrap();
    assert_eq!(raw.len(), 4096 + (2 << 20));
    assert_eq!(&raw[..8], b"BAMMODEL");
    let at = 4096 + 10 * 512;
    assert_eq!(&raw[at..at + 4096], &pattern(10, 0, 4096)[..]);
    // Reopened as it is, the data is there.
    let (_, ctrl) = setup(ModelConfig::open_file(&path));
    let ns = ctrl.namespace(1).unwrap();
    assert_eq!(ns.blocks, 4096);
    let mut back = vec![0u8; 4096];
    ctrl.create_io_queue_pair(8)
        .unwrap()
        .read_into(&ns, 10, &mut back)
        .unwrap();
    assert_eq!(back, pattern(10, 0, 4096));
    let _ = GenericStatus::Success;
}
