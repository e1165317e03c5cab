//! Recovery of failed queue pairs.
//!
//! A GPU queue pair fails for good when a wait on it runs past the timeout or its
//! controller breaks the completion protocol (`crates/bam/cuda/include/bam/detail/queue.cuh`): its
//! waiters end `Aborted`, and the buffers of commands that may still be in the
//! controller's hands stay quarantined, because a late DMA may still land in them.
//! [`IoArray::recover`] gives such a queue pair back, as a real driver resets a queue:
//!
//! 1. the backend quiets its side of the queue ([`QueueService`]: the simulated
//!    controller kernel drops the queue's commands, the host-side model's workers stop
//!    forwarding its doorbells);
//! 2. the controller deletes the SQ and the CQ (Delete I/O SQ aborts what is still
//!    queued) and confirms: from then on no command of the pair is in its hands;
//! 3. the queue memory (SQ, CQ, the protocol's slot words and state) is zeroed;
//! 4. the controller creates the pair again, with the same queue id and doorbells.
//!
//! Only then are buffer slots released that users dropped while a queue pair had failed
//! (their quarantine outlives the cache or scan that held them); a cache releases its own
//! quarantined slots in `cache::Cache::recover`. When the controller does not confirm
//! the deletion, the queue pair stays failed and nothing is released.
//!
//! No kernel may use the I/O layer while it recovers (the same rule as for
//! [`IoArray::take_errors`]): the memory of a queue pair is zeroed under it.

use super::IoArray;
use crate::error::{Error, Result};
use serde::Serialize;
use std::sync::Arc;

/// A backend's side of the recovery of one queue pair.
pub(crate) trait QueueService: Send + Sync {
    /// Runs `recreate` (the controller deletes queue pair `qp`, its memory is zeroed, the
    /// controller creates it again) with the backend's side of the queue quiet, so that
    /// nothing it held from before reaches the new queue.
    fn recreate(&self, qp: usize, recreate: &mut dyn FnMut() -> Result<()>) -> Result<()>;
}

/// What [`IoArray::recover`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// The queue pairs deleted and created again (indices into
    /// [`IoArray::queue_pairs`]).
    pub queue_pairs: Vec<usize>,
    /// Buffer slots given back that users had dropped while a queue pair was failed.
    pub released_slots: u32,
}

impl IoArray {
    /// The queue pairs that have failed (a wait timed out, or the controller broke the
    /// protocol): I/O on them ends `Aborted` until [`IoArray::recover`]. Read from GPU
    /// memory; exact when no kernel is running.
    pub fn failed_queue_pairs(&self) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        for i in 0..self.queue_pairs().len() {
            if self.qp_state(i)?.failed != 0 {
                out.push(i);
            }
        }
        Ok(out)
    }

    /// Deletes every failed queue pair on its controller and creates it again, empty, at
    /// the same memory (the module docs say how); then gives back the buffer slots that
    /// were dropped while queue pairs were failed. No kernel may be using the I/O layer.
    ///
    /// Refused while a cache lives on this I/O layer (its fill service uses the queue
    /// pairs): recover through `cache::Cache::recover`, which stops the service
    /// first, and also releases the cache's quarantined slots and retries their
    /// write-backs.
    ///
    /// ```no_run
    /// # fn main() -> bam::Result<()> {
    /// # let gpu = bam::Gpu::new(0)?;
    /// # let arr = "sim:ideal".parse::<bam::storage::GpuDevice>()?.open(&gpu, &bam::io::IoConfig::new())?;
    /// let io = arr.io();
    /// if !io.failed_queue_pairs()?.is_empty() {
    ///     let r = io.recover()?;
    ///     println!("recovered queue pairs {:?}", r.queue_pairs);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn recover(&self) -> Result<Recovery> {
        if self.caches.load(std::sync::atomic::Ordering::Acquire) != 0 {
            return Err(Error::InvalidArgument(
                "a cache's fill service uses this I/O layer's queue pairs: recover through \
                 Cache::recover"
                    .into(),
            ));
        }
        self.recover_queues()
    }

    /// [`IoArray::recover`] without the check for fill queues: for the cache, whose fill
    /// service is stopped.
    pub(crate) fn recover_queues(&self) -> Result<Recovery> {
        let _one = self.recovering.lock().unwrap_or_else(|e| e.into_inner());
        let failed = self.failed_queue_pairs()?;
        let mut out = Recovery::default();
        for &qp in &failed {
            self.recreate_pair(qp).map_err(|e| Error::Recovery {
                qp,
                qid: self.queue_pairs()[qp].qid,
                ssd: self.queue_pairs()[qp].ssd,
                source: Box::new(e),
            })?;
            out.queue_pairs.push(qp);
        }
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|e| e.into_inner()));
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        for r in held {
            if let Some(i) = leases.iter().position(|&l| l == r) {
                leases.swap_remove(i);
                out.released_slots += r.1;
            }
        }
        if !out.queue_pairs.is_empty() {
            tracing::info!(queue_pairs = ?out.queue_pairs, released = out.released_slots, "queue pairs recovered");
        }
        Ok(out)
    }

    /// Queue pair `qp` deleted, zeroed and created again (the backend's side quiet).
    fn recreate_pair(&self, qp: usize) -> Result<()> {
        let a = self
            .attached
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("the I/O layer is not attached".into()))?;
        let (ssd, pair) = a.queue_pairs[qp];
        let (sq_bus, cq_bus) = a.queue_bus[qp];
        let ctrl = &a.controllers[ssd];
        let view = self.queue_pairs()[qp];
        let off = (view.sq - self.qmem.ptr()) as usize;
        // SQ, CQ, slot words and state: everything of the pair but the backend's scratch.
        let zeros = vec![0u8; self.layout.scratch];
        let mut redo = || -> Result<()> {
            ctrl.delete_raw_queue_pair_for_reuse(pair)?;
            self.qmem.write(off, &zeros)?;
            // SAFETY: the same SQ and CQ as at attach, in queue memory mapped for this
            // controller (Attached keeps the mapping) and owned by this I/O layer, which
            // deletes or abandons the pair before that memory goes.
            unsafe { ctrl.recreate_raw_queue_pair(pair, sq_bus, cq_bus)? };
            Ok(())
        };
        let service = self
            .service
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match service {
            Some(s) => s.recreate(qp, &mut redo),
            None => redo(),
        }
    }

    /// Installs the backend's side of queue recovery ([`QueueService`]).
    pub(crate) fn set_queue_service(&self, s: Arc<dyn QueueService>) {
        *self.service.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
    }

    /// A slot range whose lease ends: given back now, or, while a queue pair is failed (or
    /// that cannot be read), held until [`IoArray::recover`] has confirmed that no
    /// command that used it is in a controller's hands.
    pub(crate) fn end_lease(&self, range: (u32, u32)) {
        let failed = self.failed_queue_pairs().map_or(true, |f| !f.is_empty());
        if failed {
            tracing::warn!(
                first = range.0,
                count = range.1,
                "buffer slots held in quarantine until IoArray::recover: a queue pair has failed, \
                 and a late DMA may still land in them"
            );
            self.held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(range);
            return;
        }
        let mut v = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = v.iter().position(|&r| r == range) {
            v.swap_remove(i);
        }
    }

    /// Slot ranges held in quarantine after their lease ended ([`IoArray::end_lease`]).
    pub fn held_slots(&self) -> Vec<(u32, u32)> {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
