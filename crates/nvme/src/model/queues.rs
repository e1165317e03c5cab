//! Queue state of the controller model and the fetch/execute/complete loop.

use super::{ControllerModel, IoQueueInfo};
use crate::spec::log::ErrorLogEntry;
use crate::spec::status::GenericStatus;
use crate::spec::{Cqe, Sqe, Status};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// Most submission queue entries fetched with one DMA read.
const FETCH_BATCH: u16 = 64;

/// A submission queue as the controller tracks it.
pub(crate) struct Sq {
    pub qid: u16,
    pub base: u64,
    pub size: u16,
    pub cqid: u16,
    pub head: u16,
    pub tail: u16,
    /// Commands fetched but not completed (asynchronous events, stalled I/O): their CIDs
    /// must not be reused.
    pub held: HashSet<u16>,
}

/// A completion queue as the controller tracks it.
pub(crate) struct Cq {
    pub base: u64,
    pub size: u16,
    pub tail: u16,
    pub phase: bool,
    pub head: u16,
    pub sqs: Vec<u16>,
}

impl Cq {
    fn is_full(&self) -> bool {
        (self.tail + 1) % self.size == self.head
    }
    fn used(&self) -> u16 {
        (self.tail + self.size - self.head) % self.size
    }
}

#[derive(Default)]
pub(crate) struct QueueTable {
    pub sqs: HashMap<u16, Arc<Mutex<Sq>>>,
    pub cqs: HashMap<u16, Arc<Mutex<Cq>>>,
}

impl QueueTable {
    pub fn reset_with_admin(&mut self, asq: u64, sq_entries: u16, acq: u64, cq_entries: u16) {
        self.sqs.clear();
        self.cqs.clear();
        self.cqs
            .insert(0, Arc::new(Mutex::new(Cq::new(acq, cq_entries))));
        self.cqs.get(&0).unwrap().lock().sqs.push(0);
        self.sqs
            .insert(0, Arc::new(Mutex::new(Sq::new(0, asq, sq_entries, 0))));
    }

    pub fn io_queue_infos(&self) -> Vec<IoQueueInfo> {
        let mut v: Vec<IoQueueInfo> = self
            .sqs
            .values()
            .filter_map(|sq| {
                let sq = sq.lock();
                let cq = self.cqs.get(&sq.cqid)?.lock();
                (sq.qid != 0).then(|| IoQueueInfo {
                    sqid: sq.qid,
                    sq_base: sq.base,
                    sq_entries: sq.size,
                    cqid: sq.cqid,
                    cq_base: cq.base,
                    cq_entries: cq.size,
                })
            })
            .collect();
        v.sort_by_key(|q| q.sqid);
        v
    }
}

impl Sq {
    pub fn new(qid: u16, base: u64, size: u16, cqid: u16) -> Self {
        Sq {
            qid,
            base,
            size,
            cqid,
            head: 0,
            tail: 0,
            held: HashSet::new(),
        }
    }
}

impl Cq {
    pub fn new(base: u64, size: u16) -> Self {
        Cq {
            base,
            size,
            tail: 0,
            phase: true,
            head: 0,
            sqs: Vec::new(),
        }
    }
}

/// What executing a command produced.
pub(crate) enum Outcome {
    /// Post a completion with this status and DW0.
    Complete(Status, u32),
    /// Keep the command outstanding without completing it.
    Hold,
}

impl Outcome {
    pub fn ok() -> Self {
        Outcome::Complete(Status::SUCCESS, 0)
    }
    pub fn err(s: impl Into<Status>) -> Self {
        Outcome::Complete(s.into(), 0)
    }
}

impl ControllerModel {
    fn sq(&self, qid: u16) -> Option<Arc<Mutex<Sq>>> {
        self.queues.read().sqs.get(&qid).cloned()
    }
    fn cq(&self, qid: u16) -> Option<Arc<Mutex<Cq>>> {
        self.queues.read().cqs.get(&qid).cloned()
    }

    pub(super) fn sq_tail_doorbell(&self, qid: u16, tail: u16) {
        let Some(sq) = self.sq(qid) else {
            return self.doorbell_error(format!(
                "SQ tail doorbell of queue {qid}, which does not exist"
            ));
        };
        let mut s = sq.lock();
        if tail >= s.size {
            return self.doorbell_error(format!(
                "SQ {qid} tail {tail} is not below the queue size {}",
                s.size
            ));
        }
        s.tail = tail;
        if qid != 0 && self.cfg.external_io_queues {
            return;
        }
        self.process_sq(&mut s);
    }

