//! A queue pair driven from the CPU in "GPU memory", as the GPU would drive it.

use crate::stub::StubMem;
use crate::{BASE_LBA, DOORBELLS, PAGE};
use bam::io::attach::Attached;
use bam_nvme::spec::{Cqe, Sqe, Status};
use bam_nvme::transport::kmod::KmodTransport;
use bam_nvme::Transport;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// How a command or a wait failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GpuIoError {
    #[error("queue {qid}: {got} of {want} completions after {waited:?}")]
    Timeout {
        qid: u16,
        got: usize,
        want: usize,
        waited: Duration,
    },
    #[error("queue {qid}: command {cid} failed: {status}")]
    Nvme { qid: u16, cid: u16, status: Status },
    #[error("queue {qid}: completion for unknown command {cid}")]
    Protocol { qid: u16, cid: u16 },
    #[error("LBA {lba}: read-back differs from what was written at byte {at}")]
    Mismatch { lba: u64, at: usize },
}

/// A queue pair as the CPU drives it: its place in the queue memory, its doorbells
/// (offsets in BAR0) and where the CPU is in it.
pub(crate) struct Qp {
    pub(crate) qid: u16,
    pub(crate) depth: u32,
    sq_off: u64,
    pub(crate) cq_off: u64,
    sq_db: usize,
    cq_db: usize,
    tail: u32,
    pub(crate) head: u32,
    pub(crate) phase: bool,
    /// Submitted, not yet rung.
    pending: u32,
}

/// One I/O: `bytes` at `buf_off` of the buffer region to or from `lba`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Io {
    pub(crate) write: bool,
    pub(crate) lba: u64,
    pub(crate) blocks: u32,
    pub(crate) buf_off: u64,
}

/// What driving an attachment's queues needs: the transport (doorbells), the
/// attachment, its queue and buffer memory, the namespace.
pub(crate) struct Ctx<'a> {
    t: &'a KmodTransport,
    a: &'a Attached,
    queues: &'a StubMem,
    pub(crate) buf: &'a StubMem,
    nsid: u32,
    pub(crate) lba_size: u64,
    timeout: Duration,
    /// First LBA of this attachment's slots on the namespace.
    pub(crate) base_lba: u64,
}

impl<'a> Ctx<'a> {
    /// The context of attachment `a`, its slots from [`BASE_LBA`] on.
    pub(crate) fn new(
        t: &'a KmodTransport,
        a: &'a Attached,
        queues: &'a StubMem,
        buf: &'a StubMem,
        timeout: Duration,
    ) -> Self {
        Ctx {
            t,
            a,
            queues,
            buf,
            nsid: a.ssds[0].nsid,
            lba_size: a.lba_size as u64,
            timeout,
            base_lba: BASE_LBA,
        }
    }

    /// Bus address of byte `off` of the buffer region (`buf_iova` of io.cuh).
    fn buf_iova(&self, off: u64) -> u64 {
        match &self.a.iova_table {
            None => self.a.buf.base + off,
            Some(t) => {
                let shift = self.a.buf.iova_shift;
                t[(off >> shift) as usize] + (off & ((1 << shift) - 1))
            }
        }
    }

    /// PRP1/PRP2 for `bytes` at `off` of the buffer region (`build_prps` of io.cuh).
    fn prps(&self, off: u64, bytes: u64) -> (u64, u64) {
        let b = &self.a.buf;
        let prp1 = self.buf_iova(off);
        let first = PAGE - (off & (PAGE - 1));
        if bytes <= first {
            return (prp1, 0);
        }
        let next = off + first;
        if bytes - first <= PAGE {
            return (prp1, self.buf_iova(next));
        }
        assert!(b.prp_stride != 0, "transfer of {bytes} B needs a PRP list");
        let slot = off / b.slot_bytes;
        let slot_start = slot * b.slot_bytes;
        assert!(
            off + bytes <= slot_start + b.slot_bytes,
            "I/O crosses a slot"
        );
        let idx = (next - slot_start) / PAGE;
        (
            prp1,
            self.buf_iova(b.prp_off + slot * b.prp_stride as u64 + idx * 8),
        )
    }

    /// Writes the SQE of `io` (command id `cid`) at the queue's tail; not rung yet.
    pub(crate) fn submit(&self, q: &mut Qp, io: &Io, cid: u16) {
        let mut sqe = if io.write {
            Sqe::write(self.nsid, io.lba, io.blocks)
        } else {
            Sqe::read(self.nsid, io.lba, io.blocks)
        };
        let (p1, p2) = self.prps(io.buf_off, io.blocks as u64 * self.lba_size);
        sqe.set_prps(p1, p2);
        sqe.set_cid(cid);
        let off = q.sq_off + q.tail as u64 * 64;
        let p = self.queues.at(off, 64) as *mut Sqe;
        // SAFETY: a 64-byte, 64-byte aligned SQ entry of our queue memory (checked by
        // `at`); volatile because the controller reads it by DMA.
        unsafe { std::ptr::write_volatile(p, sqe) };
        q.tail = (q.tail + 1) % q.depth;
        q.pending += 1;
    }

