//! A hostile device for tests: a [`Transport`] wrapper over the strict controller model
//! that lies in the ways a broken or malicious controller can.
//!
//! Everything is injected from the transport side, as a device would: register values
//! (CAP, all-ones reads of a device that is gone), doorbells that are swallowed (commands
//! never complete: timeouts) or forwarded one write late (late completions), completion
//! entries rewritten after the model posts them (bad CIDs, duplicates, phase glitches,
//! wrong SQ heads, absurd Set Features results; on the I/O and on the admin queue),
//! identify and log page data rewritten after the model's DMA (absurd values), CSTS
//! glitches (CFS set at shutdown, RDY dropping mid-run, CFS at any time), and DMA memory
//! that becomes unreachable (revocation, through the model's `DmaSpace::set_revoked`
//! hook).
//!
//! The driver must end every case in a typed error or a correct result: never a panic,
//! a hang, or wrong data returned as `Ok`.

#![allow(dead_code)]

use bam_nvme::model::{ModelConfig, ModelTransport};
use bam_nvme::spec::registers::{doorbell_from_offset, offset};
use bam_nvme::spec::{Aqa, Cqe, Sqe};
use bam_nvme::{DmaBuffer, Transport};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// A lie told about completion entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqeFault {
    /// The CID is changed to one that is not outstanding.
    BadCid,
    /// The entry is posted twice (the copy in the next slot, with that slot's phase).
    Duplicate,
    /// A stale entry with the current phase appears in the next slot.
    PhaseGlitch,
    /// The SQ head pointer is set outside the ring or beyond the tail.
    WrongSqHead,
    /// The status says success but the CID is a stale copy of an earlier command's.
    StaleCid,
}

/// What the device does wrong, switchable at any time.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// CAP reads as this value.
    pub cap: Option<u64>,
    /// Registers read as all ones (the device fell off the bus).
    pub gone: bool,
    /// I/O SQ tail doorbells are dropped: commands are never fetched (timeouts).
    pub swallow_io: bool,
    /// Admin SQ tail doorbells are dropped.
    pub swallow_admin: bool,
    /// I/O SQ tail doorbells are forwarded one write late: each write forwards the
    /// previous value (the device executes commands one doorbell behind).
    pub lag_io: bool,
    /// Fault applied to the next `cqe_fault_count` new I/O completions.
    pub cqe_fault: Option<CqeFault>,
    /// How many I/O completions the fault applies to.
    pub cqe_fault_count: u32,
    /// Bytes written over Identify Controller data after the model's DMA.
    pub identify_ctrl_patch: Vec<(usize, Vec<u8>)>,
    /// Bytes written over Identify Namespace data after the model's DMA.
    pub identify_ns_patch: Vec<(usize, Vec<u8>)>,
    /// Bytes written over the Active Namespace list after the model's DMA.
    pub ns_list_patch: Vec<(usize, Vec<u8>)>,
    /// Set Features (Number of Queues) completes with this DW0.
    pub number_of_queues_dw0: Option<u32>,
    /// Fault applied to the next `admin_cqe_fault_count` new admin completions.
    pub admin_cqe_fault: Option<CqeFault>,
    /// How many admin completions the fault applies to.
    pub admin_cqe_fault_count: u32,
    /// Bytes written over log page data (Get Log Page, any log) after the model's DMA.
    pub log_page_patch: Vec<(usize, Vec<u8>)>,
    /// Once the host writes CC.SHN, CSTS reads with CFS set (a shutdown that failed,
    /// reported beside SHST = complete).
    pub cfs_at_shutdown: bool,
    /// CSTS reads with RDY cleared (the controller reset itself behind the driver).
    pub rdy_dropped: bool,
    /// CSTS reads with CFS set.
    pub cfs: bool,
}

#[derive(Default)]
struct CqView {
    tail: u16,
    phase: bool,
    last: Option<Cqe>,
}

