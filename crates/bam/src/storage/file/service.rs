//! The CPU side of the file backend: service threads that take the forwarder's requests
//! from each queue pair's ring, execute them on the files with io_uring and post their
//! completions (file_abi.h).
//!
//! - **Threads**: each owns a share of the queue pairs (dealt round-robin) and one
//!   io_uring; no locks, no sharing. A loop takes every new request of its queues,
//!   submits them in one `io_uring_enter`, reaps what completed and publishes each
//!   queue's completions with one release store. Page-cached reads mostly complete inside
//!   the submit call; `O_DIRECT` ones arrive on later loops.
//! - **Waiting**: a thread spins while it has work or requests in flight; idle, it waits
//!   as the host-side controller's workers do (`storage::idle`: spin, then short sleeps).
//! - **Errors** become NVMe status fields, and each is kept ([`ServiceControl::errors`])
//!   with its file, offset and errno: `EIO` a media error (Unrecovered Read Error, Write
//!   Fault), `ENOSPC` Capacity Exceeded, a read past the current end of a file that
//!   shrank LBA Out of Range, a write to a read-only array Namespace Write Protected,
//!   anything else Internal Error; all with Do Not Retry. Short reads and writes are
//!   continued where they stopped; a read past the end of the file inside the namespace
//!   (which ends on a whole buffer slot, [`Files::open`]) gets zeros there.
//! - **Nothing trusted**: a request naming a slot, file or range outside the array, or out
//!   of sequence, is refused and counted, never executed.
//! - **A thread that dies** (it should not: nothing here panics on input) is counted in
//!   [`ServiceControl::dead`]; the commands it held time out on the GPU, a typed error.

use super::abi::*;
use super::config::FileConfig;
use super::media::{open_all, FileMedium};
use super::rings::QueueRings;
use crate::error::{Error, Result};
use crate::storage::idle::IdleWait;
use io_uring::{opcode, types, IoUring};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// NVMe status fields ((SCT << 8) | SC) the service completes with, Do Not Retry set on
/// errors.
pub mod status {
    /// Do Not Retry.
    pub const DNR: u16 = 1 << 14;
    /// Internal Error.
    pub const INTERNAL: u16 = 0x006 | DNR;
    /// Namespace is Write Protected.
    pub const WRITE_PROTECTED: u16 = 0x020 | DNR;
    /// LBA Out of Range.
    pub const LBA_OUT_OF_RANGE: u16 = 0x080 | DNR;
    /// Capacity Exceeded.
    pub const CAPACITY_EXCEEDED: u16 = 0x081 | DNR;
    /// Write Fault (media error).
    pub const WRITE_FAULT: u16 = 0x280 | DNR;
    /// Unrecovered Read Error (media error).
    pub const UNRECOVERED_READ: u16 = 0x281 | DNR;
}

/// One failed request, as the service saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServiceError {
    /// Which file (SSD index).
    pub ssd: u16,
    /// Byte offset in the file.
    pub offset: u64,
    /// Bytes asked for.
    pub bytes: u32,
    /// `BAM_FILE_OP_*`.
    pub op: u8,
    /// The errno (0: not an errno: a refused request or a file that shrank).
    pub errno: i32,
    /// The NVMe status field it completed with (0: refused, not completed).
    pub status: u16,
    /// What happened, in words.
    pub what: String,
}

/// Errors kept at most (later ones are counted only).
const ERRORS_KEPT: usize = 1024;

/// Shared state of the service threads: their flags and what they counted.
#[derive(Default)]
pub struct ServiceControl {
    stop: AtomicBool,
    stall: AtomicBool,
    /// Threads that died.
    pub dead: AtomicU32,
    /// Requests executed (completed with any status).
    pub completed: AtomicU64,
    /// Requests refused (malformed: never executed).
    pub refused: AtomicU64,
    /// Errors beyond the ones kept.
    pub errors_dropped: AtomicU64,
    errors: Mutex<Vec<ServiceError>>,
}

