//! CPU I/O queue pairs: one per thread, synchronous and pipelined reads and writes.
//!
//! ```
//! use bam_nvme::{model::ModelConfig, Controller, ControllerOptions};
//! let ctrl = Controller::new(ModelConfig::ram(1 << 20).build_transport()?, ControllerOptions::default())?;
//! let ns = ctrl.namespace(1)?;
//! let mut qp = ctrl.create_io_queue_pair(8)?;
//! // Many reads in one pipelined batch, several commands in flight at once.
//! let mut a = vec![0u8; 512];
//! let mut b = vec![0u8; 1024];
//! qp.read_many(&ns, &mut [(10, &mut a[..]), (100, &mut b[..])])?;
//! # Ok::<(), bam_nvme::Error>(())
//! ```

use crate::controller::registers::check_running;
use crate::controller::{Controller, Namespace};
use crate::prp::{self, Prp2};
use crate::queue::{CompletionRing, SubmissionRing};
use crate::spec::{Cqe, IoOpcode, Sqe, Status, PAGE_SIZE};
use crate::transport::DmaBuffer;
use crate::{Error, Result};
use std::mem::ManuallyDrop;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// Largest chunk the pipelined copies put in one command.
const PIPELINE_CHUNK: usize = 256 << 10;
/// Most commands the pipelined copies keep in flight.
const PIPELINE_WINDOW: usize = 16;

/// The tag of the one command [`IoQueuePair::run_one`] has outstanding. Pipelined
/// commands use their segment index, which is always smaller.
const ONE_SHOT: usize = usize::MAX;

#[derive(Clone, Copy, Debug)]
struct Pending {
    op: u8,
    nsid: u32,
    lba: u64,
    blocks: u32,
    tag: usize,
    /// The full command id, generation bits included.
    cid: u16,
}

/// An I/O submission/completion queue pair in host memory, owned by one thread.
///
/// Command ids carry a generation counter above the slot index (as Linux's nvme driver
/// does), and every completion is checked against the command outstanding in its slot:
/// a stale, duplicated or invented completion is a protocol violation, never taken for
/// another command.
///
/// After a timeout or a protocol violation the pair is *poisoned*: commands may still be
/// outstanding, so every later call fails with [`Error::QueuePoisoned`]. The buffers of
/// the commands that may still be transferred (bounce buffers, PRP lists, the
/// caller's buffer of a timed-out [`IoQueuePair::read_dma`], which is swapped for a
/// fresh one) are quarantined: freed only once the queues are deleted on the controller
/// when the pair is dropped, and leaked if that fails.
///
/// After [`Controller::reset`] the pair is *invalid* ([`Error::QueueInvalidated`]): the
/// reset disabled the controller (which then no longer touches any memory) and deleted
/// its queues, so dropping it frees everything, quarantine included, and sends nothing.
///
/// Dropping it deletes the queues on the controller.
pub struct IoQueuePair {
    ctrl: Controller,
    qid: u16,
    /// The controller's reset epoch the queues were created in.
    epoch: u64,
    // ManuallyDrop: freed in Drop only once the controller can no longer access them.
    sq: ManuallyDrop<DmaBuffer>,
    cq: ManuallyDrop<DmaBuffer>,
    sq_ring: SubmissionRing,
    cq_ring: CompletionRing,
    sq_db: usize,
    cq_db: usize,
    rung_tail: u16,
    /// Outstanding commands by slot (the low `slot_bits` of the command id).
    pending: Vec<Option<Pending>>,
    free_slots: Vec<u16>,
    /// Generation of the next command id of each slot.
    generation: Vec<u16>,
    slot_bits: u32,
    prp_lists: ManuallyDrop<DmaBuffer>,
    lists_per_cmd: usize,
    bounce: Option<DmaBuffer>,
    timeout: Duration,
    /// Why the pair is unusable, once it is.
    poisoned: Option<String>,
    /// Buffers the device may still access (commands timed out): freed after the queues
    /// are deleted.
    quarantine: Vec<DmaBuffer>,
}

impl Controller {
    /// Creates an I/O queue pair of `depth` entries in host memory, for CPU I/O.
    pub fn create_io_queue_pair(&self, depth: u32) -> Result<IoQueuePair> {
        IoQueuePair::new(self.clone(), depth)
    }
}

