//! Driver action sequences against the hostile device (proptest): I/O, CQE lies on both
//! queues, swallowed and late doorbells, revocation, a device that is gone, RDY drops,
//! identify patches, the SMART log and resets, in any order.

use super::*;

#[path = "../support/cases.rs"]
mod support_cases;
use support_cases::cases;

#[derive(Clone, Debug)]
enum Action {
    Write {
        lba: u64,
        blocks: u64,
        seed: u8,
    },
    Read {
        lba: u64,
        blocks: u64,
    },
    ReadDma {
        lba: u64,
        blocks: u64,
    },
    Zero {
        lba: u64,
        blocks: u64,
    },
    Flush,
    Fault(CqeFault, u32),
    Swallow(bool),
    Lag(bool),
    Release,
    NewPair(u32),
    /// DMA memory revoked (the device reports CFS) or back.
    Revoke(bool),
    /// The device falls off the bus (registers read all ones) or comes back.
    Gone(bool),
    /// CSTS.RDY reads 0 (the controller reset itself) or not.
    RdyDropped(bool),
    /// Lies on the next admin completions.
    AdminFault(CqeFault, u32),
    /// Identify Namespace data patched: size, or LBA data size, changed or absurd.
    IdentifyPatch(u8),
    /// An admin command through the (perhaps lying) admin queue.
    SmartLog,
    /// Controller reset.
    Reset,
}

fn action() -> impl Strategy<Value = Action> {
    let fault: BoxedStrategy<CqeFault> = prop_oneof![
        Just(CqeFault::BadCid),
        Just(CqeFault::Duplicate),
        Just(CqeFault::PhaseGlitch),
        Just(CqeFault::WrongSqHead),
        Just(CqeFault::StaleCid),
    ]
    .boxed();
    prop_oneof![
        4 => (0u64..56, 1u64..9, any::<u8>()).prop_map(|(lba, blocks, seed)| Action::Write { lba, blocks, seed }),
        4 => (0u64..56, 1u64..9).prop_map(|(lba, blocks)| Action::Read { lba, blocks }),
        2 => (0u64..56, 1u64..9).prop_map(|(lba, blocks)| Action::ReadDma { lba, blocks }),
        1 => (0u64..56, 1u64..9).prop_map(|(lba, blocks)| Action::Zero { lba, blocks }),
        1 => Just(Action::Flush),
        2 => (fault.clone(), 1u32..3).prop_map(|(f, n)| Action::Fault(f, n)),
        1 => any::<bool>().prop_map(Action::Swallow),
        1 => any::<bool>().prop_map(Action::Lag),
        1 => Just(Action::Release),
        1 => prop_oneof![Just(2u32), Just(3), Just(8), Just(32)].prop_map(Action::NewPair),
        1 => any::<bool>().prop_map(Action::Revoke),
        1 => any::<bool>().prop_map(Action::Gone),
        1 => any::<bool>().prop_map(Action::RdyDropped),
        1 => (fault, 1u32..3).prop_map(|(f, n)| Action::AdminFault(f, n)),
        1 => (0u8..4).prop_map(Action::IdentifyPatch),
        1 => Just(Action::SmartLog),
        1 => Just(Action::Reset),
    ]
}

/// Every way the driver may fail against the hostile device: typed.
fn is_expected_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Timeout { .. }
            | Error::Protocol(_)
            | Error::QueuePoisoned { .. }
            | Error::QueueInvalidated { .. }
            | Error::Io { .. }
            | Error::ControllerFatal { .. }
            | Error::ControllerNotReady { .. }
            | Error::ControllerNeedsReset { .. }
            | Error::DeviceUnavailable { .. }
    )
}

/// The device behaves again and the controller is reset: that must work, and so must a
/// new queue pair.
fn recover(h: &Hostile, ctrl: &Controller) -> Result<bam_nvme::IoQueuePair, TestCaseError> {
    h.plan(|p| *p = hostile::Plan::default());
    h.revoke(false);
    h.release_doorbells();
    let r = ctrl.reset();
    prop_assert!(r.is_ok(), "reset of a device behaving again: {:?}", r.err());
    h.forget_io_queues();
    let qp = ctrl.create_io_queue_pair(8);
    prop_assert!(
        qp.is_ok(),
        "queue pair after a reset: {:?}",
        qp.as_ref().err()
    );
    Ok(qp.unwrap())
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
        let q = match qp.as_mut() {
            Some(q) => q,
            None => qp.insert(recover(&h, &ctrl)?),
        };
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
                ctrl.create_io_queue_pair(*depth).map(|q| qp = Some(q))
            }
            Action::Revoke(on) => {
                h.revoke(*on);
                Ok(())
            }
            Action::Gone(on) => {
                h.plan(|p| p.gone = *on);
                Ok(())
            }
            Action::RdyDropped(on) => {
                h.plan(|p| p.rdy_dropped = *on);
                Ok(())
            }
            Action::AdminFault(f, n) => {
                h.plan(|p| {
                    p.admin_cqe_fault = Some(*f);
                    p.admin_cqe_fault_count = *n;
                });
                Ok(())
            }
            Action::IdentifyPatch(kind) => {
                let patch = match kind {
                    0 => (0, 7u64.to_le_bytes().to_vec()), // NSZE: a different size
                    1 => (0, u64::MAX.to_le_bytes().to_vec()), // NSZE: absurd
                    2 => (130, vec![20]),                  // LBAF0.LBADS: 2^20-byte blocks
                    _ => (130, vec![3]),                   // LBAF0.LBADS: 8-byte blocks
                };
                h.plan(|p| p.identify_ns_patch = vec![patch]);
                Ok(())
            }
            Action::SmartLog => ctrl.smart_log().map(|_| ()),
            Action::Reset => {
                let patched = h.ns_patches_applied();
                let r = ctrl.reset();
                if r.is_ok() {
                    h.forget_io_queues();
                    // The namespace geometry was checked again; a patched one fails.
                    prop_assert_eq!(
                        h.ns_patches_applied(),
                        patched,
                        "a reset accepted a namespace whose geometry changed"
                    );
                }
                r
            }
        };
        if let Err(e) = r {
            prop_assert!(
                is_expected_error(&e),
                "untyped or unexpected error after {:?}: {}",
                a,
                e
            );
            if matches!(
                e,
                Error::QueuePoisoned { .. } | Error::QueueInvalidated { .. }
            ) {
                // Writes it had outstanding are already unknown in the shadow. The pair
                // is given up; the controller is recovered (reset) only if a new pair
                // cannot be had.
                drop(qp.take());
                h.plan(|p| {
                    p.swallow_io = false;
                    p.lag_io = false;
                });
                h.forget_io_queues();
                qp = ctrl.create_io_queue_pair(8).ok();
            } else if matches!(
                e,
                Error::ControllerFatal { .. }
                    | Error::ControllerNotReady { .. }
                    | Error::ControllerNeedsReset { .. }
                    | Error::DeviceUnavailable { .. }
            ) || (matches!(a, Action::Reset | Action::NewPair(_) | Action::SmartLog))
            {
                drop(qp.take());
                qp = Some(recover(&h, &ctrl)?);
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
