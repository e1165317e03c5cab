//! Controller bring-up against the controller model, including failing devices.

use bam_nvme::model::{ModelConfig, ModelTransport};
use bam_nvme::spec::registers::offset;
use bam_nvme::spec::{Cc, Csts};
use bam_nvme::{Controller, ControllerOptions, Error, Transport};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn model(cfg: ModelConfig) -> (Arc<ModelTransport>, Arc<dyn Transport>) {
    let t = Arc::new(ModelTransport::new(cfg.build().unwrap()));
    (t.clone(), t)
}

#[test]
fn identify_and_limits() {
    let mut cfg = ModelConfig::ram(8 << 20);
    cfg.lba_size = 4096;
    cfg.mdts = 3;
    cfg.max_queue_entries = 256;
    cfg.max_io_queues = 16;
    let (_, t) = model(cfg);
    let ctrl = Controller::new(t, ControllerOptions::default()).unwrap();
    let info = ctrl.info();
    assert_eq!(info.version.to_string(), "1.4.0");
    assert_eq!(info.max_transfer_bytes, 32 * 1024);
    assert_eq!(info.max_queue_entries, 256);
    assert_eq!(info.io_queue_pairs, 16, "asked for 64, model grants 16");
    assert_eq!(info.namespaces.len(), 1);
    let ns = ctrl.namespace(1).unwrap();
    assert_eq!((ns.blocks, ns.block_size), (2048, 4096));
    assert!(matches!(
        ctrl.namespace(2),
        Err(Error::NoSuchNamespace { nsid: 2, .. })
    ));
    assert_eq!(ctrl.identify().serial, "BAM0000000001");
}

#[test]
fn many_queue_pairs_then_too_many() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.max_io_queues = 8;
    let (_, t) = model(cfg);
    let ctrl = Controller::new(t, ControllerOptions::default()).unwrap();
    let qps: Vec<_> = (0..8)
        .map(|_| ctrl.create_io_queue_pair(4).unwrap())
        .collect();
    let ids: Vec<u16> = qps.iter().map(|q| q.qid()).collect();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>());
    assert!(matches!(
        ctrl.create_io_queue_pair(4),
        Err(Error::TooManyQueues { granted: 8, .. })
    ));
    drop(qps);
    // Deleted on drop: ids are reusable.
    let again = ctrl.create_io_queue_pair(4).unwrap();
    assert_eq!(again.qid(), 1);
}

#[test]
fn queue_depth_limits() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.max_queue_entries = 64;
    let (_, t) = model(cfg);
    let ctrl = Controller::new(t, ControllerOptions::default()).unwrap();
    assert!(matches!(
        ctrl.create_io_queue_pair(1),
        Err(Error::InvalidQueueDepth { depth: 1, max: 64 })
    ));
    assert!(matches!(
        ctrl.create_io_queue_pair(65),
        Err(Error::InvalidQueueDepth { depth: 65, .. })
    ));
    assert!(ctrl.create_io_queue_pair(64).is_ok());
}

#[test]
fn never_ready_times_out_within_cap_to() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.timeout_500ms = 1;
    cfg.faults.never_ready = true;
    let (_, t) = model(cfg);
    let start = Instant::now();
    let err = Controller::new(t, ControllerOptions::default())
        .err()
        .expect("must fail");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("CSTS.RDY=1"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn fatal_status_on_enable_is_reported() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.faults.fatal_on_enable = true;
    let (_, t) = model(cfg);
    let start = Instant::now();
    let err = Controller::new(t, ControllerOptions::default())
        .err()
        .expect("must fail");
    assert!(matches!(err, Error::ControllerFatal { .. }), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "CFS is noticed at once, not after the timeout"
    );
}

#[test]
fn shutdown_on_drop_and_rebring_up() {
    let (m, t) = model(ModelConfig::ram(1 << 20));
    let ctrl = Controller::new(t.clone(), ControllerOptions::default()).unwrap();
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    qp.write_from(&ns, 5, &[7u8; 512]).unwrap();
    drop(qp);
    drop(ctrl);
    // Shut down (CC.SHN = normal), then disabled: no memory is touched after that.
    let cc = Cc(m.read32(offset::CC));
    let csts = Csts(m.read32(offset::CSTS));
    assert_eq!(cc.shn(), 1, "shutdown notification sent");
    assert!(
        !cc.enabled() && !csts.ready(),
        "disabled after the shutdown (CC.EN=0, CSTS.RDY=0)"
    );
    // A second bring-up resets the controller and sees the data.
    let ctrl = Controller::new(t, ControllerOptions::default()).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let mut back = [0u8; 512];
    qp.read_into(&ns, 5, &mut back).unwrap();
    assert_eq!(back, [7u8; 512]);
}

#[test]
fn absent_file_directory_is_a_clear_error() {
    let err = ModelConfig::file("/nonexistent-dir/x.img", 1 << 20)
        .build()
        .err()
        .unwrap();
    assert!(matches!(err, Error::DeviceUnavailable { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent-dir/x.img"));
}

#[test]
fn dead_device_reads_all_ones() {
    struct Dead;
    impl Transport for Dead {
        fn describe(&self) -> String {
            "dead".into()
        }
        fn read32(&self, _: usize) -> u32 {
            u32::MAX
        }
        unsafe fn write32(&self, _: usize, _: u32) {}
        fn alloc_dma(&self, _: usize) -> bam_nvme::Result<bam_nvme::DmaBuffer> {
            unreachable!("bring-up must stop before allocating")
        }
    }
    let err = Controller::new(Arc::new(Dead), ControllerOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, Error::DeviceUnavailable { .. }), "{err}");
}

/// A medium that cannot be made durable is never a silent success: an I/O Flush fails
/// with an error status, and a shutdown (CC.SHN) ends with CSTS.CFS set beside SHST
/// complete, which the driver's shutdown wait reports.
#[test]
fn a_failed_flush_is_reported_at_flush_and_at_shutdown() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.faults.flush_fails = true;
    let (m, t) = model(cfg);
    let ctrl = Controller::new(t.clone(), ControllerOptions::default()).unwrap();
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let e = qp.flush(&ns).unwrap_err();
    assert!(e.to_string().contains("Write Fault"), "{e}");
    drop(qp);
    // Normal shutdown notification, as the driver's drop sends it.
    let cc = t.read32(offset::CC);
    m.write32(offset::CC, cc | (1 << 14));
    let csts = Csts(t.read32(offset::CSTS));
    assert_eq!(csts.shst(), 2, "shutdown processing complete");
    assert!(
        csts.fatal(),
        "a shutdown that could not flush must say so (CSTS.CFS)"
    );
}
