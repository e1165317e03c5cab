//! The driver against a hostile device (see `support/hostile.rs`): every case ends in a
//! typed error or a correct result, never a panic, a hang or wrong data returned as Ok.
//! Here the findings, one case each; in `action_sequences.rs` random sequences of driver
//! actions and device lies.

#[path = "../support/hostile.rs"]
mod hostile;

mod action_sequences;

use bam_nvme::model::ModelConfig;
use bam_nvme::{Controller, ControllerOptions, Error, Transport};
use hostile::{CqeFault, Hostile};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const IO_TIMEOUT: Duration = Duration::from_millis(150);

fn options() -> ControllerOptions {
    ControllerOptions {
        admin_timeout: Duration::from_millis(300),
        io_timeout: IO_TIMEOUT,
        ..ControllerOptions::default()
    }
}

fn up(cfg: ModelConfig) -> (Arc<Hostile>, Controller) {
    let h = Hostile::new(cfg);
    let ctrl = Controller::new(h.clone() as Arc<dyn Transport>, options()).unwrap();
    (h, ctrl)
}

fn pattern(lba: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((lba * 37 + i as u64 / 4) % 251 + 1) as u8)
        .collect()
}

/// A 1 MiB RAM model behind the hostile transport, brought up, with namespace 1 and one
/// I/O queue pair of `depth` entries.
fn up_with_pair(
    depth: u32,
) -> (
    Arc<Hostile>,
    Controller,
    bam_nvme::Namespace,
    bam_nvme::IoQueuePair,
) {
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let qp = ctrl.create_io_queue_pair(depth).unwrap();
    (h, ctrl, ns, qp)
}

/// After a recovery: a queue pair created now reads LBA 0's pattern.
fn assert_a_new_pair_reads_lba_0(ctrl: &Controller, ns: &bam_nvme::Namespace) {
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let mut out = vec![0u8; 4096];
    qp.read_into(ns, 0, &mut out).unwrap();
    assert_eq!(out, pattern(0, 4096));
}

/// Finding: after an I/O timeout every one-shot command used the same tag, so the next
/// read took the late completion of the timed-out one as its own and returned Ok before
/// its data arrived.
#[test]
fn late_completion_is_never_taken_by_the_next_command() {
    let (h, ctrl, ns, mut qp) = up_with_pair(8);
    qp.write_from(&ns, 0, &pattern(0, 512)).unwrap();
    qp.write_from(&ns, 8, &pattern(8, 512)).unwrap();

    h.plan(|p| p.lag_io = true); // the device runs one doorbell behind
    let mut first = ctrl.transport().alloc_dma(4096).unwrap();
    let e = qp.read_dma(&ns, 0, &mut first, 0, 512).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");

    // The next read's doorbell lets the device run the timed-out read only.
    let mut second = ctrl.transport().alloc_dma(4096).unwrap();
    match qp.read_dma(&ns, 8, &mut second, 0, 512) {
        Ok(()) => assert_eq!(
            &second.as_slice()[..512],
            &pattern(8, 512)[..],
            "Ok with the wrong data: the late completion was taken for this read"
        ),
        Err(e) => assert!(matches!(e, Error::QueuePoisoned { .. }), "{e}"),
    }
}

/// Finding: `pipeline` indexed its slot table with the one-shot tag `usize::MAX` when a
/// stale completion arrived, and panicked.
#[test]
fn pipeline_after_a_timeout_does_not_panic() {
    let (h, ctrl, ns, mut qp) = up_with_pair(8);
    qp.write_from(&ns, 0, &pattern(0, 4096)).unwrap();
    h.plan(|p| p.lag_io = true);
    let mut buf = ctrl.transport().alloc_dma(4096).unwrap();
    assert!(qp.read_dma(&ns, 0, &mut buf, 0, 512).is_err());
    let mut out = vec![0u8; 4096];
    match qp.read_into(&ns, 0, &mut out) {
        Ok(()) => assert_eq!(out, pattern(0, 4096)),
        Err(e) => assert!(matches!(e, Error::QueuePoisoned { .. }), "{e}"),
    }
}

