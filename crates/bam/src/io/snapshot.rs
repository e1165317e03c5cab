//! A queue pair's protocol state read back from GPU memory: what the device library's
//! queue protocol (`crates/bam/cuda/include/bam/detail/queue.cuh`) believes of each slot, the submission
//! entries and the completion entries. For diagnosis of a queue that failed; consistent
//! only when no kernel is using the queue pair.

use super::IoArray;
use crate::abi::{QpState, QpView};
use crate::error::{Error, Result};
use std::fmt::Write as _;

/// One queue pair's words, as [`IoArray::queue_snapshot`] read them.
#[derive(Clone, Debug)]
pub struct QueueSnapshot {
    /// The queue pair's view (SSD, queue id, depth, addresses).
    pub view: QpView,
    /// Its shared-protocol state (tickets, tail word, CQ head word, failed).
    pub state: QpState,
    /// Per slot: the lap + 1 of the ticket whose entry was published last (`mark`).
    pub mark: Vec<u32>,
    /// Per slot: a completion handed to its owner and not yet taken (`cpl`).
    pub cpl: Vec<u32>,
    /// Per slot: the lap + 1 of the ticket released last (`seq`).
    pub seq: Vec<u32>,
    /// Per SQ entry: command dword 0 (opcode, CID) and the starting LBA.
    pub sqe: Vec<(u32, u64)>,
    /// Per CQ entry: dword 2 (SQ head, SQ id) and dword 3 (CID, phase, status).
    pub cqe: Vec<(u32, u32)>,
}

impl QueueSnapshot {
    /// The ticket the SQ tail word says was rung last, and the announcers it counts.
    pub fn tail(&self) -> (u64, u64) {
        (
            self.state.sq_tail >> 20,
            self.state.sq_tail & ((1 << 20) - 1),
        )
    }

    /// What the queue holds for slot `cid` (a CID's low bits; higher bits are ignored), in one line.
    pub fn slot(&self, cid: usize) -> String {
        let cid = cid % self.sqe.len().max(1);
        let Some(&(dw0, slba)) = self.sqe.get(cid) else {
            return format!("slot {cid}: out of range (depth {})", self.view.depth);
        };
        format!(
            "slot {cid}: mark {} seq {} cpl {:#x}; SQE opcode {:#04x} cid {} slba {slba}",
            self.mark[cid],
            self.seq[cid],
            self.cpl[cid],
            dw0 & 0xff,
            dw0 >> 16
        )
    }

    /// A readable account: the state words, the slots around `cid` and the CQ entries
    /// whose DW3 equals `dw3` (where the controller posted that completion).
    pub fn describe(&self, cid: usize, dw3: u32) -> String {
        let st = &self.state;
        let (tail, announced) = self.tail();
        let depth = self.view.depth as usize;
        let cid = cid % depth.max(1);
        let mut s = format!(
            "ssd {} qid {} depth {depth}: tickets {} tail {tail} (+{announced} announced) CQ head {}{} \
             rung {} failed {} completions {}\n",
            self.view.ssd,
            self.view.qid,
            st.sq_ticket,
            st.cq_head >> 1,
            if st.cq_head & 1 != 0 { " (locked)" } else { "" },
            st.cq_rung,
            st.failed,
            st.completions
        );
        for k in cid.saturating_sub(2)..(cid + 3).min(depth) {
            let _ = writeln!(s, "  {}", self.slot(k));
        }
        for (i, &(dw2, d3)) in self.cqe.iter().enumerate() {
            if d3 == dw3 {
                let _ = writeln!(
                    s,
                    "  CQ entry {i} holds that completion: SQ head {} (SQ tail rung: {})",
                    dw2 & 0xffff,
                    tail % depth as u64
                );
            }
        }
        s
    }
}

impl IoArray {
    /// Reads queue pair `qp`'s protocol words, submission and completion entries back
    /// from GPU memory (see [`QueueSnapshot`]).
    pub fn queue_snapshot(&self, qp: usize) -> Result<QueueSnapshot> {
        let view = *self
            .queue_pairs()
            .get(qp)
            .ok_or_else(|| Error::InvalidArgument(format!("no queue pair {qp}")))?;
        let depth = view.depth as usize;
        let base = self.qmem.ptr();
        let off = |addr: u64| (addr - base) as usize;
        let state = self.qp_state(qp)?;
        let mut slots = vec![0u32; 3 * depth];
        self.qmem.read(off(view.slots), &mut slots)?;
        let mut sq = vec![0u32; 16 * depth];
        self.qmem.read(off(view.sq), &mut sq)?;
        let mut cq = vec![0u32; 4 * depth];
        self.qmem.read(off(view.cq), &mut cq)?;
        Ok(QueueSnapshot {
            view,
            state,
            mark: slots[..depth].to_vec(),
            cpl: slots[depth..2 * depth].to_vec(),
            seq: slots[2 * depth..].to_vec(),
            sqe: sq
                .chunks_exact(16)
                .map(|e| (e[0], e[10] as u64 | (e[11] as u64) << 32))
                .collect(),
            cqe: cq.chunks_exact(4).map(|e| (e[2], e[3])).collect(),
        })
    }

    /// The index of the queue pair of SSD `ssd` with NVMe queue id `qid`.
    pub fn queue_pair_index(&self, ssd: u16, qid: u16) -> Option<usize> {
        self.queue_pairs()
            .iter()
            .position(|q| q.ssd == ssd && q.qid == qid)
    }
}
