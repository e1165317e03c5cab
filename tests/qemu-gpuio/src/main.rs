//! `qemu-gpuio`: the real backend's CUDA-free bring-up (`bam::io::attach::attach`) in the
//! QEMU test guest, with `bam_p2p_stub`'s host memory playing GPU memory.
//!
//! ```text
//! qemu-gpuio [--queues N] [--depth N] [--ios N] [--revoke | --shared] [--allowed-dmesg FILE] kmod:/dev/bam-nvmeN
//! ```
//!
//! 1. Allocates two regions of "GPU memory" by mmap-ing `/dev/bam-p2p-stub` (queues and
//!    I/O buffer, sizes from [`Sizes::of`], on 64 KiB boundaries), calls [`attach`] with
//!    the controller's [`KmodTransport`] (MAP_GPU of both regions, bring-up, I/O queue
//!    pairs at the mapped bus addresses), writes the PRP lists into the buffer region.
//! 2. Drives verified I/O from the CPU through the created queue pairs, as the GPU would:
//!    SQEs written into the SQ memory, PRPs from the buffer's IOVA table and PRP lists,
//!    the SQ tail doorbell rung with `write32`, completions polled in the CQ memory
//!    (phase bit, bounded wait), the CQ head doorbell rung. Writes of a known pattern,
//!    then reads of the same blocks, compared byte for byte, on every queue pair.
//! 3. With `--revoke`: queues writes and reads whose PRP lists and data lie in the buffer
//!    region, frees that region (`munmap`, the stand-in's cudaFree: the module's free
//!    callback first stops the controller, CC.EN = 0 and bus mastering off, then releases
//!    the DMA mapping), requires the controller to be stopped (CC.EN = CSTS.RDY = 0), rings
//!    the doorbell anyway, and requires every command to end in an NVMe error status or
//!    (what a stopped controller gives) the bounded timeout, the stand-in's callback
//!    counters to move, the UNMAP of the revoked
//!    mapping to report REVOKED, the blocks targeted by the revoked writes to be unchanged
//!    on the disk, the queue memory outside the CQ entries untouched, and every DMAR fault
//!    the kernel logged meanwhile to name this controller and a revoked bus address (with
//!    the controller stopped there are none). The revoked file maps nothing more, so the
//!    disk check reopens the device. Those
//!    exact dmesg lines are appended to `--allowed-dmesg` for the final dmesg check.

use anyhow::{bail, ensure, Context, Result};
use bam::io::attach::{
    attach, attach_queues, bring_up, Attached, ControllerLink, DoorbellWindow, Regions, Sizes,
    GPU_PAGE,
};
use bam::io::IoConfig;
use bam_nvme::spec::{Cqe, Sqe, Status};
use bam_nvme::transport::kmod::KmodTransport;
use bam_nvme::{Controller, ControllerOptions, Transport};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Placeholder device address of the doorbells: the CPU rings them through
/// `Transport::write32` at `qp.sq_db - DOORBELLS`.
const DOORBELLS: u64 = 0x7e00_0000_0000;
/// First LBA this test writes (64 MiB into the namespace: clear of the other steps' data).
const BASE_LBA: u64 = 131_072;
const SLOT_BYTES: u64 = 16 << 10;
const PAGE: u64 = 4096;
const STUB: &str = "/dev/bam-p2p-stub";
const STUB_PARAMS: &str = "/sys/module/bam_p2p_stub/parameters";
/// Commands of each kind queued when the buffer is revoked.
const REVOKE_CMDS: usize = 8;

/// How a command or a wait failed.
#[derive(Debug, thiserror::Error)]
enum GpuIoError {
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

struct Args {
    device: String,
    queues: u32,
    depth: u32,
    ios: u64,
    revoke: bool,
    shared: bool,
    allowed_dmesg: Option<String>,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        device: String::new(),
        queues: 4,
        depth: 32,
        ios: 4000,
        revoke: false,
        shared: false,
        allowed_dmesg: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut val = |n: &str| it.next().with_context(|| format!("{n} needs a value"));
        match s.as_str() {
            "--queues" => a.queues = val("--queues")?.parse()?,
            "--depth" => a.depth = val("--depth")?.parse()?,
            "--ios" => a.ios = val("--ios")?.parse()?,
            "--revoke" => a.revoke = true,
            "--shared" => a.shared = true,
            "--allowed-dmesg" => a.allowed_dmesg = Some(val("--allowed-dmesg")?),
            d if d.starts_with("kmod:") && a.device.is_empty() => a.device = d.into(),
            other => bail!("unexpected argument {other}"),
        }
    }
    if a.device.is_empty() {
        bail!("usage: qemu-gpuio [--queues N] [--depth N] [--ios N] [--revoke] [--allowed-dmesg FILE] kmod:/dev/bam-nvmeN");
    }
    Ok(a)
}