/// Finding: the buffer of a timed-out read could be freed (and its pages reused) while
/// the device may still write into it.
#[test]
fn buffer_of_a_timed_out_read_is_quarantined() {
    let (h, ctrl, ns, mut qp) = up_with_pair(8);
    h.plan(|p| p.swallow_io = true);
    let mut buf = ctrl.transport().alloc_dma(8192).unwrap();
    let bus = buf.bus_addr(0);
    assert!(qp.read_dma(&ns, 0, &mut buf, 0, 4096).is_err());
    drop(buf);
    assert!(
        h.model().dma().lookup(bus, 8192).is_some(),
        "the timed-out read's buffer was freed while the command may still complete"
    );
    // The device wakes up and completes the command late: the data lands in the
    // quarantined buffer, not in freed memory (the model would report a DMA error).
    h.plan(|p| p.swallow_io = false);
    h.release_doorbells();
    assert!(
        h.model()
            .stats()
            .errors
            .load(std::sync::atomic::Ordering::Relaxed)
            == 0
    );
    drop(qp); // deletes the queues, then frees the quarantine
    assert!(h.model().dma().lookup(bus, 8192).is_none());
}

/// Finding: a timed-out admin command left the admin queue unusable with no typed
/// state (the next command failed on a CID mismatch, or worse, took the late one).
#[test]
fn admin_timeout_leaves_a_typed_fatal_state() {
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    h.plan(|p| p.swallow_admin = true);
    let e = ctrl.smart_log().unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    h.plan(|p| p.swallow_admin = false);
    let start = Instant::now();
    let e = ctrl.smart_log().unwrap_err();
    assert!(matches!(e, Error::ControllerNeedsReset { .. }), "{e}");
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "no second wait"
    );
    let e = ctrl.error_log().unwrap_err();
    assert!(matches!(e, Error::ControllerNeedsReset { .. }), "{e}");
}

fn bring_up_err(h: Arc<Hostile>) -> Error {
    match Controller::new(h as Arc<dyn Transport>, options()) {
        Ok(_) => panic!("bring-up accepted an absurd device"),
        Err(e) => e,
    }
}

/// Finding: LBADS outside 9..=16 shifted out of range or divided by zero.
#[test]
fn absurd_lba_data_size_is_a_typed_error() {
    for lbads in [0u8, 1, 8, 17, 63, 64, 200, 255] {
        let h = Hostile::new(ModelConfig::ram(1 << 20));
        // LBA format 0, byte 2 of the descriptor: LBADS.
        h.plan(|p| p.identify_ns_patch = vec![(130, vec![lbads])]);
        let e = bring_up_err(h);
        assert!(matches!(e, Error::Protocol(_)), "LBADS {lbads}: {e}");
    }
}

/// A namespace so large that its byte size overflows.
#[test]
fn absurd_namespace_size_is_a_typed_error() {
    let h = Hostile::new(ModelConfig::ram(1 << 20));
    h.plan(|p| p.identify_ns_patch = vec![(0, u64::MAX.to_le_bytes().to_vec())]);
    let e = bring_up_err(h);
    assert!(matches!(e, Error::Protocol(_)), "{e}");
}

/// Finding: NSQA/NCQA of 0xFFFF overflowed.
#[test]
fn absurd_number_of_queues_does_not_overflow() {
    let h = Hostile::new(ModelConfig::ram(1 << 20));
    h.plan(|p| p.number_of_queues_dw0 = Some(u32::MAX));
    let ctrl = Controller::new(h.clone() as Arc<dyn Transport>, options()).unwrap();
    assert!(ctrl.io_queue_pairs() >= 1 && ctrl.io_queue_pairs() <= 64);
}