impl ServiceControl {
    /// The errors kept so far (oldest first).
    pub fn errors(&self) -> Vec<ServiceError> {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn record(&self, e: ServiceError) {
        tracing::warn!(
            "file backend: {} (file {}, offset {}, {} B, errno {})",
            e.what,
            e.ssd,
            e.offset,
            e.bytes,
            e.errno
        );
        let mut v = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < ERRORS_KEPT {
            v.push(e);
        } else {
            self.errors_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the service executes against.
pub struct Files {
    /// The opened files, by SSD index.
    pub media: Vec<FileMedium>,
    /// Bytes of each file's namespace: the file's, rounded up to a whole buffer slot of
    /// the I/O layer (a line, a scan's chunk), so that an array or a scan over a file of
    /// any length holds its last bytes; what runs past the end of the file reads as zeros.
    pub ns_bytes: Vec<u64>,
    /// Writes allowed.
    pub writable: bool,
    /// Fault injection: reads and writes touching these bytes of any file fail.
    pub fault: Option<ByteFault>,
    /// The block size of every namespace.
    pub lba: u32,
}

impl Files {
    /// Opens and locks the files of `cfg` and sizes their namespaces: blocks of the
    /// configured size, or the larger alignment `O_DIRECT` needs on them; each namespace
    /// the file's bytes rounded up to a whole buffer slot (`cfg.io.slot_bytes`); the
    /// fault's LBAs as bytes.
    pub fn open(cfg: &FileConfig) -> Result<Files> {
        let media = open_all(cfg)?;
        let lba = media
            .iter()
            .map(|m| m.direct_align)
            .max()
            .unwrap_or(512)
            .max(cfg.lba_size);
        if !lba.is_power_of_two() || lba > 65536 {
            return Err(Error::InvalidArgument(format!(
                "{lba}-byte blocks: a power of two, at most 64 KiB"
            )));
        }
        let unit = cfg.io.slot_bytes.max(lba as u64);
        let ns_bytes = media
            .iter()
            .map(|m| m.size.div_ceil(unit).saturating_mul(unit))
            .collect();
        let fault = cfg.fault.filter(|f| f.nlb > 0).map(|f| ByteFault {
            start: f.lba.saturating_mul(lba as u64),
            end: f.lba.saturating_add(f.nlb).saturating_mul(lba as u64),
            status: f.status,
        });
        Ok(Files {
            media,
            ns_bytes,
            writable: cfg.opens_writable(),
            fault,
            lba,
        })
    }
}

/// Reads and writes touching `[start, end)` of any file complete with `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteFault {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The NVMe status field they complete with.
    pub status: u16,
}

/// Running service threads; stopped (and joined) on drop.
pub struct Service {
    threads: Vec<JoinHandle<()>>,
    ctl: Arc<ServiceControl>,
}

/// io_uring entries per thread, and the bound on its operations in flight.
const URING_ENTRIES: u32 = 4096;
/// Requests taken from one queue per loop: queues share a thread's ring fairly.
const TAKE_PER_QUEUE: u32 = 256;

impl Service {
    /// Starts `workers` threads (at most one per queue pair) serving `queues` on `files`.
    pub fn start(files: Arc<Files>, queues: Vec<QueueRings>, workers: u32) -> Result<Service> {
        if workers == 0 || queues.is_empty() {
            return Err(Error::InvalidArgument(
                "the file service needs at least one worker and one queue pair".into(),
            ));
        }
        if files.media.len() != files.ns_bytes.len() || files.media.is_empty() {
            return Err(Error::InvalidArgument(
                "the file service needs one namespace size per file".into(),
            ));
        }
        let n = (workers as usize).min(queues.len());
        let mut shares: Vec<Vec<QueueRings>> = (0..n).map(|_| Vec::new()).collect();
        for (i, q) in queues.into_iter().enumerate() {
            shares[i % n].push(q);
        }
        let ctl = Arc::new(ServiceControl::default());
        let mut svc = Service {
            threads: Vec::new(),
            ctl: ctl.clone(),
        };
        for (w, share) in shares.into_iter().enumerate() {
            let (f, c) = (files.clone(), ctl.clone());
            // Where each queue's rings stand now: requests posted from here on are served
            // even if the thread starts late.
            let share = served(share);
            // The ring is made by the thread that submits to it (a single-issuer ring
            // refuses any other); its setup result comes back here, so that a kernel
            // without io_uring is an error now rather than a dead thread.
            let (tx, rx) = std::sync::mpsc::channel::<std::result::Result<(), String>>();
            let h = std::thread::Builder::new()
                .name(format!("bam-file-{w}"))
                .spawn(move || {
                    let ring = match new_ring() {
                        Ok(r) => {
                            let _ = tx.send(Ok(()));
                            r
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let c2 = c.clone();
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                        Worker::new(ring, share, f, c).run()
                    }));
                    if r.is_err() {
                        c2.dead.fetch_add(1, Ordering::AcqRel);
                        tracing::error!("file backend: service thread {w} died");
                    }
                })?;
            svc.threads.push(h);
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return Err(Error::Platform {
                        what: format!("io_uring setup failed: {e}"),
                        fix: "the file backend needs io_uring (Linux 5.6 or later, not disabled \
                              by kernel.io_uring_disabled or a seccomp profile)"
                            .into(),
                    })
                }
                Err(_) => {
                    return Err(Error::Platform {
                        what: "a file service thread ended while it started".into(),
                        fix: "a bug: report it with the log".into(),
                    })
                }
            }
        }
        Ok(svc)
    }

