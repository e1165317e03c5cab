//! The driver against a hostile device (see `support/hostile.rs`): every case ends in a
//! typed error or a correct result, never a panic, a hang or wrong data returned as Ok.

#[path = "support/hostile.rs"]
mod hostile;

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

/// Finding: after an I/O timeout every one-shot command used the same tag, so the next
/// read took the late completion of the timed-out one as its own and returned Ok before
/// its data arrived.
#[test]
fn late_completion_is_never_taken_by_the_next_command() {
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
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
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
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
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
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
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
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
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
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
    let (h, ctrl) = up(ModelConfig::ram(1 << 20));
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = ctrl.create_io_queue_pair(4).unwrap();
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

#[path = "support/cases.rs"]
mod support_cases;
use support_cases::cases;

#[derive(Clone, Debug)]
enum Action {
    Write { lba: u64, blocks: u64, seed: u8 },
    Read { lba: u64, blocks: u64 },
    ReadDma { lba: u64, blocks: u64 },
    Zero { lba: u64, blocks: u64 },
    Flush,
    Fault(CqeFault, u32),
    Swallow(bool),
    Lag(bool),
    Release,
    NewPair(u32),
}

fn action() -> impl Strategy<Value = Action> {
    let fault = prop_oneof![
        Just(CqeFault::BadCid),
        Just(CqeFault::Duplicate),
        Just(CqeFault::PhaseGlitch),
        Just(CqeFault::WrongSqHead),
        Just(CqeFault::StaleCid),
    ];
    prop_oneof![
        4 => (0u64..56, 1u64..9, any::<u8>()).prop_map(|(lba, blocks, seed)| Action::Write { lba, blocks, seed }),
        4 => (0u64..56, 1u64..9).prop_map(|(lba, blocks)| Action::Read { lba, blocks }),
        2 => (0u64..56, 1u64..9).prop_map(|(lba, blocks)| Action::ReadDma { lba, blocks }),
        1 => (0u64..56, 1u64..9).prop_map(|(lba, blocks)| Action::Zero { lba, blocks }),
        1 => Just(Action::Flush),
        2 => (fault, 1u32..3).prop_map(|(f, n)| Action::Fault(f, n)),
        1 => any::<bool>().prop_map(Action::Swallow),
        1 => any::<bool>().prop_map(Action::Lag),
        1 => Just(Action::Release),
        1 => prop_oneof![Just(2u32), Just(3), Just(8), Just(32)].prop_map(Action::NewPair),
    ]
}

fn block(lba: u64, seed: u8) -> Vec<u8> {
    (0..512u64)
        .map(|i| (lba.wrapping_mul(131) ^ i.wrapping_mul(7) ^ seed as u64) as u8 | 1)
        .collect()
}

/// Driver action sequences against the hostile device: every step ends in a typed error
/// or a correct result, and every Ok read returns exactly what was last written where
/// that is known (a write that failed may or may not have landed: unknown).
fn run_actions(actions: &[Action]) -> Result<(), TestCaseError> {
    let h = Hostile::new(ModelConfig::ram(64 << 10));
    let opts = ControllerOptions {
        admin_timeout: Duration::from_millis(500),
        io_timeout: Duration::from_millis(15),
        ..ControllerOptions::default()
    };
    let ctrl = Controller::new(h.clone() as Arc<dyn Transport>, opts).unwrap();
    let ns = ctrl.namespace(1).unwrap();
    let mut qp = Some(ctrl.create_io_queue_pair(8).unwrap());
    // Known contents: Some(seed) (0 = zeroes, as the medium starts), None = unknown.
    let mut shadow: HashMap<u64, Option<u8>> = HashMap::new();
    let known = |shadow: &HashMap<u64, Option<u8>>, lba: u64| -> Option<Vec<u8>> {
        match shadow.get(&lba) {
            None | Some(Some(0)) => Some(vec![0; 512]),
            Some(Some(s)) => Some(block(lba, *s)),
            Some(None) => None,
        }
    };
    for a in actions {
        let Some(q) = qp.as_mut() else { break };
        let r: Result<(), Error> = match a {
            Action::Write { lba, blocks, seed } => {
                let seed = (*seed).max(1);
                let data: Vec<u8> = (*lba..lba + blocks).flat_map(|l| block(l, seed)).collect();
                let r = q.write_from(&ns, *lba, &data);
                for l in *lba..lba + blocks {
                    shadow.insert(l, if r.is_ok() { Some(seed) } else { None });
                }
                r
            }
            Action::Zero { lba, blocks } => {
                let r = q.write_zeroes(&ns, *lba, *blocks);
                for l in *lba..lba + blocks {
                    shadow.insert(l, if r.is_ok() { Some(0) } else { None });
                }
                r
            }
            Action::Read { lba, blocks } => {
                let mut out = vec![0u8; *blocks as usize * 512];
                let r = q.read_into(&ns, *lba, &mut out);
                if r.is_ok() {
                    for (i, l) in (*lba..lba + blocks).enumerate() {
                        if let Some(want) = known(&shadow, l) {
                            prop_assert_eq!(
                                &out[i * 512..(i + 1) * 512],
                                &want[..],
                                "LBA {} after {:?}",
                                l,
                                a
                            );
                        }
                    }
                }
                r
            }
            Action::ReadDma { lba, blocks } => {
                let mut buf = ctrl.transport().alloc_dma(*blocks as usize * 512).unwrap();
                let r = q.read_dma(&ns, *lba, &mut buf, 0, *blocks as usize * 512);
                if r.is_ok() {
                    for (i, l) in (*lba..lba + blocks).enumerate() {
                        if let Some(want) = known(&shadow, l) {
                            prop_assert_eq!(
                                &buf.as_slice()[i * 512..(i + 1) * 512],
                                &want[..],
                                "LBA {} after {:?}",
                                l,
                                a
                            );
                        }
                    }
                }
                r
            }
            Action::Flush => q.flush(&ns),
            Action::Fault(f, n) => {
                h.plan(|p| {
                    p.cqe_fault = Some(*f);
                    p.cqe_fault_count = *n;
                });
                Ok(())
            }
            Action::Swallow(on) => {
                h.plan(|p| p.swallow_io = *on);
                Ok(())
            }
            Action::Lag(on) => {
                h.plan(|p| p.lag_io = *on);
                Ok(())
            }
            Action::Release => {
                h.release_doorbells();
                Ok(())
            }
            Action::NewPair(depth) => {
                drop(qp.take());
                h.forget_io_queues();
                qp = Some(ctrl.create_io_queue_pair(*depth).unwrap());
                Ok(())
            }
        };
        if let Err(e) = r {
            prop_assert!(
                matches!(
                    e,
                    Error::Timeout { .. }
                        | Error::Protocol(_)
                        | Error::QueuePoisoned { .. }
                        | Error::Io { .. }
                ),
                "untyped or unexpected error after {:?}: {}",
                a,
                e
            );
            if matches!(e, Error::QueuePoisoned { .. }) {
                // Writes it had outstanding are already unknown in the shadow.
                drop(qp.take());
                h.plan(|p| {
                    p.swallow_io = false;
                    p.lag_io = false;
                });
                h.forget_io_queues();
                qp = Some(ctrl.create_io_queue_pair(8).unwrap());
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    #[test]
    fn driver_action_sequences_against_a_hostile_device(actions in proptest::collection::vec(action(), 1..24)) {
        run_actions(&actions)?;
    }
}