fn model_cap(h: &Hostile) -> u64 {
    h.model().read_register(0) as u64 | (h.model().read_register(4) as u64) << 32
}

/// Finding: MQES of 0 hit an assertion.
#[test]
fn absurd_cap_values_are_typed_errors() {
    let h = Hostile::new(ModelConfig::ram(1 << 20));
    let cap = model_cap(&h) & !0xFFFF; // MQES = 0: a 1-entry queue
    h.plan(|p| p.cap = Some(cap));
    let e = bring_up_err(h);
    assert!(matches!(e, Error::Protocol(_)), "{e}");

    // No NVM command set, no 4 KiB pages, all ones.
    for cap in [
        model_cap(&Hostile::new(ModelConfig::ram(1 << 20))) & !(0xFF << 37),
        model_cap(&Hostile::new(ModelConfig::ram(1 << 20))) | 0xF << 48,
        u64::MAX,
        0,
    ] {
        let h = Hostile::new(ModelConfig::ram(1 << 20));
        h.plan(|p| p.cap = Some(cap));
        let _ = bring_up_err(h);
    }
}

/// Every completion-side lie ends in a typed error (and a poisoned pair) or correct data.
#[test]
fn completion_lies_end_in_typed_errors() {
    for fault in [
        CqeFault::BadCid,
        CqeFault::Duplicate,
        CqeFault::PhaseGlitch,
        CqeFault::WrongSqHead,
        CqeFault::StaleCid,
    ] {
        for depth in [2u32, 3, 8, 64] {
            let (h, ctrl) = up(ModelConfig::ram(1 << 20));
            let ns = ctrl.namespace(1).unwrap();
            let mut qp = ctrl.create_io_queue_pair(depth).unwrap();
            let data = pattern(3, 8192);
            qp.write_from(&ns, 3, &data).unwrap();
            h.plan(|p| {
                p.cqe_fault = Some(fault);
                p.cqe_fault_count = 1;
            });
            let mut saw_error = false;
            for _ in 0..4 {
                let mut out = vec![0u8; 8192];
                match qp.read_into(&ns, 3, &mut out) {
                    Ok(()) => assert_eq!(out, data, "{fault:?}, depth {depth}: wrong data as Ok"),
                    Err(e) => {
                        saw_error = true;
                        assert!(
                            matches!(
                                e,
                                Error::Protocol(_)
                                    | Error::QueuePoisoned { .. }
                                    | Error::Timeout { .. }
                            ),
                            "{fault:?}, depth {depth}: {e}"
                        );
                    }
                }
            }
            assert!(
                saw_error,
                "{fault:?}, depth {depth}: the lie went unnoticed"
            );
            assert!(qp.is_poisoned(), "{fault:?}, depth {depth}");
            drop(qp);
            // A fresh pair works.
            h.plan(|p| p.cqe_fault = None);
            let mut qp = ctrl.create_io_queue_pair(depth).unwrap();
            let mut out = vec![0u8; 8192];
            qp.read_into(&ns, 3, &mut out).unwrap();
            assert_eq!(out, data);
        }
    }
}

/// A device that falls off the bus: typed errors, bounded waits.
#[test]
fn device_gone_mid_io() {
    let (h, _ctrl, ns, mut qp) = up_with_pair(8);
    h.plan(|p| {
        p.gone = true;
        p.swallow_io = true;
    });
    let start = Instant::now();
    let e = qp.read_into(&ns, 0, &mut [0u8; 512]).unwrap_err();
    assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e}");
    let e = qp.read_into(&ns, 0, &mut [0u8; 512]).unwrap_err();
    assert!(matches!(e, Error::QueuePoisoned { .. }), "{e}");
    assert!(start.elapsed() < IO_TIMEOUT * 4);
    drop(qp); // admin commands time out: the memory is leaked, not freed
}