// ---------------------------------------------------------------------------------------
// "GPU memory": the stand-in's mmap

/// One allocation of the stand-in's memory ("cudaMalloc"); dropping or [`Self::free`]
/// unmaps it ("cudaFree").
struct StubMem {
    ptr: *mut u8,
    len: usize,
}

impl StubMem {
    fn alloc(stub: &std::fs::File, len: usize) -> Result<StubMem> {
        let len = (len as u64).next_multiple_of(GPU_PAGE) as usize;
        let g = GPU_PAGE as usize;
        // SAFETY: a fresh PROT_NONE reservation; no existing mapping is touched.
        let r = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + g,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if r == libc::MAP_FAILED {
            bail!("reserving {len} bytes: {}", std::io::Error::last_os_error());
        }
        let r = r as usize;
        let a = r.next_multiple_of(g);
        // SAFETY: [a, a + len) lies inside the reservation made above, which we own.
        let p = unsafe {
            libc::mmap(
                a as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                stub.as_raw_fd(),
                0,
            )
        };
        let err = std::io::Error::last_os_error();
        // SAFETY: the unmapped pieces are the reservation's ends outside [a, a + len).
        unsafe {
            if a > r {
                libc::munmap(r as *mut libc::c_void, a - r);
            }
            if r + len + g > a + len {
                libc::munmap((a + len) as *mut libc::c_void, r + len + g - (a + len));
            }
        }
        if p == libc::MAP_FAILED {
            // SAFETY: the reservation's middle part, still ours.
            unsafe { libc::munmap(a as *mut libc::c_void, len) };
            bail!("mmap of {len} bytes of {STUB}: {err}");
        }
        ensure!(p as usize == a, "{STUB} mapped at {p:?}, not at {a:#x}");
        ensure!(
            (p as u64) & (GPU_PAGE - 1) == 0,
            "{STUB} memory at {p:?} is not on a 64 KiB boundary"
        );
        Ok(StubMem {
            ptr: p as *mut u8,
            len,
        })
    }

    fn dev(&self) -> u64 {
        self.ptr as u64
    }

    /// "cudaFree": unmaps the whole allocation; its free callbacks run.
    fn free(&mut self) -> Result<()> {
        if self.ptr.is_null() {
            return Ok(());
        }
        // SAFETY: exactly the mapping made in `alloc`; nothing refers to it afterwards
        // (the pointer is cleared, every access goes through `self`).
        let r = unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
        self.ptr = std::ptr::null_mut();
        ensure!(r == 0, "munmap: {}", std::io::Error::last_os_error());
        Ok(())
    }

    /// Pointer to byte `off`, checked against the allocation.
    fn at(&self, off: u64, len: usize) -> *mut u8 {
        assert!(!self.ptr.is_null(), "stub memory used after free");
        assert!(
            off as usize + len <= self.len,
            "{off}+{len} beyond {}",
            self.len
        );
        // SAFETY: in bounds, checked above.
        unsafe { self.ptr.add(off as usize) }
    }

    fn write(&self, off: u64, data: &[u8]) {
        let p = self.at(off, data.len());
        // SAFETY: `p` covers data.len() bytes of our mapping; no Rust reference to this
        // memory exists (the controller writes it by DMA, the CPU only through raw
        // pointers).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) }
    }

    fn read(&self, off: u64, out: &mut [u8]) {
        let p = self.at(off, out.len());
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) }
    }
}

impl Drop for StubMem {
    fn drop(&mut self) {
        let _ = self.free();
    }
}