    /// Rings the SQ tail doorbell of `q` if it has unrung entries.
    pub(crate) fn ring(&self, q: &mut Qp) {
        if q.pending == 0 {
            return;
        }
        // SQEs and data are in memory before the doorbell write reaches the controller.
        fence(Ordering::SeqCst);
        // SAFETY: this queue's own SQ doorbell; its SQ, CQ and data memory stay mapped for
        // the queue's life.
        unsafe { self.t.write32(q.sq_db, q.tail) };
        q.pending = 0;
    }

    /// Collects `want` completions of `q` (bounded by the timeout); returns (cid, status)
    /// in completion order. Rings the CQ head doorbell.
    pub(crate) fn reap(&self, q: &mut Qp, want: usize) -> Result<Vec<(u16, Status)>, GpuIoError> {
        let start = Instant::now();
        let mut out = Vec::with_capacity(want);
        while out.len() < want {
            let off = q.cq_off + q.head as u64 * 16;
            let p = self.queues.at(off, 16) as *const Cqe;
            // SAFETY: a 16-byte aligned CQ entry of our queue memory; the controller
            // writes it by DMA, hence the volatile read.
            let cqe = unsafe { std::ptr::read_volatile(p) };
            if cqe.phase() != q.phase {
                if start.elapsed() > self.timeout {
                    if !out.is_empty() {
                        // SAFETY: this queue's own CQ head doorbell, past consumed entries.
                        unsafe { self.t.write32(q.cq_db, q.head) };
                    }
                    return Err(GpuIoError::Timeout {
                        qid: q.qid,
                        got: out.len(),
                        want,
                        waited: start.elapsed(),
                    });
                }
                std::hint::spin_loop();
                continue;
            }
            // the entry (and the data of a read) is read after its phase bit
            fence(Ordering::Acquire);
            // SAFETY: as above; re-read after the fence so that every field is current.
            let cqe = unsafe { std::ptr::read_volatile(p) };
            if cqe.sq_id != q.qid {
                return Err(GpuIoError::Protocol {
                    qid: q.qid,
                    cid: cqe.cid,
                });
            }
            out.push((cqe.cid, cqe.status()));
            q.head += 1;
            if q.head == q.depth {
                q.head = 0;
                q.phase = !q.phase;
            }
        }
        fence(Ordering::SeqCst);
        // SAFETY: this queue's own CQ head doorbell, past consumed entries.
        unsafe { self.t.write32(q.cq_db, q.head) };
        Ok(out)
    }
}

/// Runs `ios` (one batch per queue pair at a time, all queue pairs at once): submit, ring
/// every queue, reap every queue; every status must be success.
pub(crate) fn run_batch(cx: &Ctx, qps: &mut [Qp], batches: &[Vec<Io>]) -> Result<(), GpuIoError> {
    for (q, ios) in qps.iter_mut().zip(batches) {
        for (i, io) in ios.iter().enumerate() {
            cx.submit(q, io, i as u16);
        }
    }
    for q in qps.iter_mut() {
        cx.ring(q);
    }
    for (q, ios) in qps.iter_mut().zip(batches) {
        let done = cx.reap(q, ios.len())?;
        let mut seen = vec![false; ios.len()];
        for (cid, status) in done {
            if cid as usize >= ios.len() || seen[cid as usize] {
                return Err(GpuIoError::Protocol { qid: q.qid, cid });
            }
            seen[cid as usize] = true;
            if !status.is_success() {
                return Err(GpuIoError::Nvme {
                    qid: q.qid,
                    cid,
                    status,
                });
            }
        }
    }
    Ok(())
}

/// The CPU's view of an attachment's queue pairs (queue memory at device address `qbase`).
pub(crate) fn qps_of(a: &Attached, qbase: u64) -> Vec<Qp> {
    a.qps
        .iter()
        .map(|v| Qp {
            qid: v.qid,
            depth: v.depth,
            sq_off: v.sq - qbase,
            cq_off: v.cq - qbase,
            sq_db: (v.sq_db - DOORBELLS) as usize,
            cq_db: (v.cq_db - DOORBELLS) as usize,
            tail: 0,
            head: 0,
            phase: true,
            pending: 0,
        })
        .collect()
}