/// DMA memory revoked under a running controller: the device reports CFS, the driver a
/// typed error.
#[test]
fn revocation_mid_io() {
    let (h, ctrl, ns, mut qp) = up_with_pair(8);
    qp.write_from(&ns, 0, &pattern(0, 4096)).unwrap();
    h.revoke(true);
    let mut out = vec![0u8; 4096];
    let e = qp.read_into(&ns, 0, &mut out).unwrap_err();
    assert!(
        matches!(e, Error::ControllerFatal { .. } | Error::Timeout { .. }),
        "{e}"
    );
    assert!(qp.is_poisoned());
    let e = ctrl.smart_log().unwrap_err();
    assert!(
        matches!(
            e,
            Error::ControllerFatal { .. } | Error::ControllerNeedsReset { .. }
        ),
        "{e}"
    );
}

/// Never-completing I/O: bounded by the I/O timeout, then typed errors at once.
#[test]
fn never_completing_io_is_bounded() {
    let (h, _ctrl, ns, mut qp) = up_with_pair(4);
    h.plan(|p| p.swallow_io = true);
    let start = Instant::now();
    let mut out = vec![0u8; 64 << 10];
    let e = qp.read_into(&ns, 0, &mut out).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(start.elapsed() < IO_TIMEOUT * 10);
    for r in [
        qp.flush(&ns),
        qp.write_zeroes(&ns, 0, 1),
        qp.deallocate(&ns, &[(0, 1)]),
        qp.write_from(&ns, 0, &[0u8; 512]),
    ] {
        assert!(matches!(r, Err(Error::QueuePoisoned { .. })), "{r:?}");
    }
    // The model's own stall fault, too.
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.faults.stall_after_io_commands = Some(1);
    let (_h, ctrl) = up(cfg);
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(4).unwrap();
    qp.write_from(&ns, 0, &pattern(0, 512)).unwrap();
    let e = qp.read_into(&ns, 0, &mut [0u8; 512]).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    let e = qp.read_into(&ns, 0, &mut [0u8; 512]).unwrap_err();
    assert!(matches!(e, Error::QueuePoisoned { .. }), "{e}");
}

/// Absurd identify controller values: MDTS beyond anything, odd serials.
#[test]
fn absurd_identify_controller_values() {
    let h = Hostile::new(ModelConfig::ram(1 << 20));
    h.plan(|p| p.identify_ctrl_patch = vec![(77, vec![0xFF]), (4, vec![0xFF; 20])]);
    let ctrl = Controller::new(h.clone() as Arc<dyn Transport>, options()).unwrap();
    assert!(ctrl.max_transfer_bytes() <= bam_nvme::controller::DRIVER_MAX_TRANSFER);
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    qp.write_from(&ns, 0, &pattern(0, 4096)).unwrap();
    // An absurd namespace list.
    for list in [vec![0xFFu8; 4], 1u32.to_le_bytes().repeat(2)] {
        let h = Hostile::new(ModelConfig::ram(1 << 20));
        h.plan(|p| p.ns_list_patch = vec![(0, list.clone())]);
        let e = bring_up_err(h);
        assert!(matches!(e, Error::Protocol(_)), "{e}");
    }
}

/// The admin queue's bus addresses (ASQ, ACQ), as the controller was told them.
fn admin_queue_bus(h: &Hostile) -> (u64, u64) {
    use bam_nvme::spec::registers::offset;
    let m = h.model();
    let r64 = |o: usize| m.read_register(o) as u64 | (m.read_register(o + 4) as u64) << 32;
    (r64(offset::ASQ), r64(offset::ACQ))
}

/// Whether the model still has the admin queue memory registered (not freed).
fn admin_memory_alive(h: &Hostile, (asq, acq): (u64, u64)) -> bool {
    h.model().dma().lookup(asq, 64).is_some() && h.model().dma().lookup(acq, 16).is_some()
}

