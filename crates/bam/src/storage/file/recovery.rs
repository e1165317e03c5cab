//! The file backend's side of queue recovery (`IoArray::recover`): the forwarder stops,
//! the service finishes what it holds of the queue, the forwarder forgets the queue (its
//! requests in flight, their staging slots and completions: none reaches the new queue),
//! the controller deletes and creates the queue pair again, and the forwarder starts
//! again. The other queues go on where they were.

use super::abi::{FileQueue, FileSlot};
use super::forwarder::Forwarder;
use super::rings::QueueRings;
use crate::cuda::{write_device_beside, Gpu};
use crate::error::{Error, Result};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the service may take to finish a queue's requests.
const DRAIN: Duration = Duration::from_secs(10);

/// Where one queue pair's forwarder state lives.
pub(super) struct QueueState {
    /// Device address of its `bam_file_queue` entry.
    pub(super) entry: u64,
    /// The entry as built (doorbells, slot table).
    pub(super) built: FileQueue,
    /// Its rings.
    pub(super) rings: QueueRings,
}

/// One I/O layer's queues, for [`crate::io::IoArray::recover`].
pub(super) struct FileQueueService {
    pub(super) gpu: Arc<Gpu>,
    pub(super) forwarder: Arc<Mutex<Forwarder>>,
    pub(super) queues: Vec<QueueState>,
}

impl FileQueueService {
    /// Zeroes queue `q`'s forwarder state, its slot records and doorbells, and starts its
    /// counters where its rings stand.
    fn forget(&self, q: &QueueState) -> Result<()> {
        let t0 = Instant::now();
        while q.rings.cpl_prod() != q.rings.req_prod() {
            if t0.elapsed() > DRAIN {
                return Err(Error::Timeout(format!(
                    "file backend: the service did not finish queue {}'s {} request(s) in {DRAIN:?} \
                     (is it stalled?)",
                    q.built.qid,
                    q.rings.req_prod().wrapping_sub(q.rings.cpl_prod())
                )));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let b = &q.built;
        let n = b.nslots as usize;
        // Slot records free, then the free list full.
        let mut slots = vec![0u8; n * std::mem::size_of::<FileSlot>()];
        for s in 0..n {
            slots.extend_from_slice(&(s as u16).to_le_bytes());
        }
        write_device_beside(&self.gpu, b.slots, &slots)?;
        // sq_head, cq_tail, cq_head, req_prod, cpl_cons, free_top
        let state: [u32; 6] = [0, 0, 0, q.rings.req_prod(), q.rings.cpl_prod(), b.nslots];
        let off = std::mem::offset_of!(FileQueue, sq_head) as u64;
        write_device_beside(&self.gpu, q.entry + off, crate::abi::as_bytes(&state))?;
        write_device_beside(&self.gpu, b.sq_db, &[0u8; 4])?;
        write_device_beside(&self.gpu, b.cq_db, &[0u8; 4])
    }
}

impl crate::io::QueueService for FileQueueService {
    fn recreate(&self, qp: usize, recreate: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let q = self
            .queues
            .get(qp)
            .ok_or_else(|| Error::InvalidArgument(format!("no queue pair {qp}")))?;
        let mut f = self.forwarder.lock().unwrap_or_else(|e| e.into_inner());
        f.stop()?;
        let forgotten = self.forget(q).and_then(|()| recreate());
        let started = f.start();
        forgotten.and(started)
    }
}