#[derive(Default)]
struct State {
    /// Last value written to each SQ tail doorbell (before lagging).
    sq_tail_written: HashMap<u16, u32>,
    /// The value last forwarded to each SQ tail doorbell.
    sq_tail_forwarded: HashMap<u16, u32>,
    /// Our view of each CQ, to find entries the model posts.
    cqs: HashMap<u16, CqView>,
    /// Admin commands by CID, for patching their data and completions.
    admin: HashMap<u16, Sqe>,
}

/// The hostile transport.
pub struct Hostile {
    inner: Arc<ModelTransport>,
    plan: Mutex<Plan>,
    state: Mutex<State>,
    /// The host wrote CC.SHN since the last enable.
    shutdown_notified: std::sync::atomic::AtomicBool,
    /// Identify Namespace patches actually written over the model's data.
    ns_patches_applied: std::sync::atomic::AtomicU32,
}

impl Hostile {
    /// A hostile device over a model built from `cfg`.
    pub fn new(cfg: ModelConfig) -> Arc<Self> {
        Arc::new(Hostile {
            inner: Arc::new(ModelTransport::new(cfg.build().unwrap())),
            plan: Mutex::new(Plan::default()),
            state: Mutex::new(State::default()),
            shutdown_notified: std::sync::atomic::AtomicBool::new(false),
            ns_patches_applied: std::sync::atomic::AtomicU32::new(0),
        })
    }
    /// The model behind it.
    pub fn model(&self) -> &Arc<bam_nvme::model::ControllerModel> {
        self.inner.model()
    }
    /// Changes the plan.
    pub fn plan(&self, f: impl FnOnce(&mut Plan)) {
        f(&mut self.plan.lock())
    }
    /// How many times Identify Namespace data was patched (a patch in the plan is
    /// applied only to the completions the harness sees).
    pub fn ns_patches_applied(&self) -> u32 {
        self.ns_patches_applied
            .load(std::sync::atomic::Ordering::SeqCst)
    }
    /// Makes all DMA memory unreachable to the controller (or reachable again).
    pub fn revoke(&self, revoked: bool) {
        self.model().dma().set_revoked(revoked);
    }
    /// Forwards the SQ tail doorbells that were swallowed or lagged (the device wakes
    /// up): every command written so far is fetched.
    pub fn release_doorbells(&self) {
        let pending: Vec<(u16, u32)> = {
            let st = self.state.lock();
            st.sq_tail_written
                .iter()
                .filter(|(q, v)| st.sq_tail_forwarded.get(q) != Some(v))
                .map(|(q, v)| (*q, *v))
                .collect()
        };
        for (qid, v) in pending {
            self.forward_sq(qid, v);
        }
    }

    /// Forgets what was seen of the I/O queues (their doorbells and completion rings):
    /// call when queues are deleted and created again with the same ids.
    pub fn forget_io_queues(&self) {
        let mut st = self.state.lock();
        st.sq_tail_written.retain(|q, _| *q == 0);
        st.sq_tail_forwarded.retain(|q, _| *q == 0);
        st.cqs.retain(|q, _| *q == 0);
    }

    fn stride(&self) -> usize {
        self.model().config();
        4 << self.model().config().dstrd
    }

    fn cq_geometry(&self, qid: u16) -> Option<(u64, u16)> {
        if qid == 0 {
            let aqa = Aqa(self.inner.read32(offset::AQA));
            Some((self.inner.read64(offset::ACQ), aqa.cq_entries() as u16))
        } else {
            self.model()
                .io_queues()
                .into_iter()
                .find(|q| q.cqid == qid)
                .map(|q| (q.cq_base, q.cq_entries))
        }
    }

    fn sq_geometry(&self, qid: u16) -> Option<(u64, u16)> {
        if qid == 0 {
            let aqa = Aqa(self.inner.read32(offset::AQA));
            Some((self.inner.read64(offset::ASQ), aqa.sq_entries() as u16))
        } else {
            self.model()
                .io_queues()
                .into_iter()
                .find(|q| q.sqid == qid)
                .map(|q| (q.sq_base, q.sq_entries))
        }
    }