/// The shutdown wait looks at CSTS.CFS beside SHST = complete, and `shutdown` reports a
/// failed shutdown as a typed error: the model's own failing medium flush, and the
/// harness' CFS glitch.
#[test]
fn shutdown_reports_cfs_set_beside_shst_complete() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.faults.flush_fails = true;
    let (_h, ctrl) = up(cfg);
    let e = ctrl.shutdown().unwrap_err();
    assert!(matches!(e, Error::ControllerFatal { .. }), "{e}");

    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    h.plan(|p| p.cfs_at_shutdown = true);
    let e = ctrl.clone().shutdown().unwrap_err();
    assert!(matches!(e, Error::ControllerFatal { .. }), "{e}");
    // Afterwards admin commands are refused, typed, without waiting.
    let e = ctrl.smart_log().unwrap_err();
    assert!(matches!(e, Error::ControllerNeedsReset { .. }), "{e}");

    // A clean shutdown is Ok.
    let (_h, ctrl) = up(ModelConfig::ram(1 << 20));
    ctrl.shutdown().unwrap();
}

/// After a failed shutdown the device may still DMA into the admin queues and the scratch
/// page, so Drop leaks them (deliberately); after a clean shutdown they are freed.
#[test]
fn failed_shutdown_leaks_the_admin_memory() {
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let bus = admin_queue_bus(&h);
    h.plan(|p| p.cfs_at_shutdown = true);
    assert!(ctrl.shutdown().is_err());
    assert!(
        admin_memory_alive(&h, bus),
        "admin queue memory freed after a failed shutdown"
    );

    // Dropping without an explicit shutdown: the same, only logged.
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let bus = admin_queue_bus(&h);
    h.plan(|p| p.cfs_at_shutdown = true);
    drop(ctrl);
    assert!(admin_memory_alive(&h, bus));

    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let bus = admin_queue_bus(&h);
    ctrl.shutdown().unwrap();
    assert!(!admin_memory_alive(&h, bus), "freed after a clean shutdown");
}

/// After an admin timeout the command stays outstanding and may still write the scratch
/// page and the completion queue, so Drop leaks them unless a reset saw CSTS.RDY=0.
#[test]
fn admin_timeout_leaks_the_admin_memory_unless_reset() {
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let bus = admin_queue_bus(&h);
    h.plan(|p| p.swallow_admin = true);
    assert!(matches!(ctrl.smart_log(), Err(Error::Timeout { .. })));
    drop(ctrl);
    assert!(
        admin_memory_alive(&h, bus),
        "admin queue memory freed with a command outstanding"
    );

    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let bus = admin_queue_bus(&h);
    h.plan(|p| p.swallow_admin = true);
    assert!(ctrl.smart_log().is_err());
    h.plan(|p| p.swallow_admin = false);
    ctrl.reset().unwrap();
    drop(ctrl);
    assert!(!admin_memory_alive(&h, bus), "freed after the reset");
}

/// CSTS.RDY dropping mid-run (the controller reset itself) is a typed error at once, not
/// a wait for the full timeout, on the I/O and on the admin queue, and a reset recovers.
#[test]
fn rdy_dropping_mid_run_is_a_typed_error() {
    let slow = ControllerOptions {
        admin_timeout: Duration::from_secs(5),
        io_timeout: Duration::from_secs(5),
        ..ControllerOptions::default()
    };
    let h = Hostile::new(ModelConfig::ram(1 << 20));
    let ctrl = Controller::new(h.clone() as Arc<dyn Transport>, slow).unwrap();
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    qp.write_from(&ns, 0, &pattern(0, 4096)).unwrap();
    h.plan(|p| {
        p.rdy_dropped = true;
        p.swallow_io = true;
        p.swallow_admin = true;
    });
    let start = Instant::now();
    let e = qp.read_into(&ns, 0, &mut [0u8; 4096]).unwrap_err();
    assert!(matches!(e, Error::ControllerNotReady { .. }), "{e}");
    let e = ctrl.smart_log().unwrap_err();
    assert!(matches!(e, Error::ControllerNotReady { .. }), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "waited for the timeouts"
    );
    h.plan(|p| {
        p.rdy_dropped = false;
        p.swallow_io = false;
        p.swallow_admin = false;
    });
    ctrl.reset().unwrap();
    let e = qp.read_into(&ns, 0, &mut [0u8; 4096]).unwrap_err();
    assert!(matches!(e, Error::QueueInvalidated { .. }), "{e}");
    drop(qp);
    assert_a_new_pair_reads_lba_0(&ctrl, &ns);
}