impl IoQueuePair {
    fn new(ctrl: Controller, depth: u32) -> Result<Self> {
        ctrl.check_depth(depth)?;
        let t = ctrl.transport().clone();
        let entries = depth as u16;
        let sq = t.alloc_dma(depth as usize * 64)?;
        let cq = t.alloc_dma(depth as usize * 16)?;
        let max_pages = ctrl.max_transfer_bytes() / PAGE_SIZE + 1;
        let lists_per_cmd = prp::list_pages_needed(max_pages - 1, PAGE_SIZE).max(1);
        let prp_lists = t.alloc_dma(depth as usize * lists_per_cmd * PAGE_SIZE)?;
        // Held while the queues are created: no reset in between, so the queues belong
        // to this epoch.
        let epoch_guard = ctrl.inner.epoch.read();
        let epoch = *epoch_guard;
        let qid = ctrl.alloc_qid()?;
        // SAFETY: sq and cq are DMA buffers of this controller's transport, of depth SQEs
        // and CQEs, owned by the pair and freed only after the queues are deleted or the
        // controller is reset (or leaked, see Drop).
        let created = unsafe { ctrl.create_queues(qid, sq.bus_addr(0), cq.bus_addr(0), entries) };
        if let Err(e) = created {
            ctrl.free_qid(qid);
            return Err(e);
        }
        drop(epoch_guard);
        let stride = ctrl.cap().doorbell_stride();
        let timeout = ctrl.inner.options.io_timeout;
        // Bits for the slot index; the rest of the 16-bit command id is the generation.
        // check_depth caps depth at 32768, so at least one generation bit remains.
        let slot_bits = u32::BITS - (depth - 1).leading_zeros();
        Ok(IoQueuePair {
            qid,
            epoch,
            sq: ManuallyDrop::new(sq),
            cq: ManuallyDrop::new(cq),
            sq_ring: SubmissionRing::new(entries),
            cq_ring: CompletionRing::new(entries),
            sq_db: crate::spec::registers::doorbell_offset(qid, false, stride),
            cq_db: crate::spec::registers::doorbell_offset(qid, true, stride),
            rung_tail: 0,
            pending: vec![None; depth as usize],
            free_slots: (0..entries).rev().collect(),
            generation: vec![0; depth as usize],
            slot_bits,
            prp_lists: ManuallyDrop::new(prp_lists),
            lists_per_cmd,
            bounce: None,
            timeout,
            poisoned: None,
            quarantine: Vec::new(),
            ctrl,
        })
    }