    fn read_cqe(&self, at: u64) -> Option<Cqe> {
        let mut b = [0u8; 16];
        self.model().dma().read(at, &mut b).ok()?;
        Some(Cqe::from_bytes(&b))
    }

    fn write_cqe(&self, at: u64, c: &Cqe) {
        let _ = self.model().dma().write(at, &c.to_bytes());
    }

    /// Records the admin commands between the forwarded tail and `tail`.
    fn note_admin_commands(&self, from: u32, to: u32) {
        let Some((base, size)) = self.sq_geometry(0) else {
            return;
        };
        let mut i = from;
        while i != to {
            let mut b = [0u8; 64];
            if self
                .model()
                .dma()
                .read(base + i as u64 * 64, &mut b)
                .is_ok()
            {
                let sqe = Sqe::from_bytes(&b);
                self.state.lock().admin.insert(sqe.cid(), sqe);
            }
            i = (i + 1) % size as u32;
        }
    }

    fn forward_sq(&self, qid: u16, value: u32) {
        if qid == 0 {
            let from = self
                .state
                .lock()
                .sq_tail_forwarded
                .get(&0)
                .copied()
                .unwrap_or(0);
            self.note_admin_commands(from, value);
        }
        self.state.lock().sq_tail_forwarded.insert(qid, value);
        let off = bam_nvme::spec::registers::doorbell_offset(qid, false, self.stride());
        self.inner.write32(off, value);
        self.scan_cq(qid);
    }

    /// Finds the entries the model posted on CQ `qid` since the last scan and applies
    /// the plan's lies to them.
    fn scan_cq(&self, qid: u16) {
        let Some((base, size)) = self.cq_geometry(qid) else {
            return;
        };
        if size < 2 {
            return;
        }
        loop {
            let (tail, phase) = {
                let mut st = self.state.lock();
                let v = st.cqs.entry(qid).or_insert(CqView {
                    tail: 0,
                    phase: true,
                    last: None,
                });
                (v.tail, v.phase)
            };
            let at = base + tail as u64 * 16;
            let Some(mut cqe) = self.read_cqe(at) else {
                return;
            };
            if cqe.phase() != phase {
                return;
            }
            let next = (tail + 1) % size;
            let next_phase = if next == 0 { !phase } else { phase };
            let next_at = base + next as u64 * 16;
            let prev = self.state.lock().cqs.get(&qid).and_then(|v| v.last);
            if qid == 0 {
                self.patch_admin(&mut cqe);
                self.write_cqe(at, &cqe);
            }
            let fault = {
                let mut p = self.plan.lock();
                let p = &mut *p;
                let (fault, count) = if qid == 0 {
                    (p.admin_cqe_fault, &mut p.admin_cqe_fault_count)
                } else {
                    (p.cqe_fault, &mut p.cqe_fault_count)
                };
                match fault {
                    Some(f) if *count > 0 => {
                        *count -= 1;
                        Some(f)
                    }
                    _ => None,
                }
            };
            match fault {
                Some(CqeFault::BadCid) => {
                    cqe.cid ^= 0x5A5A;
                    self.write_cqe(at, &cqe);
                }
                Some(CqeFault::WrongSqHead) => {
                    // Outside the ring for small queues, beyond the tail for large.
                    cqe.sq_head = if size <= 4 {
                        size
                    } else {
                        (cqe.sq_head + size / 2 + 1) % size
                    };
                    self.write_cqe(at, &cqe);
                }
                Some(CqeFault::StaleCid) => {
                    if let Some(p) = prev {
                        cqe.cid = p.cid;
                        self.write_cqe(at, &cqe);
                    }
                }
                Some(CqeFault::Duplicate) => {
                    let mut dup = cqe;
                    dup.status = (dup.status & !1) | next_phase as u16;
                    self.write_cqe(next_at, &dup);
                }
                Some(CqeFault::PhaseGlitch) => {
                    let mut junk = prev.unwrap_or(cqe);
                    junk.status = (junk.status & !1) | next_phase as u16;
                    self.write_cqe(next_at, &junk);
                }
                None => {}
            }
            let mut st = self.state.lock();
            let v = st.cqs.get_mut(&qid).expect("inserted above");
            v.tail = next;
            v.phase = next_phase;
            v.last = Some(cqe);
        }
    }