/// After an admin timeout the controller is in ControllerNeedsReset, and `reset` is the
/// way out: it disables it, waits for CSTS.RDY=0 and brings the admin queue back: identify
/// (log pages, queue creation) works again.
#[test]
fn admin_timeout_then_reset_recovers() {
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    h.plan(|p| p.swallow_admin = true);
    assert!(matches!(ctrl.smart_log(), Err(Error::Timeout { .. })));
    assert!(matches!(
        ctrl.error_log(),
        Err(Error::ControllerNeedsReset { .. })
    ));
    // The device wakes up late: the timed-out command completes into the old queue.
    h.plan(|p| p.swallow_admin = false);
    h.release_doorbells();
    ctrl.reset().unwrap();
    ctrl.smart_log().unwrap();
    ctrl.error_log().unwrap();
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    qp.write_from(&ns, 5, &pattern(5, 1024)).unwrap();
    let mut out = vec![0u8; 1024];
    qp.read_into(&ns, 5, &mut out).unwrap();
    assert_eq!(out, pattern(5, 1024));
    // Twice in a row, and after a device that stays silent: the reset itself is bounded.
    ctrl.reset().unwrap();
    drop(qp);
    h.plan(|p| p.gone = true);
    let start = Instant::now();
    let e = ctrl.reset().unwrap_err();
    assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e}");
    assert!(start.elapsed() < Duration::from_secs(2));
    h.plan(|p| p.gone = false);
    ctrl.reset().unwrap();
    ctrl.smart_log().unwrap();
}

/// An I/O timeout leaves the pair poisoned with its buffers quarantined, and a reset is a
/// way out besides deleting the queues: after a reset the old pair fails typed (and never
/// rings a doorbell that may now belong to a new pair of the same id), its quarantine is
/// released (the device was disabled), and a new pair works with the right data.
#[test]
fn io_timeout_then_reset_invalidates_old_pairs() {
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut old = ctrl.create_io_queue_pair(8).unwrap();
    old.write_from(&ns, 0, &pattern(0, 8192)).unwrap();
    h.plan(|p| p.swallow_io = true);
    let mut buf = ctrl.transport().alloc_dma(8192).unwrap();
    let quarantined = buf.bus_addr(0);
    let e = old.read_dma(&ns, 0, &mut buf, 0, 4096).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    drop(buf);
    assert!(h.model().dma().lookup(quarantined, 8192).is_some());

    h.plan(|p| p.swallow_io = false);
    ctrl.reset().unwrap();
    h.forget_io_queues();
    assert!(old.is_invalidated());
    // A new pair gets the same queue id; the old one must not disturb it.
    let mut new = ctrl.create_io_queue_pair(8).unwrap();
    assert_eq!(new.qid(), old.qid());
    for r in [
        old.read_into(&ns, 0, &mut [0u8; 512]),
        old.write_from(&ns, 0, &[0u8; 512]),
        old.flush(&ns),
    ] {
        assert!(matches!(r, Err(Error::QueueInvalidated { .. })), "{r:?}");
    }
    h.release_doorbells(); // the swallowed doorbell of the old pair: nothing to run now
    let mut out = vec![0u8; 8192];
    new.read_into(&ns, 0, &mut out).unwrap();
    assert_eq!(out, pattern(0, 8192));
    drop(old); // sends nothing, frees its quarantine
    assert!(h.model().dma().lookup(quarantined, 8192).is_none());
    new.write_from(&ns, 16, &pattern(16, 4096)).unwrap();
    let mut out = vec![0u8; 4096];
    new.read_into(&ns, 16, &mut out).unwrap();
    assert_eq!(out, pattern(16, 4096));
    assert_eq!(
        h.model()
            .stats()
            .errors
            .load(std::sync::atomic::Ordering::Relaxed),
        0,
        "the model saw a bad doorbell or DMA"
    );
}