    /// The threads' shared state (counters, errors, deaths).
    pub fn control(&self) -> &Arc<ServiceControl> {
        &self.ctl
    }

    /// Stalls (or resumes) every thread: requests wait in their rings (fault injection).
    pub fn set_stall(&self, stall: bool) {
        self.ctl.stall.store(stall, Ordering::Release);
    }

    /// An error when a thread has died (the commands it held will time out).
    pub fn health(&self) -> Result<()> {
        let dead = self.ctl.dead.load(Ordering::Acquire);
        if dead > 0 {
            return Err(Error::Platform {
                what: format!("{dead} file service thread(s) died"),
                fix: "a bug: report it with the log; rebuild the array to go on".into(),
            });
        }
        Ok(())
    }

    /// Stops and joins the threads (requests in flight complete first, bounded).
    pub fn stop(&mut self) {
        self.ctl.stop.store(true, Ordering::Release);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A ring for one service thread: single issuer (this thread), cooperative task running;
/// a plain ring on kernels without those flags.
fn new_ring() -> std::io::Result<IoUring> {
    IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .build(URING_ENTRIES)
        .or_else(|_| IoUring::new(URING_ENTRIES))
}

/// A request in flight.
#[derive(Clone, Copy, Default)]
struct Pending {
    seq: u32,
    op: u8,
    ssd: u16,
    offset: u64,
    bytes: u32,
    /// Bytes done so far (short reads and writes continue).
    done: u32,
}

/// One queue pair as a thread serves it.
struct Served {
    rings: QueueRings,
    /// Requests taken.
    cons: u32,
    /// Completions written (published when `dirty`).
    cpl_prod: u32,
    dirty: bool,
    /// By staging slot.
    pending: Vec<Pending>,
}

/// The queues of one thread, from where their rings stand.
fn served(share: Vec<QueueRings>) -> Vec<Served> {
    share
        .into_iter()
        .map(|rings| Served {
            cons: rings.req_prod(),
            cpl_prod: rings.cpl_prod(),
            dirty: false,
            pending: vec![Pending::default(); rings.layout().nslots as usize],
            rings,
        })
        .collect()
}

struct Worker {
    ring: IoUring,
    queues: Vec<Served>,
    files: Arc<Files>,
    ctl: Arc<ServiceControl>,
    in_flight: u32,
    /// Completions since the last publish (added to the shared counter there).
    completed: u64,
    /// The queue a loop starts taking requests from.
    first: usize,
    /// Completions taken from the ring by one reap (user data, result).
    reaped: Vec<(u64, i32)>,
}

impl Worker {
    fn new(
        ring: IoUring,
        queues: Vec<Served>,
        files: Arc<Files>,
        ctl: Arc<ServiceControl>,
    ) -> Self {
        Worker {
            ring,
            queues,
            files,
            ctl,
            in_flight: 0,
            completed: 0,
            first: 0,
            reaped: Vec::with_capacity(URING_ENTRIES as usize),
        }
    }

    fn run(&mut self) {
        let mut wait = IdleWait::default();
        loop {
            if self.ctl.stop.load(Ordering::Acquire) {
                // Bounded drain: what is in flight completes (its slots go back).
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                while self.in_flight > 0 && std::time::Instant::now() < deadline {
                    let _ = self.ring.submit_and_wait(1);
                    self.reap();
                    self.publish();
                }
                return;
            }
            if self.ctl.stall.load(Ordering::Acquire) {
                IdleWait::stalled();
                continue;
            }
            let taken = self.take_requests();
            if self.in_flight > 0 || taken > 0 {
                if let Err(e) = self.ring.submit() {
                    tracing::warn!("file backend: io_uring submit: {e}");
                }
            }
            let reaped = self.reap();
            self.publish();
            if taken > 0 || reaped > 0 {
                wait.busy();
            } else if self.in_flight > 0 {
                // Requests in flight: their completions are due, keep looking.
                std::hint::spin_loop();
            } else {
                wait.idle();
            }
        }
    }

    /// Takes new requests while the ring has room, at most [`TAKE_PER_QUEUE`] a queue,
    /// starting from the next queue each loop (no queue waits behind a busy one);
    /// returns how many.
    fn take_requests(&mut self) -> u32 {
        let mut taken = 0;
        let n = self.queues.len();
        self.first = (self.first + 1) % n;
        for k in 0..n {
            let qi = (self.first + k) % n;
            let prod = self.queues[qi].rings.req_prod();
            let mut budget = TAKE_PER_QUEUE;
            while self.queues[qi].cons != prod && self.in_flight < URING_ENTRIES && budget > 0 {
                let q = &mut self.queues[qi];
                let seq = q.cons;
                let r = q.rings.req(seq);
                q.cons = q.cons.wrapping_add(1);
                taken += 1;
                budget -= 1;
                self.start_request(qi, seq, r);
            }
        }
        taken
    }

    /// Checks a request and submits its operation (or completes it at once).
    fn start_request(&mut self, qi: usize, seq: u32, r: FileReq) {
        let q = &self.queues[qi];
        let layout = q.rings.layout();
        let bad = |what: String| ServiceError {
            ssd: r.ssd,
            offset: r.offset,
            bytes: r.bytes,
            op: r.op,
            errno: 0,
            status: 0,
            what,
        };
        // Malformed: refused, never executed (a slot it names may be another's).
        let refusal = if r.seq != seq {
            Some(format!("request {seq} carries sequence number {}", r.seq))
        } else if r.slot as u32 >= layout.nslots {
            Some(format!(
                "request names staging slot {} of {}",
                r.slot, layout.nslots
            ))
        } else if q.pending[r.slot as usize].op != 0 {
            Some(format!("request reuses staging slot {} in flight", r.slot))
        } else {
            None
        };
        if let Some(what) = refusal {
            self.ctl.refused.fetch_add(1, Ordering::Relaxed);
            self.ctl.record(bad(what));
            return;
        }
        let p = Pending {
            seq,
            op: r.op,
            ssd: r.ssd,
            offset: r.offset,
            bytes: r.bytes,
            done: 0,
        };
        let range_ok = (r.ssd as usize) < self.files.media.len()
            && r.bytes <= layout.slot_bytes
            && r.offset
                .checked_add(r.bytes as u64)
                .is_some_and(|end| end <= self.files.ns_bytes[r.ssd as usize]);
        let faulted = self.files.fault.filter(|f| {
            (r.op == BAM_FILE_OP_READ || r.op == BAM_FILE_OP_WRITE)
                && r.offset < f.end
                && f.start < r.offset.saturating_add(r.bytes as u64)
        });
        let immediate = match r.op {
            BAM_FILE_OP_ECHO => Some(r.status),
            _ if faulted.is_some() => faulted.map(|f| f.status),
            BAM_FILE_OP_READ | BAM_FILE_OP_WRITE | BAM_FILE_OP_FLUSH if !range_ok => {
                self.ctl.record(ServiceError {
                    status: status::LBA_OUT_OF_RANGE,
                    ..bad("request outside the file's namespace".into())
                });
                Some(status::LBA_OUT_OF_RANGE)
            }
            BAM_FILE_OP_WRITE if !self.files.writable => Some(status::WRITE_PROTECTED),
            BAM_FILE_OP_READ | BAM_FILE_OP_WRITE | BAM_FILE_OP_FLUSH => None,
            _ => {
                self.ctl.record(ServiceError {
                    status: status::INTERNAL,
                    ..bad(format!("unknown request operation {}", r.op))
                });
                Some(status::INTERNAL)
            }
        };
        let q = &mut self.queues[qi];
        q.pending[r.slot as usize] = p;
        match immediate {
            Some(st) => self.complete(qi, r.slot, st),
            None => self.submit(qi, r.slot),
        }
    }

    /// Queues the (rest of the) operation of `slot` on the ring.
    fn submit(&mut self, qi: usize, slot: u16) {
        let q = &self.queues[qi];
        let p = q.pending[slot as usize];
        let fd = types::Fd(self.files.media[p.ssd as usize].fd());
        let user = ((qi as u64) << 32) | slot as u64;
        let Some(buf) = q.rings.staging(slot) else {
            return self.complete(qi, slot, status::INTERNAL);
        };
        // SAFETY: the staging slot holds slot_bytes >= p.bytes (checked when taken).
        let at = unsafe { buf.add(p.done as usize) };
        let left = p.bytes - p.done;
        let off = p.offset + p.done as u64;
        let entry = match p.op {
            BAM_FILE_OP_READ => opcode::Read::new(fd, at, left).offset(off).build(),
            BAM_FILE_OP_WRITE => opcode::Write::new(fd, at, left).offset(off).build(),
            _ => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
        }
        .user_data(user);
        loop {
            // SAFETY: the buffer (a staging slot) stays valid and untouched by the other
            // side until this request's completion is published; the descriptor lives in
            // `files` as long as the worker.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                break;
            }
            // Full submission queue: hand it to the kernel and try again.
            if let Err(e) = self.ring.submit() {
                tracing::warn!("file backend: io_uring submit: {e}");
            }
        }
        self.in_flight += 1;
    }

    /// Reaps completed operations; returns how many.
    fn reap(&mut self) -> u32 {
        // Taken out of the ring first (finishing may submit again); the buffer is kept for
        // the next loop, so that reaping allocates nothing.
        let mut done = std::mem::take(&mut self.reaped);
        done.clear();
        done.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        self.in_flight -= done.len() as u32;
        for &(user, res) in &done {
            self.finish((user >> 32) as usize, user as u16, res);
        }
        let n = done.len() as u32;
        self.reaped = done;
        n
    }

    /// The operation of `slot` returned `res`: continue it, or complete it.
    fn finish(&mut self, qi: usize, slot: u16, res: i32) {
        let mut p = self.queues[qi].pending[slot as usize];
        if res == -libc::EINTR || res == -libc::EAGAIN {
            return self.submit(qi, slot);
        }
        if res < 0 {
            let errno = -res;
            let st = match (errno, p.op) {
                (libc::EIO, BAM_FILE_OP_READ) => status::UNRECOVERED_READ,
                (libc::EIO, _) => status::WRITE_FAULT,
                (libc::ENOSPC, _) | (libc::EDQUOT, _) | (libc::EFBIG, _) => {
                    status::CAPACITY_EXCEEDED
                }
                (libc::EROFS, _) | (libc::EBADF, BAM_FILE_OP_WRITE) => status::WRITE_PROTECTED,
                _ => status::INTERNAL,
            };
            self.ctl.record(ServiceError {
                ssd: p.ssd,
                offset: p.offset + p.done as u64,
                bytes: p.bytes - p.done,
                op: p.op,
                errno,
                status: st,
                what: std::io::Error::from_raw_os_error(errno).to_string(),
            });
            return self.complete(qi, slot, st);
        }
        if p.op == BAM_FILE_OP_FLUSH {
            return self.complete(qi, slot, 0);
        }
        p.done += res as u32;
        self.queues[qi].pending[slot as usize] = p;
        if p.done >= p.bytes {
            return self.complete(qi, slot, 0);
        }
        if res > 0 {
            return self.submit(qi, slot);
        }
        // End of file before the request's end.
        let medium = &self.files.media[p.ssd as usize];
        let end = p.offset + p.done as u64;
        if p.op == BAM_FILE_OP_READ && end >= medium.size && medium.current_size() >= medium.size {
            // The namespace's last slot runs past the end of the file: zeros there.
            if let Some(buf) = self.queues[qi].rings.staging(slot) {
                // SAFETY: done < bytes <= slot_bytes: inside the slot.
                unsafe {
                    std::ptr::write_bytes(buf.add(p.done as usize), 0, (p.bytes - p.done) as usize)
                };
            }
            return self.complete(qi, slot, 0);
        }
        let (st, what) = if p.op == BAM_FILE_OP_READ {
            (
                status::LBA_OUT_OF_RANGE,
                format!(
                    "the file ends at {} B now, {} B when it was opened (truncated underneath)",
                    medium.current_size(),
                    medium.size
                ),
            )
        } else {
            (
                status::WRITE_FAULT,
                "a write that wrote nothing".to_string(),
            )
        };
        self.ctl.record(ServiceError {
            ssd: p.ssd,
            offset: end,
            bytes: p.bytes - p.done,
            op: p.op,
            errno: 0,
            status: st,
            what,
        });
        self.complete(qi, slot, st)
    }

    /// Writes the completion of `slot` (published by [`Self::publish`]).
    fn complete(&mut self, qi: usize, slot: u16, st: u16) {
        let q = &mut self.queues[qi];
        let seq = q.pending[slot as usize].seq;
        q.pending[slot as usize].op = 0;
        q.rings.set_cpl(
            q.cpl_prod,
            FileCpl {
                slot,
                status: st,
                seq,
            },
        );
        q.cpl_prod = q.cpl_prod.wrapping_add(1);
        q.dirty = true;
        self.completed += 1;
    }

    /// Publishes every queue's new completions.
    fn publish(&mut self) {
        if self.completed > 0 {
            self.ctl
                .completed
                .fetch_add(self.completed, Ordering::Relaxed);
            self.completed = 0;
        }
        for q in &mut self.queues {
            if q.dirty {
                q.rings.publish_cpls(q.cpl_prod);
                q.dirty = false;
            }
        }
    }
}