fn stub_counter(name: &str) -> Result<i64> {
    let p = format!("{STUB_PARAMS}/{name}");
    Ok(std::fs::read_to_string(&p)
        .with_context(|| format!("reading {p}"))?
        .trim()
        .parse()?)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counters {
    live_page_tables: i64,
    live_dma_mappings: i64,
    callbacks: i64,
}

fn counters() -> Result<Counters> {
    Ok(Counters {
        live_page_tables: stub_counter("live_page_tables")?,
        live_dma_mappings: stub_counter("live_dma_mappings")?,
        callbacks: stub_counter("callbacks")?,
    })
}

// ---------------------------------------------------------------------------------------
// A queue pair driven from the CPU in "GPU memory"

struct Qp {
    qid: u16,
    depth: u32,
    sq_off: u64,
    cq_off: u64,
    sq_db: usize,
    cq_db: usize,
    tail: u32,
    head: u32,
    phase: bool,
    /// Submitted, not yet rung.
    pending: u32,
}

/// One I/O: `bytes` at `buf_off` of the buffer region to or from `lba`.
#[derive(Clone, Copy, Debug)]
struct Io {
    write: bool,
    lba: u64,
    blocks: u32,
    buf_off: u64,
}

struct Ctx<'a> {
    t: &'a KmodTransport,
    a: &'a Attached,
    queues: &'a StubMem,
    buf: &'a StubMem,
    nsid: u32,
    lba_size: u64,
    timeout: Duration,
    /// First LBA of this attachment's slots on the namespace.
    base_lba: u64,
}