    fn patch_admin(&self, cqe: &mut Cqe) {
        let Some(sqe) = self.state.lock().admin.get(&cqe.cid).copied() else {
            return;
        };
        let plan = self.plan.lock().clone();
        let patch = |patches: &[(usize, Vec<u8>)]| {
            for (off, bytes) in patches {
                let _ = self.model().dma().write(sqe.prp1 + *off as u64, bytes);
            }
        };
        match (sqe.opcode(), sqe.cdw10 & 0xFF) {
            (0x06, 0) => {
                if !plan.identify_ns_patch.is_empty() {
                    self.ns_patches_applied
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                patch(&plan.identify_ns_patch)
            }
            (0x06, 1) => patch(&plan.identify_ctrl_patch),
            (0x06, 2) => patch(&plan.ns_list_patch),
            (0x02, _) => patch(&plan.log_page_patch),
            (0x09, 7) => {
                if let Some(dw0) = plan.number_of_queues_dw0 {
                    cqe.dw0 = dw0;
                }
            }
            _ => {}
        }
    }
}

impl Transport for Hostile {
    fn describe(&self) -> String {
        format!("hostile:{}", self.inner.describe())
    }
    fn read32(&self, off: usize) -> u32 {
        let plan = self.plan.lock();
        if plan.gone {
            return u32::MAX;
        }
        if off == offset::CSTS {
            let (rdy_dropped, cfs) = (
                plan.rdy_dropped,
                plan.cfs
                    || (plan.cfs_at_shutdown
                        && self
                            .shutdown_notified
                            .load(std::sync::atomic::Ordering::SeqCst)),
            );
            drop(plan);
            let mut v = self.inner.read32(off);
            if rdy_dropped {
                v &= !1;
            }
            if cfs {
                v |= 2;
            }
            return v;
        }
        match (plan.cap, off) {
            (Some(cap), offset::CAP) => cap as u32,
            (Some(cap), o) if o == offset::CAP + 4 => (cap >> 32) as u32,
            _ => {
                drop(plan);
                self.inner.read32(off)
            }
        }
    }
    unsafe fn write32(&self, off: usize, value: u32) {
        if self.plan.lock().gone {
            return;
        }
        if off == offset::CC {
            // CC.SHN (bits 14-15) written: a shutdown; CC.EN cleared: a reset.
            let notified = value & (3 << 14) != 0 && value & 1 == 1;
            self.shutdown_notified
                .store(notified, std::sync::atomic::Ordering::SeqCst);
        }
        let Some((qid, is_cq)) =
            doorbell_from_offset(off, self.stride()).filter(|_| off >= offset::DOORBELLS)
        else {
            self.inner.write32(off, value);
            if off == offset::CC {
                // A reset or enable: queues start over.
                *self.state.lock() = State::default();
            }
            return;
        };
        if is_cq {
            self.inner.write32(off, value);
            self.scan_cq(qid);
            return;
        }
        let plan = self.plan.lock().clone();
        let previous = self.state.lock().sq_tail_written.insert(qid, value);
        if qid == 0 {
            if !plan.swallow_admin {
                self.forward_sq(0, value);
            }
        } else if plan.swallow_io {
            // Dropped: the device never sees these commands (until released).
        } else if plan.lag_io {
            if let Some(prev) = previous {
                if self.state.lock().sq_tail_forwarded.get(&qid) != Some(&prev) {
                    self.forward_sq(qid, prev);
                }
            }
        } else {
            self.forward_sq(qid, value);
        }
    }
    fn alloc_dma(&self, len: usize) -> bam_nvme::Result<DmaBuffer> {
        self.inner.alloc_dma(len)
    }
}