    pub(super) fn cq_head_doorbell(&self, qid: u16, head: u16) {
        let Some(cq) = self.cq(qid) else {
            return self.doorbell_error(format!(
                "CQ head doorbell of queue {qid}, which does not exist"
            ));
        };
        let sqs = {
            let mut c = cq.lock();
            if head >= c.size {
                return self.doorbell_error(format!(
                    "CQ {qid} head {head} is not below the queue size {}",
                    c.size
                ));
            }
            let consumed = (head + c.size - c.head) % c.size;
            if consumed > c.used() {
                return self.doorbell_error(format!(
                    "CQ {qid} head {head} passes the entries posted (head {}, tail {})",
                    c.head, c.tail
                ));
            }
            c.head = head;
            c.sqs.clone()
        };
        if qid != 0 && self.cfg.external_io_queues {
            return;
        }
        // Entries freed: resume submission queues that stopped on a full CQ.
        for sqid in sqs {
            if let Some(sq) = self.sq(sqid) {
                self.process_sq(&mut sq.lock());
            }
        }
    }

    /// Fetches and executes commands until the SQ is empty or its CQ is full.
    ///
    /// Entries are fetched in batches (up to the tail or the end of the ring, at most
    /// [`FETCH_BATCH`]), one DMA read each, as controllers do: a controller on the CPU
    /// that reaches GPU memory through copies pays one copy per batch, not per entry.
    /// Entries fetched but not executed (the CQ filled up) are fetched again later.
    pub(super) fn process_sq(&self, sq: &mut Sq) {
        let mut raw = Vec::new();
        while sq.head != sq.tail {
            let Some(cq) = self.cq(sq.cqid) else { return };
            if cq.lock().is_full() {
                return; // resumed by the CQ head doorbell
            }
            let ahead = if sq.tail > sq.head {
                sq.tail - sq.head
            } else {
                sq.size - sq.head
            };
            raw.resize(64 * ahead.min(FETCH_BATCH) as usize, 0);
            if self
                .dma
                .read(sq.base + sq.head as u64 * 64, &mut raw)
                .is_err()
            {
                // The queue's memory vanished under us: a real controller would fail hard.
                self.regs.lock().csts.0 |= 2;
                return;
            }
            for entry in raw.chunks_exact(64) {
                if cq.lock().is_full() {
                    return;
                }
                let entry: &[u8; 64] = entry.try_into().expect("64-byte chunk");
                self.execute_fetched(sq, &cq, Sqe::from_bytes(entry));
            }
        }
    }

    /// Executes one fetched entry and posts its completion (or holds it).
    fn execute_fetched(&self, sq: &mut Sq, cq: &Mutex<Cq>, sqe: Sqe) {
        sq.head = (sq.head + 1) % sq.size;
        let cid = sqe.cid();
        let outcome = if sq.held.contains(&cid) {
            Outcome::err(GenericStatus::CommandIdConflict)
        } else if sq.qid == 0 {
            self.execute_admin(&sqe)
        } else {
            self.execute_io(&sqe)
        };
        match outcome {
            Outcome::Hold => {
                sq.held.insert(cid);
            }
            Outcome::Complete(status, dw0) => {
                if !status.is_success() {
                    self.record_error(ErrorLogEntry {
                        sqid: sq.qid,
                        cid,
                        status,
                        parameter_error_location: 0xFFFF,
                        lba: if sq.qid != 0 { sqe.slba() } else { 0 },
                        nsid: sqe.nsid,
                        ..Default::default()
                    });
                }
                self.post(cq, sq, cid, status, dw0);
            }
        }
    }

    /// Writes a completion entry. The status word (with the phase tag) is written last,
    /// after a release fence, so a driver that sees the new phase sees the whole entry.
    pub(super) fn post(&self, cq: &Mutex<Cq>, sq: &Sq, cid: u16, status: Status, dw0: u32) {
        let mut c = cq.lock();
        debug_assert!(!c.is_full());
        let cqe = Cqe::new(cid, sq.qid, sq.head, dw0, status, c.phase);
        let bytes = cqe.to_bytes();
        let at = c.base + c.tail as u64 * 16;
        let ok = self.dma.write(at, &bytes[..14]).is_ok() && {
            fence(Ordering::Release);
            self.dma.write(at + 14, &bytes[14..]).is_ok()
        };
        if !ok {
            self.regs.lock().csts.0 |= 2;
            return;
        }
        self.stats.commands.fetch_add(1, Ordering::Relaxed);
        c.tail += 1;
        if c.tail == c.size {
            c.tail = 0;
            c.phase = !c.phase;
        }
    }

    /// Completes every held command of `sq` with `status` (used when the SQ is deleted).
    pub(super) fn abort_held(&self, sq: &mut Sq, status: Status) {
        let Some(cq) = self.cq(sq.cqid) else { return };
        let held: Vec<u16> = sq.held.drain().collect();
        for cid in held {
            if cq.lock().is_full() {
                break;
            }
            self.post(&cq, sq, cid, status, 0);
        }
    }
}