impl<'a> Ctx<'a> {
    fn new(
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
    fn submit(&self, q: &mut Qp, io: &Io, cid: u16) {
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
    fn ring(&self, q: &mut Qp) {
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
    fn reap(&self, q: &mut Qp, want: usize) -> Result<Vec<(u16, Status)>, GpuIoError> {
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

/// Content of `len` bytes at `lba` written in `round`: every 8 bytes name the LBA, the
/// round and the byte, so a misplaced or stale block is caught.
fn fill(lba: u64, round: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    for i in 0..len / 8 {
        let x = (lba << 24) ^ (round << 44) ^ (i as u64) ^ 0x5bd1_e995_0000_0000;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Runs `ios` (one batch per queue pair at a time, all queue pairs at once): submit, ring
/// every queue, reap every queue; every status must be success.
fn run_batch(cx: &Ctx, qps: &mut [Qp], batches: &[Vec<Io>]) -> Result<(), GpuIoError> {
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
fn qps_of(a: &Attached, qbase: u64) -> Vec<Qp> {
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

/// Two "GPUs" (two allocations of the stand-in's memory) sharing one controller, as
/// `IoArray::on_shared` does: the controller is brought up once with queue pairs for
/// both, each attaches its own (distinct queue ids), verified I/O runs through each on
/// its own LBAs, the second detaches (its queue pairs deleted on the controller) while
/// the first's go on working, then the first detaches and the stand-in's counters are
/// back where they were.
fn run_shared(
    t: &Arc<KmodTransport>,
    bar0: usize,
    cfg: &IoConfig,
    ios: u64,
    c0: Counters,
) -> Result<()> {
    let sizes = Sizes::of(cfg);
    let stub = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(STUB)
        .with_context(|| format!("opening {STUB} (is bam_p2p_stub loaded?)"))?;
    let transport: Arc<dyn Transport> = t.clone();
    let ctrls = bring_up(&[transport], 2 * cfg.queues)?;
    let window = DoorbellWindow {
        addr: DOORBELLS,
        len: bar0,
        mmio: true,
    };
    let mut gpus = Vec::new();
    for _ in 0..2 {
        let queues = StubMem::alloc(&stub, sizes.queue_stride as usize)?;
        let buf = StubMem::alloc(&stub, sizes.buf_len as usize)?;
        let regions = Regions {
            queues: queues.dev(),
            queue_stride: sizes.queue_stride,
            buf: buf.dev(),
        };
        let a = attach_queues(&ctrls, &[window], regions, cfg, true)?;
        let prp_bytes: Vec<u8> = a.prp_lists.iter().flat_map(|p| p.to_le_bytes()).collect();
        buf.write(a.buf.prp_off, &prp_bytes);
        gpus.push((queues, buf, a));
    }
    let qids = |a: &Attached| a.qps.iter().map(|q| q.qid).collect::<Vec<_>>();
    let (q0, q1) = (qids(&gpus[0].2), qids(&gpus[1].2));
    ensure!(
        q0.iter().all(|q| !q1.contains(q)),
        "the two attachments share queue ids: {q0:?} and {q1:?}"
    );
    println!("shared controller: attachment 0 has qids {q0:?}, attachment 1 {q1:?}");
    let slots_per_qp = cfg.nslots as u64 / cfg.queues as u64;
    // Each attachment's slots on their own LBAs.
    let span = cfg.nslots as u64 * SLOT_BYTES / gpus[0].2.lba_size as u64;
    ensure!(
        gpus[0].2.ns_blocks >= BASE_LBA + 2 * span,
        "namespace too small for two attachments"
    );
    let mut lasts = Vec::new();
    let mut qpss = Vec::new();
    for (g, (queues, buf, a)) in gpus.iter().enumerate() {
        let mut cx = Ctx::new(t, a, queues, buf, cfg.timeout);
        cx.base_lba = BASE_LBA + g as u64 * span;
        let mut qps = qps_of(a, queues.dev());
        let mut last = vec![None; cfg.nslots as usize];
        let n = verified_io(&cx, &mut qps, ios, slots_per_qp, &mut last)?;
        println!("attachment {g}: {n} verified I/Os over qids {:?}", qids(a));
        lasts.push(last);
        qpss.push(qps);
    }
    // Attachment 1 detaches: its queue pairs are deleted; the controller stays up.
    let (q1m, b1m, a1) = gpus.pop().expect("two attachments");
    ensure!(a1.release(), "deleting attachment 1's queue pairs failed");
    drop((b1m, q1m));
    let (queues, buf, a0) = &gpus[0];
    let cx = Ctx::new(t, a0, queues, buf, cfg.timeout);
    let m = final_check(&cx, &mut qpss[0], slots_per_qp, &lasts[0])?;
    let mut last = lasts[0].clone();
    let n = verified_io(&cx, &mut qpss[0], ios / 2, slots_per_qp, &mut last)?;
    println!("after attachment 1 detached: attachment 0 re-read {m} slots and did {n} more verified I/Os");
    let (q0m, b0m, a0) = gpus.pop().expect("attachment 0");
    ensure!(a0.release(), "deleting attachment 0's queue pairs failed");
    drop((b0m, q0m));
    drop(ctrls);
    let c2 = counters()?;
    ensure!(
        c2 == c0,
        "stub counters after both detached {c2:?}, before {c0:?}"
    );
    Ok(())
}

/// The verified I/O phase; returns the number of I/Os done. `last` records the last
/// round written to every slot.
fn verified_io(
    cx: &Ctx,
    qps: &mut [Qp],
    ios: u64,
    slots_per_qp: u64,
    last: &mut [Option<(u32, u64)>],
) -> Result<u64> {
    let slot_blocks = (SLOT_BYTES / cx.lba_size) as u32;
    let batch = (qps[0].depth - 1).min(slots_per_qp as u32) as usize;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut done = 0u64;
    let mut round = 0u64;
    while done < ios {
        round += 1;
        let mut writes: Vec<Vec<Io>> = Vec::new();
        let mut datas: Vec<Vec<Vec<u8>>> = Vec::new();
        for qi in 0..qps.len() as u64 {
            let mut b: Vec<Io> = Vec::new();
            let mut d = Vec::new();
            while b.len() < batch {
                let slot = qi * slots_per_qp + rng.next() % slots_per_qp;
                let slot_off = slot * SLOT_BYTES;
                if b.iter().any(|io| io.buf_off / SLOT_BYTES == slot) {
                    continue;
                }
                // 1..=slot_blocks blocks at a block offset inside the slot: PRP1 only,
                // PRP1+PRP2, and PRP lists, page-aligned or not
                let blocks = 1 + (rng.next() % slot_blocks as u64) as u32;
                let shift = rng.next() % (slot_blocks - blocks + 1) as u64;
                let io = Io {
                    write: true,
                    lba: cx.base_lba + slot * slot_blocks as u64,
                    blocks,
                    buf_off: slot_off + shift * cx.lba_size,
                };
                let data = fill(io.lba, round, blocks as usize * cx.lba_size as usize);
                cx.buf.write(io.buf_off, &data);
                last[slot as usize] = Some((blocks, round));
                b.push(io);
                d.push(data);
            }
            writes.push(b);
            datas.push(d);
        }
        run_batch(cx, qps, &writes)?;
        // scribble over the slots, read back into them
        let reads: Vec<Vec<Io>> = writes
            .iter()
            .map(|b| {
                b.iter()
                    .map(|io| {
                        cx.buf.write(
                            io.buf_off,
                            &vec![0xa5; io.blocks as usize * cx.lba_size as usize],
                        );
                        Io {
                            write: false,
                            ..*io
                        }
                    })
                    .collect()
            })
            .collect();
        run_batch(cx, qps, &reads)?;
        for (b, d) in reads.iter().zip(&datas) {
            for (io, want) in b.iter().zip(d) {
                let mut got = vec![0u8; want.len()];
                cx.buf.read(io.buf_off, &mut got);
                if let Some(at) = got.iter().zip(want).position(|(x, y)| x != y) {
                    return Err(GpuIoError::Mismatch { lba: io.lba, at }.into());
                }
            }
            done += 2 * b.len() as u64;
        }
    }
    Ok(done)
}

/// Reads every written slot once more (full slots, through PRP lists) and checks its
/// last write.
fn final_check(
    cx: &Ctx,
    qps: &mut [Qp],
    slots_per_qp: u64,
    last: &[Option<(u32, u64)>],
) -> Result<u64> {
    let slot_blocks = (SLOT_BYTES / cx.lba_size) as u32;
    let batch = (qps[0].depth - 1) as u64;
    let mut n = 0;
    let mut start = 0u64;
    while start < slots_per_qp {
        let end = (start + batch).min(slots_per_qp);
        let mut reads: Vec<Vec<Io>> = Vec::new();
        for qi in 0..qps.len() as u64 {
            let b: Vec<Io> = (start..end)
                .map(|s| qi * slots_per_qp + s)
                .filter(|&s| last[s as usize].is_some())
                .map(|s| {
                    cx.buf.write(s * SLOT_BYTES, &[0x5a; SLOT_BYTES as usize]);
                    Io {
                        write: false,
                        lba: cx.base_lba + s * slot_blocks as u64,
                        blocks: slot_blocks,
                        buf_off: s * SLOT_BYTES,
                    }
                })
                .collect();
            reads.push(b);
        }
        run_batch(cx, qps, &reads)?;
        for b in &reads {
            for io in b {
                let slot = (io.buf_off / SLOT_BYTES) as usize;
                let (blocks, round) = last[slot].unwrap();
                let want = fill(io.lba, round, blocks as usize * cx.lba_size as usize);
                let mut got = vec![0u8; want.len()];
                cx.buf.read(io.buf_off, &mut got);
                if let Some(at) = got.iter().zip(&want).position(|(x, y)| x != y) {
                    return Err(GpuIoError::Mismatch { lba: io.lba, at }.into());
                }
                n += 1;
            }
        }
        start = end;
    }
    Ok(n)
}

// ---------------------------------------------------------------------------------------
// Log capture: the GpuMapping release reports REVOKED through a tracing warning

#[derive(Clone)]
struct Tee(Arc<Mutex<Vec<u8>>>);

impl Write for Tee {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        std::io::stderr().write_all(b)?;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Opens the device again once the previous file is released (the release runs when the
/// last reference, a BAR mapping included, is gone).
fn reopen(path: &str) -> Result<Arc<KmodTransport>> {
    let start = Instant::now();
    loop {
        match KmodTransport::open(path) {
            Ok(t) => return Ok(t),
            Err(e) if start.elapsed() < Duration::from_secs(5) => {
                tracing::debug!("reopen {path}: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e).context("reopening the device after the revocation"),
        }
    }
}

fn kmsg(line: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .context("opening /dev/kmsg")?;
    // one record, finalized at once (a record without its newline may stay unreadable)
    f.write_all(format!("{line}\n").as_bytes())?;
    Ok(())
}

fn main() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let tee = Tee(log.clone());
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || tee.clone())
        .init();
    match run(&log) {
        Ok(()) => println!("qemu-gpuio: OK"),
        Err(e) => {
            println!("qemu-gpuio: FAILED: {e:#}");
            std::process::exit(1);
        }
    }
}

fn run(log: &Arc<Mutex<Vec<u8>>>) -> Result<()> {
    let args = parse_args()?;
    let path = args.device.strip_prefix("kmod:").unwrap();
    let t = KmodTransport::open(path)?;
    let bdf = t.info().bdf();
    let bar0 = t.info().bar0_size as usize;
    let c0 = counters()?;
    println!(
        "{}: {bdf}, BAR0 {bar0} B, IOMMU {}; stub counters {c0:?}",
        t.describe(),
        t.info().iommu()
    );

    let cfg = IoConfig {
        queues: args.queues,
        depth: args.depth,
        slot_bytes: SLOT_BYTES,
        nslots: 64 * args.queues,
        timeout: Duration::from_secs(10),
        queue_scratch_bytes: 0,
    };
    if args.shared {
        return run_shared(&t, bar0, &cfg, args.ios, c0);
    }
    let sizes = Sizes::of(&cfg);
    let stub = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(STUB)
        .with_context(|| format!("opening {STUB} (is bam_p2p_stub loaded?)"))?;
    let queues = StubMem::alloc(&stub, sizes.queue_stride as usize)?;
    let mut buf = StubMem::alloc(&stub, sizes.buf_len as usize)?;
    println!(
        "stub memory: queues {:#x}+{:#x}, buffer {:#x}+{:#x} (prp_off {:#x}, prp_stride {})",
        queues.dev(),
        queues.len,
        buf.dev(),
        buf.len,
        sizes.prp_off,
        sizes.prp_stride
    );
    let link = ControllerLink {
        transport: t.clone(),
        doorbells: DOORBELLS,
        doorbells_len: bar0,
        mmio: true,
    };
    let regions = Regions {
        queues: queues.dev(),
        queue_stride: sizes.queue_stride,
        buf: buf.dev(),
    };
    let a = attach(vec![link], regions, &cfg)?;
    let c1 = counters()?;
    ensure!(
        c1.live_dma_mappings == c0.live_dma_mappings + 2
            && c1.live_page_tables == c0.live_page_tables + 2,
        "attach should hold two stub mappings: {c0:?} -> {c1:?}"
    );
    ensure!(a.qps.len() == args.queues as usize && a.ssds.len() == 1);
    ensure!(a.buf.base == buf.dev() && a.buf.len == sizes.buf_len);
    ensure!(
        a.buf.iova_shift == 16,
        "stub pages are 64 KiB, iova_shift {}",
        a.buf.iova_shift
    );
    let table_len = a.iova_table.as_ref().map_or(0, |t| t.len());
    println!(
        "attached: {} queue pairs of {} entries (qids {:?}), {} B blocks, {} blocks; \
         IOVA table {} entries ({}), {} PRP list entries",
        a.qps.len(),
        cfg.depth,
        a.qps.iter().map(|q| q.qid).collect::<Vec<_>>(),
        a.lba_size,
        a.ns_blocks,
        table_len,
        if a.iova_table.is_some() {
            "translated"
        } else {
            "identity"
        },
        a.prp_lists.len()
    );
    ensure!(a.lba_size.is_power_of_two() && a.lba_size as u64 <= PAGE);
    ensure!(
        a.ns_blocks >= BASE_LBA + cfg.nslots as u64 * SLOT_BYTES / a.lba_size as u64,
        "namespace too small"
    );
    // the "device library's" tables: PRP lists at prp_off of the buffer region
    let prp_bytes: Vec<u8> = a.prp_lists.iter().flat_map(|p| p.to_le_bytes()).collect();
    buf.write(a.buf.prp_off, &prp_bytes);

    let qbase = queues.dev();
    let mut qps = qps_of(&a, qbase);
    let cx = Ctx::new(&t, &a, &queues, &buf, cfg.timeout);
    let slots_per_qp = cfg.nslots as u64 / cfg.queues as u64;
    let mut last = vec![None; cfg.nslots as usize];
    let t0 = Instant::now();
    let n = verified_io(&cx, &mut qps, args.ios, slots_per_qp, &mut last)?;
    let m = final_check(&cx, &mut qps, slots_per_qp, &last)?;
    println!(
        "verified I/O: {n} I/Os over {} queue pairs, {m} slots re-read, in {:.1} s",
        qps.len(),
        t0.elapsed().as_secs_f64()
    );

    if !args.revoke {
        a.release();
        let c2 = counters()?;
        ensure!(
            c2 == c0,
            "stub counters after release {c2:?}, before {c0:?}"
        );
        return Ok(());
    }

    // ---- revocation: free the buffer region under queued commands ----------------------
    let slot_blocks = (SLOT_BYTES / cx.lba_size) as u32;
    let full = |s: u64, write: bool| Io {
        write,
        lba: BASE_LBA + s * slot_blocks as u64,
        blocks: slot_blocks,
        buf_off: s * SLOT_BYTES,
    };
    // slots 0..8 of queue pair 0 are written (round 1000), verified; 8..16 are read
    let w_slots: Vec<u64> = (0..REVOKE_CMDS as u64).collect();
    let r_slots: Vec<u64> = (REVOKE_CMDS as u64..2 * REVOKE_CMDS as u64).collect();
    ensure!(2 * REVOKE_CMDS as u64 <= slots_per_qp && 2 * REVOKE_CMDS < cfg.depth as usize);
    let before: Vec<Io> = w_slots.iter().map(|&s| full(s, true)).collect();
    for io in &before {
        cx.buf
            .write(io.buf_off, &fill(io.lba, 1000, SLOT_BYTES as usize));
    }
    let mut batches: Vec<Vec<Io>> = vec![Vec::new(); qps.len()];
    batches[0] = before;
    run_batch(&cx, &mut qps, &batches)?;
    // new content for the writes that must not land
    let mut queued = Vec::new();
    for &s in &w_slots {
        let io = full(s, true);
        cx.buf
            .write(io.buf_off, &fill(io.lba, 2000, SLOT_BYTES as usize));
        queued.push(io);
    }
    queued.extend(r_slots.iter().map(|&s| full(s, false)));
    for (i, io) in queued.iter().enumerate() {
        cx.submit(&mut qps[0], io, i as u16);
    }
    let revoked_pages: Vec<u64> = a.iova_table.clone().unwrap_or_else(|| {
        (0..buf.len as u64 / GPU_PAGE)
            .map(|i| buf.dev() + i * GPU_PAGE)
            .collect()
    });
    let marker = format!(
        "bam-gpuio: {bdf}: revoking the I/O buffer under {} queued commands",
        queued.len()
    );
    kmsg(&marker)?;
    buf.free()?;
    let c2 = counters()?;
    ensure!(
        c2.callbacks == c1.callbacks + 1
            && c2.live_dma_mappings == c1.live_dma_mappings - 1
            && c2.live_page_tables == c1.live_page_tables - 1,
        "freeing the buffer should run one free callback: {c1:?} -> {c2:?}"
    );
    println!("buffer freed under the mapping: stub counters {c1:?} -> {c2:?}");
    // the module's free callback stopped the controller before it released the DMA
    // mapping (CC.EN = 0, bus mastering off): nothing can reach the freed addresses
    let (cc, csts) = (t.read32(0x14), t.read32(0x1c));
    ensure!(
        cc & 1 == 0 && csts & 1 == 0,
        "the revocation should have stopped the controller: CC {cc:#x} CSTS {csts:#x}"
    );
    println!("controller stopped by the revocation: CC {cc:#x} CSTS {csts:#x}");
    // the queue memory is still there; only the buffer is gone
    let cx = Ctx::new(&t, &a, &queues, &buf, cfg.timeout);
    cx.ring(&mut qps[0]);
    let outcome = match cx.reap(&mut qps[0], queued.len()) {
        Ok(done) => {
            let mut bad = Vec::new();
            for (cid, status) in &done {
                println!(
                    "  revoked {} (cid {cid}): {status}",
                    if queued[*cid as usize].write {
                        "write"
                    } else {
                        "read"
                    }
                );
                if status.is_success() {
                    bad.push(*cid);
                }
            }
            ensure!(
                bad.is_empty(),
                "commands {bad:?} succeeded although their PRP lists were revoked"
            );
            let e = GpuIoError::Nvme {
                qid: qps[0].qid,
                cid: done[0].0,
                status: done[0].1,
            };
            format!("every command failed with an NVMe status, e.g. {e}")
        }
        Err(e @ GpuIoError::Timeout { .. }) => format!("bounded wait ended: {e}"),
        Err(e) => return Err(e.into()),
    };
    println!("revocation: {outcome}");
    // let the kernel print the IOMMU faults of the blocked accesses
    std::thread::sleep(Duration::from_secs(2));
    let end_marker = format!("bam-gpuio: {bdf}: revocation done");
    kmsg(&end_marker)?;

    // sentinel: the queue memory outside the CQ entries that completed is unchanged
    // (SQs hold our SQEs; the queue protocol's areas and the rest must still be zero)
    let mut qmem = vec![0u8; queues.len];
    queues.read(0, &mut qmem);
    let layout = sizes.layout;
    for (i, q) in a.qps.iter().enumerate() {
        let base = (q.sq - qbase) as usize - layout.sq;
        let zero = &qmem[base + layout.slots..base + layout.size];
        ensure!(
            zero.iter().all(|&b| b == 0),
            "queue pair {i}: its unused area was written"
        );
    }
    let used = layout.size * cfg.queues as usize;
    ensure!(
        qmem[used..].iter().all(|&b| b == 0),
        "queue memory beyond the queue pairs was written"
    );
    // no completion beyond the ones reaped
    let q0 = &qps[0];
    let off = q0.cq_off as usize + q0.head as usize * 16;
    let st = u16::from_le_bytes([qmem[off + 14], qmem[off + 15]]);
    ensure!(
        st & 1 != q0.phase as u16,
        "stray completion in CQ slot {}",
        q0.head
    );

    // release: controllers shut down, then UNMAP: the buffer's must report REVOKED
    let before_release = log.lock().unwrap().len();
    a.release();
    let text = String::from_utf8_lossy(&log.lock().unwrap()[before_release..]).into_owned();
    let revoked_warnings = text
        .matches("GPU memory was freed while still mapped")
        .count();
    ensure!(
        revoked_warnings == 1,
        "UNMAP should report the revoked mapping once, log: {text}"
    );
    println!("UNMAP reported the revoked buffer mapping (REVOKED)");
    let c3 = counters()?;
    ensure!(
        c3.live_dma_mappings == c0.live_dma_mappings
            && c3.live_page_tables == c0.live_page_tables
            && c3.callbacks == c0.callbacks + 1,
        "stub counters after release {c3:?}, at start {c0:?}"
    );
    drop(queues);
    // a revoked file maps nothing more (ENOTRECOVERABLE): close it and open the device anew
    drop(t);
    let t = reopen(path)?;

    // the disk: the revoked writes did not land
    let ctrl = Controller::new(
        t.clone(),
        ControllerOptions {
            io_queue_pairs: 1,
            ..Default::default()
        },
    )?;
    let ns = ctrl.namespace(1)?;
    let mut qp = ctrl.create_io_queue_pair(8)?;
    for &s in &w_slots {
        let lba = BASE_LBA + s * slot_blocks as u64;
        let mut got = vec![0u8; SLOT_BYTES as usize];
        qp.read_into(&ns, lba, &mut got)?;
        let want = fill(lba, 1000, SLOT_BYTES as usize);
        if let Some(at) = got.iter().zip(&want).position(|(x, y)| x != y) {
            bail!("LBA {lba}: a revoked write changed the disk (byte {at})");
        }
    }
    println!(
        "the {} revoked writes left the disk unchanged",
        w_slots.len()
    );
    drop(qp);
    drop(ctrl);

    // the IOMMU faults logged meanwhile: only this controller, only revoked addresses
    check_dmesg(
        &bdf,
        (&marker, &end_marker),
        &revoked_pages,
        args.allowed_dmesg.as_deref(),
    )?;
    Ok(())
}

/// Checks the DMAR fault lines logged between the two markers: each names this controller
/// and an address in one of the revoked 64 KiB pages; appends them to `allowed` (the final
/// dmesg check accepts exactly those lines). Faults after the end marker are not listed,
/// so the final check fails on them.
fn check_dmesg(
    bdf: &str,
    markers: (&str, &str),
    pages: &[u64],
    allowed: Option<&str>,
) -> Result<()> {
    let out = std::process::Command::new("dmesg")
        .output()
        .context("running dmesg")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.contains(markers.0))
        .context("the revocation marker is not in dmesg")?;
    let end = start
        + lines[start..]
            .iter()
            .position(|l| l.contains(markers.1))
            .context("the end-of-revocation marker is not in dmesg")?;
    // "DMAR: [DMA Read NO_PASID] Request device [00:03.0] fault addr 0x... [fault reason ...]"
    let short = &bdf[5..]; // bus:dev.fn
    let mut ok = Vec::new();
    for l in &lines[start + 1..end] {
        if !l.contains("DMAR") || !l.contains("fault") {
            continue;
        }
        if l.contains("DRHD: handling fault status reg") {
            ok.push(*l);
            continue;
        }
        let dev = l
            .split("Request device [")
            .nth(1)
            .and_then(|r| r.split(']').next())
            .with_context(|| format!("unexpected DMAR line: {l}"))?;
        ensure!(
            dev == short,
            "DMAR fault of another device ({dev}, we are {short}): {l}"
        );
        let addr = l
            .split("fault addr ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
            .with_context(|| format!("no fault address in: {l}"))?;
        ensure!(
            pages.iter().any(|&p| (p..p + GPU_PAGE).contains(&addr)),
            "DMAR fault at {addr:#x}, outside the revoked buffer: {l}"
        );
        ok.push(*l);
    }
    println!(
        "{} DMAR fault lines during the revocation, all at revoked addresses of {short}",
        ok.len()
    );
    for l in &ok {
        println!("  {l}");
    }
    if let Some(path) = allowed {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        for l in &ok {
            writeln!(f, "{l}")?;
        }
    }
    Ok(())
}
