//! I/O queues on the controller: queue ids, the Create and Delete I/O Queue commands of a
//! pair, and raw queue pairs at caller-provided memory (e.g. GPU memory).

use super::{Controller, RawQueuePair};
use crate::spec::registers::doorbell_offset;
use crate::spec::Sqe;
use crate::{Error, Result};

impl Controller {
    /// Creates an I/O CQ and SQ at caller-provided bus addresses (e.g. GPU memory) and
    /// returns their ids and doorbell offsets.
    ///
    /// ```compile_fail
    /// # fn f(ctrl: &bam_nvme::Controller) {
    /// // Points the device at arbitrary bus addresses: only in an unsafe block.
    /// let _ = ctrl.create_raw_queue_pair(0x1000, 0x2000, 64);
    /// # }
    /// ```
    ///
    /// # Safety
    /// `sq_bus` must be the bus address of `entries * 64` bytes and `cq_bus` of
    /// `entries * 16` bytes of memory mapped for DMA by this controller, page aligned,
    /// used for nothing else, and kept mapped and alive until
    /// [`Controller::delete_raw_queue_pair`] has returned for the pair (or the
    /// controller is reset): the controller reads commands from the first and writes
    /// completions into the second at any time meanwhile.
    pub unsafe fn create_raw_queue_pair(
        &self,
        sq_bus: u64,
        cq_bus: u64,
        entries: u32,
    ) -> Result<RawQueuePair> {
        self.check_depth(entries)?;
        let qid = self.alloc_qid()?;
        // SAFETY: the caller guarantees the memory at sq_bus and cq_bus (this function's
        // contract, which is the same as create_queues').
        match unsafe { self.create_queues(qid, sq_bus, cq_bus, entries as u16) } {
            Ok(()) => {
                let stride = self.inner.cap.doorbell_stride();
                Ok(RawQueuePair {
                    qid,
                    entries: entries as u16,
                    sq_doorbell: doorbell_offset(qid, false, stride),
                    cq_doorbell: doorbell_offset(qid, true, stride),
                })
            }
            Err(e) => {
                self.free_qid(qid);
                Err(e)
            }
        }
    }

    /// Deletes a queue pair made by [`Controller::create_raw_queue_pair`].
    pub fn delete_raw_queue_pair(&self, pair: RawQueuePair) -> Result<()> {
        let r = self.delete_queues(pair.qid);
        self.free_qid(pair.qid);
        r
    }

    /// Deletes the SQ and the CQ of a queue pair made by
    /// [`Controller::create_raw_queue_pair`] and keeps its queue id for
    /// [`Controller::recreate_raw_queue_pair`]: the recovery of a queue pair that failed.
    /// When this returns Ok the controller has confirmed both deletions, so no command of
    /// the pair is in its hands any more (Delete I/O SQ aborts the commands still queued)
    /// and it neither reads the SQ nor writes the CQ again. On an error the caller must
    /// assume it still may.
    pub fn delete_raw_queue_pair_for_reuse(&self, pair: RawQueuePair) -> Result<()> {
        self.delete_queues(pair.qid)
    }

    /// Creates again, empty (head and tail 0, phase 1), a queue pair that
    /// [`Controller::delete_raw_queue_pair_for_reuse`] deleted: the same queue id, so the
    /// same doorbells. The caller zeroes the CQ memory before (a CQE left from before
    /// would look posted to a reaper of the new queue's second lap).
    ///
    /// # Safety
    /// As [`Controller::create_raw_queue_pair`].
    pub unsafe fn recreate_raw_queue_pair(
        &self,
        pair: RawQueuePair,
        sq_bus: u64,
        cq_bus: u64,
    ) -> Result<()> {
        // SAFETY: the caller's contract (this function's), which is create_queues'.
        unsafe { self.create_queues(pair.qid, sq_bus, cq_bus, pair.entries) }
    }

    pub(crate) fn check_depth(&self, depth: u32) -> Result<()> {
        let max = self.max_queue_entries();
        if depth < 2 || depth > max {
            return Err(Error::InvalidQueueDepth { depth, max });
        }
        Ok(())
    }

    pub(crate) fn alloc_qid(&self) -> Result<u16> {
        let mut q = self.inner.qids.lock();
        match (1..q.len()).find(|&i| !q[i]) {
            Some(i) => {
                q[i] = true;
                Ok(i as u16)
            }
            None => Err(Error::TooManyQueues {
                requested: q.len(),
                granted: self.inner.granted as usize,
            }),
        }
    }

    pub(crate) fn free_qid(&self, qid: u16) {
        self.inner.qids.lock()[qid as usize] = false;
    }

    /// Creates I/O CQ and SQ `qid`.
    ///
    /// # Safety
    /// As [`Controller::create_raw_queue_pair`]: the memory at `sq_bus` and `cq_bus`
    /// (`entries` SQEs and CQEs) is DMA-mapped for this controller and outlives the
    /// queues.
    pub(crate) unsafe fn create_queues(
        &self,
        qid: u16,
        sq_bus: u64,
        cq_bus: u64,
        entries: u16,
    ) -> Result<()> {
        self.admin(Sqe::create_io_cq(qid, entries, cq_bus))?;
        if let Err(e) = self.admin(Sqe::create_io_sq(qid, entries, sq_bus, qid)) {
            let _ = self.admin(Sqe::delete_io_cq(qid));
            return Err(e);
        }
        Ok(())
    }

    pub(crate) fn delete_queues(&self, qid: u16) -> Result<()> {
        let sq = self.admin(Sqe::delete_io_sq(qid));
        let cq = self.admin(Sqe::delete_io_cq(qid));
        sq.and(cq).map(|_| ())
    }
}
