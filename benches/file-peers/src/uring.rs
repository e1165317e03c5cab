//! The `uring` peer: what fio's `ioengine=io_uring rw=randread` does. One ring per
//! thread, `depth` reads in flight, each completion answered by the next read; short
//! reads continue where they stopped.

use crate::run::{Counts, Job, Worker};
use anyhow::{anyhow, Context, Result};
use io_uring::{opcode, types, IoUring};
use std::fs::File;
use std::os::unix::io::{AsRawFd, RawFd};

/// One slot of the buffer: the piece being read into it.
#[derive(Clone, Copy, Default)]
struct Slot {
    off: u64,
    done: u32,
}

/// A thread's ring and its buffer of `depth` page-aligned slots.
pub struct UringWorker {
    ring: IoUring,
    fd: RawFd,
    /// Owns the slots' memory; touched only through `base` once reads are in flight.
    buf: Vec<u8>,
    base: *mut u8,
    stride: usize,
    bs: u32,
    slots: Vec<Slot>,
}

impl UringWorker {
    /// A worker reading `file` (which must outlive it) in pieces of `bs`, `depth` at a
    /// time. Call on the thread that will run it (the ring is single-issuer).
    pub fn new(file: &File, depth: usize, bs: u64) -> Result<UringWorker> {
        let bs32 = u32::try_from(bs).map_err(|_| anyhow!("--bs {bs}: at most 4 GiB - 1"))?;
        let stride = (bs as usize).next_multiple_of(4096);
        let mut buf = vec![0u8; depth * stride + 4096];
        let pad = buf.as_mut_ptr().align_offset(4096);
        if pad >= 4096 {
            return Err(anyhow!("cannot align the read buffer to a page"));
        }
        let base = buf.as_mut_ptr().wrapping_add(pad);
        let entries = (depth as u32).next_power_of_two();
        Ok(UringWorker {
            ring: new_ring(entries)?,
            fd: file.as_raw_fd(),
            buf,
            base,
            stride,
            bs: bs32,
            slots: vec![Slot::default(); depth],
        })
    }

    /// Queues the rest of slot `s`'s piece.
    fn push(&mut self, s: usize) -> Result<()> {
        let slot = self.slots[s];
        let at = self.base.wrapping_add(s * self.stride + slot.done as usize);
        let sqe = opcode::Read::new(types::Fd(self.fd), at, self.bs - slot.done)
            .offset(slot.off + u64::from(slot.done))
            .build()
            .user_data(s as u64);
        // SAFETY: the kernel writes the read into slot s of `buf`, which no one else
        // touches until its completion is reaped, and which outlives the read (run
        // drains every read before it returns, or leaks `buf`); the fd outlives the ring.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| anyhow!("the submission queue is full"))
    }

    /// The finished piece in slot `s`.
    fn piece(&self, s: usize) -> &[u8] {
        // SAFETY: slot s lies inside `buf`; its read completed (the CQE was reaped) and
        // none is in flight into it while the slice lives.
        unsafe { std::slice::from_raw_parts(self.base.add(s * self.stride), self.bs as usize) }
    }

    /// Handles slot `s`'s completion `res`; true when the slot is free again.
    fn complete(&mut self, s: usize, res: i32, job: &Job, counts: &mut Counts) -> Result<bool> {
        let Slot { off, done } = self.slots[s];
        if res < 0 {
            let e = std::io::Error::from_raw_os_error(-res);
            let hint = if -res == libc::EINVAL {
                " (with --direct, --bs and offsets must be multiples of the device's logical block size)"
            } else {
                ""
            };
            return Err(e).with_context(|| format!("read of {} B at offset {off}{hint}", self.bs));
        }
        if res == 0 {
            return Err(anyhow!(
                "read at offset {} found the end of the file",
                off + u64::from(done)
            ));
        }
        self.slots[s].done += res as u32;
        if self.slots[s].done < self.bs {
            self.push(s)?;
            return Ok(false);
        }
        counts.ops += 1;
        if job.verify {
            counts.checked(self.piece(s), off);
        }
        Ok(true)
    }
}

impl Worker for UringWorker {
    fn run(&mut self, job: &Job) -> Result<Counts> {
        let mut counts = Counts::default();
        let mut free: Vec<usize> = (0..self.slots.len()).rev().collect();
        let mut next = 0u64;
        let mut in_flight = 0usize;
        let mut failed: Option<anyhow::Error> = None;
        let mut reaped = Vec::with_capacity(self.slots.len());
        loop {
            // The clock is read once per batch of completions, not once per read.
            let open = failed.is_none() && !job.expired();
            while open && !free.is_empty() && job.in_quota(next) {
                let s = free.pop().unwrap_or_default();
                self.slots[s] = Slot {
                    off: job.plan.offset(job.thread, next),
                    done: 0,
                };
                next += 1;
                if let Err(e) = self.push(s) {
                    failed = Some(e);
                    break;
                }
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => {
                    // Reads may still be in flight and cannot be waited for: the kernel
                    // may yet write into `buf`, so it is never freed.
                    std::mem::forget(std::mem::take(&mut self.buf));
                    return Err(e).context("io_uring_enter");
                }
            }
            reaped.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data() as usize, c.result())),
            );
            for (s, res) in reaped.drain(..) {
                in_flight -= 1;
                match self.complete(s, res, job, &mut counts) {
                    Ok(true) => free.push(s),
                    Ok(false) => in_flight += 1,
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(counts),
        }
    }
}

/// A ring of `entries` for one thread with fio's flags: cooperative task running, single
/// issuer, deferred task running; without the last two, then plain, where the kernel
/// lacks them.
fn new_ring(entries: u32) -> Result<IoUring> {
    IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
        .or_else(|_| IoUring::builder().setup_coop_taskrun().build(entries))
        .or_else(|_| IoUring::new(entries))
        .map_err(|e| {
            let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                .map(|v| format!("kernel.io_uring_disabled = {}", v.trim()))
                .unwrap_or_else(|_| "kernel.io_uring_disabled unreadable".into());
            anyhow!(
                "io_uring setup failed: {e}. io_uring may be disabled ({sysctl}; 0 allows \
                 it), blocked by a seccomp policy (containers often block it), or the \
                 kernel too old"
            )
        })
}