    /// Queue id.
    pub fn qid(&self) -> u16 {
        self.qid
    }
    /// Queue depth in entries.
    pub fn depth(&self) -> u16 {
        self.sq_ring.size()
    }
    /// Commands submitted and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.pending.len() - self.free_slots.len()
    }
    /// Whether an earlier timeout or protocol violation made the pair unusable (see
    /// [`Error::QueuePoisoned`]).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }
    fn has_room(&self) -> bool {
        !self.sq_ring.is_full() && !self.free_slots.is_empty()
    }

    /// Whether a [`Controller::reset`] since the pair was created deleted its queues
    /// (see [`Error::QueueInvalidated`]).
    pub fn is_invalidated(&self) -> bool {
        self.ctrl.epoch() != self.epoch
    }

    /// Fails with [`Error::QueueInvalidated`] after a reset, with [`Error::QueuePoisoned`]
    /// once the pair is poisoned.
    fn check_usable(&self) -> Result<()> {
        if self.is_invalidated() {
            return Err(Error::QueueInvalidated { qid: self.qid });
        }
        match &self.poisoned {
            Some(reason) => Err(Error::QueuePoisoned {
                qid: self.qid,
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Poisons the pair with `e` (the first reason sticks) and returns `e`.
    fn poison(&mut self, e: Error) -> Error {
        if self.poisoned.is_none() {
            tracing::warn!(qid = self.qid, "I/O queue pair poisoned: {e}");
            self.poisoned = Some(e.to_string());
        }
        e
    }

    /// Keeps `buf` until the queues are deleted: a command that names it may still be
    /// transferred.
    fn quarantine(&mut self, buf: DmaBuffer) {
        self.quarantine.push(buf);
    }

    /// Writes one command into the SQ (no doorbell yet). `data` is the DMA buffer, byte
    /// offset and length the command transfers.
    fn enqueue(
        &mut self,
        mut sqe: Sqe,
        data: Option<(&DmaBuffer, usize, usize)>,
        tag: usize,
    ) -> Result<()> {
        let slot = self
            .sq_ring
            .push()
            .ok_or_else(|| Error::Protocol("submission queue full".into()))?;
        let Some(slot_idx) = self.free_slots.pop() else {
            return Err(Error::Protocol("no free command slot".into()));
        };
        let generation = self.generation[slot_idx as usize];
        let gen_bits = 16 - self.slot_bits;
        self.generation[slot_idx as usize] = (generation + 1) & ((1u32 << gen_bits) - 1) as u16;
        let cid = ((generation as u32) << self.slot_bits) as u16 | slot_idx;
        sqe.set_cid(cid);
        if let Some((buf, off, len)) = data {
            let first_page = off / PAGE_SIZE;
            let prps = prp::build(
                |i| buf.pages()[first_page + i],
                off % PAGE_SIZE,
                len,
                PAGE_SIZE,
            );
            let prp2 = match prps.prp2 {
                Prp2::Unused => 0,
                Prp2::Page(p) => p,
                Prp2::List(entries) => {
                    let base = slot_idx as usize * self.lists_per_cmd * PAGE_SIZE;
                    let pages: Vec<u64> = (0..self.lists_per_cmd)
                        .map(|i| self.prp_lists.bus_addr(base + i * PAGE_SIZE))
                        .collect();
                    let lists = &mut self.prp_lists;
                    prp::write_list(&entries, &pages, PAGE_SIZE, |p, s, v| {
                        lists.write_volatile::<u64>(base + p * PAGE_SIZE + s * 8, v)
                    })
                }
            };
            sqe.set_prps(prps.prp1, prp2);
        }
        self.sq.write_volatile(slot as usize * 64, sqe);
        self.pending[slot_idx as usize] = Some(Pending {
            op: sqe.opcode(),
            nsid: sqe.nsid,
            lba: sqe.slba(),
            blocks: sqe.block_count(),
            tag,
            cid,
        });
        Ok(())
    }

    /// Writes a doorbell of this pair, unless a reset deleted its queues: then the
    /// queue id may belong to a newer pair, and the pair is poisoned instead.
    fn doorbell(&mut self, offset: usize, value: u32) -> Result<()> {
        let epoch = self.ctrl.inner.epoch.read();
        if *epoch != self.epoch {
            drop(epoch);
            let e = Error::QueueInvalidated { qid: self.qid };
            return Err(self.poison(e));
        }
        // SAFETY: a doorbell of this pair's own queues, which exist in this epoch (the
        // read guard keeps a reset out): the SQ entries up to the tail are commands whose
        // PRPs name the pair's PRP lists and buffers it keeps alive (or quarantines) until
        // they complete, the queues are deleted or the controller is reset.
        unsafe { self.ctrl.transport().write32(offset, value) };
        Ok(())
    }

    /// Rings the SQ tail doorbell for everything enqueued since the last ring.
    fn ring(&mut self) -> Result<()> {
        if self.rung_tail != self.sq_ring.tail() {
            // The SQE stores must be visible before the doorbell store.
            fence(Ordering::Release);
            self.doorbell(self.sq_db, self.sq_ring.tail() as u32)?;
            self.rung_tail = self.sq_ring.tail();
        }
        Ok(())
    }

    /// Processes every new completion, calling `done(tag, result)`; rings the CQ head
    /// doorbell once. Returns how many completed.
    fn reap(&mut self, mut done: impl FnMut(usize, Result<()>)) -> Result<usize> {
        let mut n = 0;
        loop {
            let at = self.cq_ring.head() as usize * 16;
            let cqe: Cqe = self.cq.read_volatile(at);
            if !self.cq_ring.is_new(&cqe) {
                break;
            }
            fence(Ordering::Acquire);
            let cqe: Cqe = self.cq.read_volatile(at);
            self.cq_ring.advance();
            let slot = cqe.cid as usize & ((1usize << self.slot_bits) - 1);
            let outstanding = self.pending.get(slot).copied().flatten();
            if outstanding.is_none_or(|p| p.cid != cqe.cid) {
                let e = Error::Protocol(format!(
                    "completion for cid {:#06x}, which is not outstanding on queue {} \
                     (stale, duplicated or invented)",
                    cqe.cid, self.qid
                ));
                return Err(self.poison(e));
            }
            if !self.sq_ring.update_head(cqe.sq_head) {
                let e = Error::Protocol(format!(
                    "completion reports SQ head {} outside queue {}",
                    cqe.sq_head, self.qid
                ));
                return Err(self.poison(e));
            }
            let Some(p) = self.pending[slot].take() else {
                unreachable!("checked outstanding above");
            };
            self.free_slots.push(slot as u16);
            done(p.tag, self.result(&p, cqe.status()));
            n += 1;
        }
        if n > 0 {
            self.doorbell(self.cq_db, self.cq_ring.head() as u32)?;
        }
        Ok(n)
    }

    fn result(&self, p: &Pending, status: Status) -> Result<()> {
        if status.is_success() {
            return Ok(());
        }
        let command = IoOpcode::from_u8(p.op).map_or("I/O command", |o| o.name());
        Err(Error::Io {
            command,
            nsid: p.nsid,
            lba: p.lba,
            blocks: p.blocks,
            status,
        })
    }

    /// Waits until at least one command completes.
    fn wait_some(&mut self, mut done: impl FnMut(usize, Result<()>)) -> Result<()> {
        let start = Instant::now();
        let mut polls = 0u32;
        loop {
            if self.reap(&mut done)? > 0 {
                return Ok(());
            }
            polls += 1;
            if polls.is_multiple_of(256) {
                if self.is_invalidated() {
                    let e = Error::QueueInvalidated { qid: self.qid };
                    return Err(self.poison(e));
                }
                if let Err(e) = check_running(
                    &**self.ctrl.transport(),
                    &format!("I/O on queue {}", self.qid),
                ) {
                    return Err(self.poison(e));
                }
                if start.elapsed() > self.timeout {
                    let oldest = self.pending.iter().flatten().next().copied();
                    let what = match oldest {
                        Some(p) => format!(
                            "completion of {} at LBA {} on queue {} ({} command(s) outstanding)",
                            IoOpcode::from_u8(p.op).map_or("I/O command", |o| o.name()),
                            p.lba,
                            self.qid,
                            self.in_flight()
                        ),
                        None => format!("completions on queue {}", self.qid),
                    };
                    // The commands stay outstanding and may complete (and transfer) later:
                    // poison the pair so nothing takes their completions or reuses their
                    // slots, PRP lists and buffers.
                    let e = Error::Timeout {
                        what,
                        after: self.timeout,
                    };
                    return Err(self.poison(e));
                }
                std::thread::yield_now();
            }
        }
    }

    /// Runs one command to completion.
    fn run_one(&mut self, sqe: Sqe, data: Option<(&DmaBuffer, usize, usize)>) -> Result<()> {
        self.check_usable()?;
        if self.in_flight() != 0 {
            // Every public operation leaves nothing in flight unless it poisoned the pair.
            let e = Error::Protocol(format!(
                "{} command(s) unexpectedly outstanding on queue {}",
                self.in_flight(),
                self.qid
            ));
            return Err(self.poison(e));
        }
        self.enqueue(sqe, data, ONE_SHOT)?;
        self.ring()?;
        let mut out = None;
        while out.is_none() {
            self.wait_some(|tag, r| {
                if tag == ONE_SHOT {
                    out = Some(r)
                }
            })?;
        }
        out.unwrap_or(Ok(()))
    }

    fn check_transfer(
        &self,
        ns: &Namespace,
        lba: u64,
        buf: &DmaBuffer,
        off: usize,
        len: usize,
    ) -> Result<u32> {
        let blocks = check_len(ns, lba, len)?;
        if len > self.ctrl.max_transfer_bytes() {
            return Err(Error::TransferTooLarge {
                bytes: len,
                max: self.ctrl.max_transfer_bytes(),
            });
        }
        if !off.is_multiple_of(4) {
            return Err(Error::Misaligned {
                what: "buffer offset",
                value: off as u64,
                align: 4,
            });
        }
        if off.checked_add(len).is_none_or(|end| end > buf.len()) {
            return Err(Error::BufferTooSmall {
                need: off.saturating_add(len),
                have: buf.len(),
            });
        }
        Ok(blocks)
    }

    /// Reads `len` bytes at `lba` into `buf[off..]` with one command (no bounce copy).
    pub fn read_dma(
        &mut self,
        ns: &Namespace,
        lba: u64,
        buf: &mut DmaBuffer,
        off: usize,
        len: usize,
    ) -> Result<()> {
        let blocks = self.check_transfer(ns, lba, buf, off, len)?;
        let r = self.run_one(Sqe::read(ns.nsid, lba, blocks), Some((buf, off, len)));
        if r.is_err() && self.in_flight() > 0 {
            // The device may still write into `buf`: keep it in quarantine and hand the
            // caller a fresh buffer of the same size instead, so dropping it frees nothing
            // the device can reach.
            match self.ctrl.transport().alloc_dma(buf.len()) {
                Ok(fresh) => {
                    let old = std::mem::replace(buf, fresh);
                    self.quarantine(old);
                }
                Err(e) => tracing::error!(
                    qid = self.qid,
                    "cannot quarantine the buffer of a timed-out read ({e}); \
                     do not free it before dropping the queue pair"
                ),
            }
        }
        r
    }

    /// Writes `len` bytes from `buf[off..]` at `lba` with one command.
    pub fn write_dma(
        &mut self,
        ns: &Namespace,
        lba: u64,
        buf: &DmaBuffer,
        off: usize,
        len: usize,
    ) -> Result<()> {
        let blocks = self.check_transfer(ns, lba, buf, off, len)?;
        self.run_one(Sqe::write(ns.nsid, lba, blocks), Some((buf, off, len)))
    }

    /// Flush.
    pub fn flush(&mut self, ns: &Namespace) -> Result<()> {
        self.check_usable()?;
        self.run_one(Sqe::flush(ns.nsid), None)
    }

    /// Write Zeroes over `blocks` blocks at `lba` (split into commands of at most 65536).
    pub fn write_zeroes(&mut self, ns: &Namespace, lba: u64, blocks: u64) -> Result<()> {
        ns.check_range(lba, blocks)?;
        let mut done = 0;
        while done < blocks {
            let n = (blocks - done).min(65536);
            self.run_one(
                Sqe::write_zeroes(ns.nsid, lba + done, n as u32, false),
                None,
            )?;
            done += n;
        }
        Ok(())
    }

    /// Deallocates (trims) LBA ranges `(lba, blocks)` with Dataset Management.
    pub fn deallocate(&mut self, ns: &Namespace, ranges: &[(u64, u32)]) -> Result<()> {
        if ranges.is_empty() || ranges.len() > 256 {
            return Err(Error::InvalidArgument(format!(
                "{} ranges: Dataset Management takes 1 to 256",
                ranges.len()
            )));
        }
        for &(lba, n) in ranges {
            ns.check_range(lba, n as u64)?;
        }
        let mut page = self.ctrl.transport().alloc_dma(PAGE_SIZE)?;
        for (i, &(lba, n)) in ranges.iter().enumerate() {
            let r = crate::spec::command::DsmRange {
                attributes: 0,
                blocks: n,
                slba: lba,
            };
            page.as_mut_slice()[i * 16..i * 16 + 16].copy_from_slice(&r.to_bytes());
        }
        let sqe = Sqe::dataset_management(ns.nsid, ranges.len() as u32, true, 0);
        let r = self.run_one(sqe, Some((&page, 0, ranges.len() * 16)));
        if self.in_flight() > 0 {
            self.quarantine(page);
        }
        r
    }

    fn chunk_size(&self, ns: &Namespace) -> usize {
        let bs = ns.block_size as usize;
        (self.ctrl.max_transfer_bytes().min(PIPELINE_CHUNK) / bs).max(1) * bs
    }

    /// Reads `out.len()` bytes (a multiple of the block size) starting at `lba`,
    /// pipelining commands through a bounce buffer.
    pub fn read_into(&mut self, ns: &Namespace, lba: u64, out: &mut [u8]) -> Result<()> {
        let segs = self.split(ns, lba, out.len())?;
        let chunk = self.chunk_size(ns);
        self.pipeline(
            ns,
            false,
            &segs,
            |_, _| {},
            |i, data| out[i * chunk..i * chunk + data.len()].copy_from_slice(data),
        )
    }

    /// Writes `data` (a multiple of the block size) starting at `lba`, pipelined.
    pub fn write_from(&mut self, ns: &Namespace, lba: u64, data: &[u8]) -> Result<()> {
        let segs = self.split(ns, lba, data.len())?;
        let chunk = self.chunk_size(ns);
        self.pipeline(
            ns,
            true,
            &segs,
            |i, dst| dst.copy_from_slice(&data[i * chunk..i * chunk + dst.len()]),
            |_, _| {},
        )
    }

    /// Reads many `(lba, buffer)` requests as one pipelined batch. Each buffer is a
    /// multiple of the block size and at most the controller's transfer limit.
    pub fn read_many(&mut self, ns: &Namespace, reqs: &mut [(u64, &mut [u8])]) -> Result<()> {
        let segs = self.check_many(ns, reqs.iter().map(|(l, b)| (*l, b.len())))?;
        self.pipeline(
            ns,
            false,
            &segs,
            |_, _| {},
            |i, data| reqs[i].1.copy_from_slice(data),
        )
    }

    /// Writes many `(lba, data)` requests as one pipelined batch.
    pub fn write_many(&mut self, ns: &Namespace, reqs: &[(u64, &[u8])]) -> Result<()> {
        let segs = self.check_many(ns, reqs.iter().map(|(l, b)| (*l, b.len())))?;
        self.pipeline(
            ns,
            true,
            &segs,
            |i, dst| dst.copy_from_slice(reqs[i].1),
            |_, _| {},
        )
    }

    fn check_many(
        &self,
        ns: &Namespace,
        reqs: impl Iterator<Item = (u64, usize)>,
    ) -> Result<Vec<(u64, usize)>> {
        let chunk = self.chunk_size(ns);
        reqs.map(|(lba, len)| {
            check_len(ns, lba, len)?;
            if len > chunk {
                return Err(Error::TransferTooLarge {
                    bytes: len,
                    max: chunk,
                });
            }
            Ok((lba, len))
        })
        .collect()
    }

    /// `len` bytes from `lba` as segments `(lba, bytes)` of chunk_size bytes (the last
    /// one shorter): segment i starts at byte i * chunk_size.
    fn split(&self, ns: &Namespace, lba: u64, len: usize) -> Result<Vec<(u64, usize)>> {
        let bs = ns.block_size as usize;
        check_len(ns, lba, len)?;
        let chunk = self.chunk_size(ns);
        Ok((0..len)
            .step_by(chunk)
            .map(|o| (lba + (o / bs) as u64, chunk.min(len - o)))
            .collect())
    }

    /// Runs the segments `(lba, len)` as reads or writes through bounce slots, keeping up
    /// to the window in flight. `fill(i, slot)` provides write data; `drain(i, data)`
    /// takes read data. On the first error, stops submitting, waits for what is in flight
    /// and returns it.
    fn pipeline(
        &mut self,
        ns: &Namespace,
        write: bool,
        segs: &[(u64, usize)],
        mut fill: impl FnMut(usize, &mut [u8]),
        mut drain: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        self.check_usable()?;
        let chunk = self.chunk_size(ns);
        let window = PIPELINE_WINDOW
            .min(self.depth() as usize - 1)
            .min(segs.len())
            .max(1);
        let need = window * chunk;
        if self.bounce.as_ref().is_none_or(|b| b.len() < need) {
            self.bounce = Some(self.ctrl.transport().alloc_dma(need)?);
        }
        let mut bounce = self.bounce.take().expect("allocated above");
        let mut free_slots: Vec<usize> = (0..window).rev().collect();
        let mut slot_of = vec![usize::MAX; segs.len()];
        let mut next = 0;
        let mut first_err: Option<Error> = None;
        let bs = ns.block_size as usize;
        let result = loop {
            // Submit while there is room and no error.
            while first_err.is_none()
                && next < segs.len()
                && !free_slots.is_empty()
                && self.has_room()
            {
                let s = free_slots.pop().unwrap();
                let (lba, len) = segs[next];
                let off = s * chunk;
                if write {
                    fill(next, &mut bounce.as_mut_slice()[off..off + len]);
                }
                let op = if write {
                    IoOpcode::Write
                } else {
                    IoOpcode::Read
                };
                let sqe = Sqe::read_write(op, ns.nsid, lba, (len / bs) as u32);
                if let Err(e) = self.enqueue(sqe, Some((&bounce, off, len)), next) {
                    first_err = Some(e);
                    free_slots.push(s);
                    break;
                }
                slot_of[next] = s;
                next += 1;
            }
            if let Err(e) = self.ring() {
                break Err(e);
            }
            if self.in_flight() == 0 {
                break first_err.map_or(Ok(()), Err);
            }
            let mut completed = Vec::new();
            if let Err(e) = self.wait_some(|tag, r| completed.push((tag, r))) {
                break Err(e); // timeout or dead controller: commands may still be in flight
            }
            let mut stray = None;
            for (tag, r) in completed {
                // Only this batch's commands are outstanding (the pair is not poisoned),
                // but never index with a tag that is not one of ours.
                let Some(&s) = slot_of.get(tag).filter(|&&s| s != usize::MAX) else {
                    stray = Some(tag);
                    continue;
                };
                match r {
                    Ok(()) if !write => {
                        drain(tag, &bounce.as_slice()[s * chunk..s * chunk + segs[tag].1])
                    }
                    Ok(()) => {}
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
                free_slots.push(s);
            }
            if let Some(tag) = stray {
                let e = Error::Protocol(format!(
                    "completion for a command (tag {tag}) this batch did not submit on queue {}",
                    self.qid
                ));
                break Err(self.poison(e));
            }
        };
        if self.in_flight() == 0 {
            self.bounce = Some(bounce);
        } else {
            // The device may still write into the bounce buffer: quarantine it.
            self.quarantine(bounce);
        }
        result
    }
}

/// Checks a transfer of `len` bytes at `lba`: not empty, whole blocks, inside the
/// namespace. Returns the number of blocks.
fn check_len(ns: &Namespace, lba: u64, len: usize) -> Result<u32> {
    let bs = ns.block_size as usize;
    if len == 0 {
        return Err(Error::ZeroLength {
            what: format!("transfer at LBA {lba}"),
        });
    }
    if !len.is_multiple_of(bs) {
        return Err(Error::Misaligned {
            what: "transfer length",
            value: len as u64,
            align: bs as u64,
        });
    }
    let blocks = (len / bs) as u64;
    ns.check_range(lba, blocks)?;
    u32::try_from(blocks).map_err(|_| Error::TransferTooLarge {
        bytes: len,
        max: u32::MAX as usize * bs,
    })
}

impl Drop for IoQueuePair {
    fn drop(&mut self) {
        // Held until the memory is freed or leaked: no reset in between.
        let epoch = self.ctrl.inner.epoch.read();
        // Whether the controller can no longer access the pair's memory.
        let stopped = if *epoch != self.epoch {
            // A reset disabled the controller (it reported CSTS.RDY=0, so it no longer
            // touches any memory) and deleted the queues; the queue id may already belong
            // to a newer pair: send nothing.
            true
        } else {
            let deleted = self.ctrl.delete_queues(self.qid);
            if let Err(e) = &deleted {
                tracing::warn!(qid = self.qid, "deleting I/O queue pair: {e}");
            }
            self.ctrl.free_qid(self.qid);
            // Deleting the SQ aborts whatever was outstanding.
            deleted.is_ok() || self.in_flight() == 0
        };
        if stopped {
            self.quarantine.clear();
            // SAFETY: the controller no longer accesses this memory (reset, queues
            // deleted, or nothing outstanding); the fields are not used again.
            unsafe {
                ManuallyDrop::drop(&mut self.sq);
                ManuallyDrop::drop(&mut self.cq);
                ManuallyDrop::drop(&mut self.prp_lists);
            }
        } else {
            tracing::warn!(
                qid = self.qid,
                "leaking the queue memory: the controller may still write to it"
            );
            if let Some(b) = self.bounce.take() {
                std::mem::forget(b);
            }
            for b in self.quarantine.drain(..) {
                std::mem::forget(b);
            }
        }
        drop(epoch);
    }
}