/// Revoked DMA memory (the device reports CFS) ends in typed errors; once the memory is
/// back a reset recovers the controller.
#[test]
fn revocation_then_reset_recovers() {
    let (h, ctrl, ns, mut qp) = up_with_pair(8);
    qp.write_from(&ns, 0, &pattern(0, 4096)).unwrap();
    h.revoke(true);
    assert!(qp.read_into(&ns, 0, &mut [0u8; 4096]).is_err());
    let e = ctrl.reset().unwrap_err(); // identify cannot reach memory
    assert!(
        matches!(
            e,
            Error::ControllerFatal { .. }
                | Error::Timeout { .. }
                | Error::ControllerNotReady { .. }
        ),
        "{e}"
    );
    h.revoke(false);
    ctrl.reset().unwrap();
    drop(qp);
    assert_a_new_pair_reads_lba_0(&ctrl, &ns);
}

/// Completion lies on the admin queue: each ends in a typed error (and a dead admin
/// queue) or a correct result; a reset recovers.
#[test]
fn admin_completion_lies_end_in_typed_errors() {
    for fault in [
        CqeFault::BadCid,
        CqeFault::Duplicate,
        CqeFault::PhaseGlitch,
        CqeFault::WrongSqHead,
        CqeFault::StaleCid,
    ] {
        let (h, ctrl) = up(ModelConfig::ram(1 << 20));
        let ns = ctrl.namespace(1).unwrap();
        h.plan(|p| {
            p.admin_cqe_fault = Some(fault);
            p.admin_cqe_fault_count = 1;
        });
        for _ in 0..3 {
            for r in [ctrl.smart_log().map(|_| ()), ctrl.error_log().map(|_| ())] {
                if let Err(e) = r {
                    assert!(
                        matches!(
                            e,
                            Error::Protocol(_)
                                | Error::ControllerNeedsReset { .. }
                                | Error::Timeout { .. }
                        ),
                        "{fault:?}: {e}"
                    );
                }
            }
            match ctrl.create_io_queue_pair(4) {
                Ok(mut qp) => {
                    qp.write_from(&ns, 1, &pattern(1, 512)).unwrap();
                }
                Err(e) => assert!(
                    matches!(
                        e,
                        Error::Protocol(_)
                            | Error::ControllerNeedsReset { .. }
                            | Error::Timeout { .. }
                    ),
                    "{fault:?}: {e}"
                ),
            }
        }
        ctrl.reset().unwrap();
        ctrl.smart_log().unwrap();
        let mut qp = ctrl.create_io_queue_pair(4).unwrap();
        let mut out = vec![0u8; 512];
        qp.read_into(&ns, 1, &mut out).unwrap();
    }
}

/// Patched log page data: absurd SMART and error log contents parse without a panic (they
/// are the device's word, reported as read).
#[test]
fn absurd_log_page_data_parses() {
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    for fill in [0xFFu8, 0x00, 0x80] {
        h.plan(|p| p.log_page_patch = vec![(0, vec![fill; 4096])]);
        let smart = ctrl.smart_log().unwrap();
        let _ = format!("{smart:?}");
        let errors = ctrl.error_log().unwrap();
        assert_eq!(errors.len(), if fill == 0 { 0 } else { 64 }, "{fill:#x}");
        let _ = format!("{errors:?}");
    }
}
