//! The GPU I/O layer: queue pairs, I/O buffer slots, PRP lists and IOVA tables in GPU
//! memory over any set of brought-up controllers, and the `bam_io_view` that the device
//! library (`crates/bam/cuda/include/bam/io.cuh`) reads.
//!
//! [`IoArray`] is what the cache, `Array<T>` and the raw benchmark take. A backend builds
//! it from one [`ControllerLink`] per controller, which says how GPU threads reach the
//! controller's doorbells; the controller reaches GPU memory through its transport's
//! `map_gpu`:
//!
//! | backend | doorbells the GPU writes | GPU memory the controller reaches through |
//! |---|---|---|
//! | `storage::sim` (simulated array) | a page of GPU memory the controller kernel polls | identity (same GPU) |
//! | `storage::hostctl` (controller model on CPU threads) | a pinned host page the CPU threads poll | CUDA copies (the model's DMA engine) |
//! | `storage::file` (files through io_uring) | a page of GPU memory the forwarder kernel polls | identity: the forwarder's warps copy to and from pinned staging |
//! | `storage::kmod` (real SSDs) | BAR0, registered with `CU_MEMHOSTREGISTER_IOMEMORY` | nvidia_p2p (`MAP_GPU` of the kernel module) |
//!
//! The bring-up itself ([`attach`]) needs no CUDA, so the QEMU test guest runs it against
//! QEMU's controllers with the kernel module's stand-in for GPU memory.

pub mod attach;
mod config;
mod error_log;
mod recovery;
pub mod shared;
mod snapshot;

pub use attach::{ControllerLink, DmaRegion, DoorbellWindow};
pub(crate) use config::timeout_ns;
pub use config::{check_timeout, IoConfig, MAX_TIMEOUT};
pub use error_log::{ErrorLog, PendingErrors};
pub(crate) use recovery::QueueService;
pub use recovery::Recovery;
pub use shared::{attach_gpus, Access, LbaClaim, SharedControllers, WriteClaims};
pub use snapshot::QueueSnapshot;

use crate::abi::*;
use crate::cuda::TableLayout;
use crate::cuda::{AlignedBuffer, DeviceBuffer, Gpu};
use crate::error::{IoError, Result};
use attach::{Attached, QpLayout, Regions, Sizes, GPU_PAGE};
use bam_nvme::Controller;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Capacity of the device-side error log.
pub const ERROR_LOG_CAPACITY: u32 = 4096;

/// What kernels and the cache need to know about an [`IoArray`].
#[derive(Clone, Debug, Serialize)]
pub struct Geometry {
    /// Controllers (SSDs).
    pub ssds: u32,
    /// Queue pairs per SSD.
    pub queues: u32,
    /// Entries per queue.
    pub depth: u32,
    /// Logical block size (the same on every SSD).
    pub lba_size: u32,
    /// Blocks of the smallest SSD's namespace 1.
    pub ns_blocks: u64,
    /// Bytes per I/O buffer slot.
    pub slot_bytes: u64,
    /// I/O buffer slots.
    pub nslots: u32,
    /// Bound of every GPU-side wait.
    pub timeout: Duration,
    /// SMs the backend keeps for itself (the simulated controllers); user kernels
    /// should leave them free.
    pub reserved_sms: u32,
}

impl Geometry {
    /// Bytes of the smallest SSD's namespace.
    pub fn capacity_bytes(&self) -> u64 {
        self.ns_blocks * self.lba_size as u64
    }
}

/// Queue pairs, I/O buffers and their device-side views in GPU memory, over brought-up
/// controllers.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// // Backends build it; users pass it to the cache or the benchmark.
/// let gpu = bam::Gpu::new(0)?;
/// let storage = "sim:ideal".parse::<bam::storage::GpuDevice>()?.open(&gpu, &bam::io::IoConfig::new())?;
/// let io: &bam::IoArray = storage.io();
/// println!("{} SSDs, {} queue pairs each", io.geometry().ssds, io.geometry().queues);
/// # Ok(()) }
/// ```
pub struct IoArray {
    /// Controllers and DMA mappings, released first (see Drop).
    attached: Option<Attached>,
    gpu: Arc<Gpu>,
    qmem: AlignedBuffer,
    buf: AlignedBuffer,
    tables: DeviceBuffer,
    io_view: IoView,
    geometry: Geometry,
    layout: QpLayout,
    /// The error log of kernels launched with [`IoArray::io_view`] (raw jobs); caches and
    /// scans have their own.
    log: ErrorLog,
    /// Buffer slot ranges (first, count) in use by a cache or a scan ([`SlotLease`]).
    leases: Mutex<Vec<(u32, u32)>>,
    /// The write-sharing registry of the controllers, when other GPUs share them.
    claims: Option<Arc<WriteClaims>>,
    /// GPUs the controllers were brought up for (1: this GPU alone).
    sharers: u32,
    /// This I/O layer's id in the claims registry.
    owner: u64,
    /// Queue pairs of every SSD reserved as a cache's fill queues ([`FillQueueLease`]).
    fill_queues: std::sync::atomic::AtomicU32,
    /// Slot ranges whose lease ended while a queue pair was failed: still in `leases`,
    /// until [`IoArray::recover`] (recovery.rs).
    held: Mutex<Vec<(u32, u32)>>,
    /// The backend's side of queue recovery, if it has one.
    service: Mutex<Option<Arc<dyn QueueService>>>,
    /// One recovery at a time.
    recovering: Mutex<()>,
    /// Caches over this I/O layer (their fill services use its queue pairs while they
    /// live): [`IoArray::recover`] is refused while there are any.
    pub(crate) caches: std::sync::atomic::AtomicU32,
}

/// Queue pairs of every SSD reserved for a cache's fill service (its fill queues,
/// `crates/bam/cuda/include/bam/detail/fill_queue.cuh`): the last `count` of each SSD's, which the I/O
/// layer's view then keeps out of `default_qp`. Given back on drop.
pub struct FillQueueLease<'a> {
    io: &'a IoArray,
    /// Index of the first reserved queue pair within each SSD's.
    pub first: u32,
    /// Queue pairs reserved per SSD.
    pub count: u32,
}

impl Drop for FillQueueLease<'_> {
    fn drop(&mut self) {
        self.io
            .fill_queues
            .store(0, std::sync::atomic::Ordering::Release);
    }
}

/// Ids of I/O layers in claims registries.
static NEXT_OWNER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A range of an [`IoArray`]'s buffer slots held by one user (a cache's lines, a scan's
/// chunks), given back on drop: two users of the same slots would overwrite each
/// other's data in flight.
pub struct SlotLease<'a> {
    io: &'a IoArray,
    /// First slot.
    pub first: u32,
    /// Slots.
    pub count: u32,
}

impl Drop for SlotLease<'_> {
    fn drop(&mut self) {
        // Held in quarantine instead while a queue pair is failed (recovery.rs).
        self.io.end_lease((self.first, self.count));
    }
}

impl IoArray {
    /// Allocates the queue memory and the I/O buffer in GPU memory (on 64 KiB GPU pages),
    /// attaches every controller ([`attach::attach`]) and writes the device-side tables.
    pub fn new(gpu: &Arc<Gpu>, links: Vec<ControllerLink>, cfg: &IoConfig) -> Result<Self> {
        let n = links.len();
        let mmio = links.iter().any(|l| l.mmio);
        Self::build(gpu, cfg, n, mmio, None, |regions| {
            attach::attach(links, regions, cfg)
        })
    }

    /// The I/O layer of one more GPU over controllers that are already up and may serve
    /// other GPUs ([`SharedControllers`]): its own queue pairs (fresh queue ids), queue
    /// memory and buffers in this GPU's memory, mapped for every controller.
    /// `windows[c]` is where this GPU's threads see controller `c`'s doorbells.
    pub fn on_shared(
        gpu: &Arc<Gpu>,
        shared: &SharedControllers,
        windows: &[DoorbellWindow],
        cfg: &IoConfig,
    ) -> Result<Self> {
        let ctrls = shared.controllers();
        let mmio = windows.iter().any(|w| w.mmio);
        let mut io = Self::build(gpu, cfg, ctrls.len(), mmio, Some(shared.claims()), |r| {
            attach::attach_queues(ctrls, windows, r, cfg, true)
        })?;
        io.sharers = shared.gpus();
        Ok(io)
    }

    fn build(
        gpu: &Arc<Gpu>,
        cfg: &IoConfig,
        n: usize,
        mmio: bool,
        claims: Option<Arc<WriteClaims>>,
        attach: impl FnOnce(Regions) -> Result<Attached>,
    ) -> Result<Self> {
        cfg.validate()?;
        gpu.bind()?;
        let sizes = Sizes::of(cfg);
        let qmem = AlignedBuffer::zeroed(
            gpu,
            (sizes.queue_stride as usize).saturating_mul(n.max(1)),
            GPU_PAGE as usize,
        )?;
        let buf_len = (sizes.buf_len as usize).next_multiple_of(GPU_PAGE as usize);
        let buf = AlignedBuffer::zeroed(gpu, buf_len, GPU_PAGE as usize)?;
        if mmio {
            // A device across PCIe reads and writes these: GPUDirect RDMA's rule.
            qmem.set_sync_memops()?;
            buf.set_sync_memops()?;
        }
        let regions = Regions {
            queues: qmem.ptr(),
            queue_stride: sizes.queue_stride,
            buf: buf.ptr(),
        };
        let a = attach(regions)?;
        let nqp = a.qps.len();
        let mut t = TableLayout::new();
        let off_qp = t.of::<QpView>(nqp, 256);
        let off_ssd = t.of::<SsdView>(a.ssds.len(), 256);
        let off_iova = t.of::<u64>(a.iova_table.as_ref().map_or(0, |t| t.len()), 256);
        let total = t.bytes();
        let written = (|| -> Result<DeviceBuffer> {
            let tables = DeviceBuffer::zeroed(gpu, total)?;
            tables.write(off_qp, &a.qps)?;
            tables.write(off_ssd, &a.ssds)?;
            if let Some(t) = &a.iova_table {
                tables.write(off_iova, t)?;
            }
            if !a.prp_lists.is_empty() {
                buf.write(sizes.prp_off as usize, &a.prp_lists)?;
            }
            Ok(tables)
        })();
        let written = written.and_then(|t| Ok((t, ErrorLog::new(gpu, ERROR_LOG_CAPACITY)?)));
        let (tables, log) = match written {
            Ok(t) => t,
            Err(e) => {
                a.release();
                return Err(e);
            }
        };
        let mut bufv = a.buf;
        if a.iova_table.is_some() {
            bufv.iova_table = tables.ptr() + off_iova as u64;
        }
        let io_view = IoView {
            qps: tables.ptr() + off_qp as u64,
            ssds: tables.ptr() + off_ssd as u64,
            errlog: log.ptr(),
            timeout_ns: timeout_ns(cfg.timeout),
            nssd: n as u32,
            nqp: nqp as u32,
            stripe_lbas: (cfg.slot_bytes / a.lba_size as u64).max(1) as u32,
            // SSD s owns queue pairs s * queues .. (attach builds them SSD by SSD).
            flags: cfg.queues << BAM_IO_QPS_PER_SSD_SHIFT,
            buf: bufv,
        };
        let geometry = Geometry {
            ssds: n as u32,
            queues: cfg.queues,
            depth: cfg.depth,
            lba_size: a.lba_size,
            ns_blocks: a.ns_blocks,
            slot_bytes: cfg.slot_bytes,
            nslots: cfg.nslots,
            timeout: cfg.timeout,
            reserved_sms: 0,
        };
        Ok(IoArray {
            attached: Some(a),
            gpu: gpu.clone(),
            qmem,
            buf,
            tables,
            io_view,
            geometry,
            layout: sizes.layout,
            log,
            leases: Mutex::new(Vec::new()),
            claims,
            sharers: 1,
            owner: NEXT_OWNER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            fill_queues: std::sync::atomic::AtomicU32::new(0),
            held: Mutex::new(Vec::new()),
            service: Mutex::new(None),
            recovering: Mutex::new(()),
            caches: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// The device-side view that I/O kernels take as a parameter (`bam_io_view`).
    ///
    /// While a cache holds fill queues ([`IoArray::reserve_fill_queues`]) the view says
    /// how many queue pairs of each SSD stay shared, so that kernels launched with it
    /// leave the fill queues alone.
    pub fn io_view(&self) -> IoView {
        let mut v = self.io_view;
        let k = v.flags >> BAM_IO_QPS_PER_SSD_SHIFT;
        let r = self.fill_queues.load(std::sync::atomic::Ordering::Acquire);
        if r != 0 && r < k {
            v.flags = (v.flags & !BAM_IO_SHARED_QPS_MASK) | (k - r);
        }
        v
    }

    /// Reserves the last `count` queue pairs of every SSD for a cache's fill service (one
    /// per service block: a queue pair that only that block uses, coordinated in its
    /// shared memory; docs/cache.md, "Fill queues"). `None` when the queue pairs are not
    /// laid out uniformly, when fewer than `count + 1` per SSD exist (one stays shared),
    /// or when another cache holds fill queues already. Views taken before
    /// ([`IoArray::io_view`]) still spread over every queue pair: I/O kernels launched
    /// with them must have finished.
    pub fn reserve_fill_queues(&self, count: u32) -> Option<FillQueueLease<'_>> {
        let k = self.io_view.flags >> BAM_IO_QPS_PER_SSD_SHIFT;
        if count == 0 || k <= count || k > BAM_IO_SHARED_QPS_MASK {
            return None;
        }
        self.fill_queues
            .compare_exchange(
                0,
                count,
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Relaxed,
            )
            .ok()?;
        Some(FillQueueLease {
            io: self,
            first: k - count,
            count,
        })
    }

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The registry through which caches of GPUs sharing these controllers claim LBA
    /// ranges (None when this GPU has the controllers to itself): see [`shared`].
    pub fn write_claims(&self) -> Option<&Arc<WriteClaims>> {
        self.claims.as_ref()
    }

    /// GPUs the controllers were brought up for (1 when this GPU has them to itself).
    pub fn sharers(&self) -> u32 {
        self.sharers
    }

    /// Claims LBAs `lbas` of SSDs `ssds` for an array of this GPU's cache, under the
    /// sharing rule ([`shared`]); `None` when no other GPU shares the controllers.
    pub fn claim_lbas(
        &self,
        ssds: std::ops::Range<u32>,
        lbas: std::ops::Range<u64>,
        access: Access,
    ) -> Result<Option<LbaClaim>> {
        self.claims
            .as_ref()
            .map(|c| c.claim(self.owner, ssds, lbas, access))
            .transpose()
    }

    /// SSDs, queues, block size, buffer slots, timeout.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub(crate) fn set_reserved_sms(&mut self, sms: u32) {
        self.geometry.reserved_sms = sms;
    }

    /// The controllers (host side: admin commands, identify data).
    pub fn controllers(&self) -> &[Controller] {
        self.attached.as_ref().map_or(&[], |a| &a.controllers)
    }

    /// The queue pairs as the device library sees them, SSD by SSD.
    pub fn queue_pairs(&self) -> &[QpView] {
        self.attached.as_ref().map_or(&[], |a| &a.qps)
    }

    /// The SSDs as the device library sees them.
    pub fn ssd_views(&self) -> &[SsdView] {
        self.attached.as_ref().map_or(&[], |a| &a.ssds)
    }

    /// Device address of queue pair `qp`'s backend scratch memory
    /// ([`IoConfig::queue_scratch_bytes`]).
    pub fn queue_scratch(&self, qp: usize) -> u64 {
        self.queue_pairs()[qp].sq - self.layout.sq as u64 + self.layout.scratch as u64
    }

    /// Contiguous (bus address, length, device address) runs of the memory the
    /// controllers were given, for a controller that translates addresses itself.
    pub fn dma_regions(&self) -> &[DmaRegion] {
        self.attached.as_ref().map_or(&[], |a| &a.regions)
    }

    /// Takes `count` free buffer slots: the range starting at `first` when given, else
    /// the lowest free range. Fails with an error naming the slots in use otherwise.
    pub fn lease_slots(&self, count: u32, first: Option<u32>) -> Result<SlotLease<'_>> {
        let total = self.io_view.buf.nslots;
        let mut v = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        let free = |a: u32| {
            a.checked_add(count).is_some_and(|e| e <= total)
                && v.iter().all(|&(f, n)| a + count <= f || f + n <= a)
        };
        let start = match first {
            Some(a) => Some(a).filter(|&a| free(a)),
            None => std::iter::once(0)
                .chain(v.iter().map(|&(f, n)| f + n))
                .filter(|&a| free(a))
                .min(),
        };
        let Some(first) = start.filter(|_| count > 0) else {
            let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).clone();
            return Err(crate::error::Error::InvalidArgument(format!(
                "no {count} free I/O buffer slots{} among {total} (in use: {:?}); give the I/O \
                 layer more slots (nslots) or drop the cache or scan that holds them{}",
                first.map(|a| format!(" at slot {a}")).unwrap_or_default(),
                *v,
                if held.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {held:?} are held because a queue pair failed while they were in use \
                         (a late DMA may still land in them): IoArray::recover releases them"
                    )
                }
            )));
        };
        v.push((first, count));
        Ok(SlotLease {
            io: self,
            first,
            count,
        })
    }

    /// Copies `data` into the I/O buffer region at byte `off` (staging for writes).
    pub(crate) fn write_buffer(&self, off: usize, data: &[u8]) -> Result<()> {
        self.buf.write(off, data)
    }

    /// The I/O buffer region (slots, then PRP lists): device address and length.
    pub fn buffer(&self) -> (u64, usize) {
        (self.buf.ptr(), self.buf.len())
    }

    /// Turns the errors that kernels launched with [`IoArray::io_view`] logged since the
    /// last call into a typed error ([`crate::error::Error::Io`]); `Ok` when there were none.
    /// Caches and scans keep their own logs (`cache::Cache::check_errors`,
    /// [`crate::scan::Scan::check_errors`]).
    pub fn check_errors(&self) -> Result<()> {
        let (count, errors) = self.take_errors()?;
        if count > 0 {
            return Err(crate::error::Error::Io { count, errors });
        }
        Ok(())
    }

    /// Takes the errors logged since the last call by kernels launched with
    /// [`IoArray::io_view`]: how many there were and the entries the log still held.
    /// Errors logged while it reads stay for the next call.
    pub fn take_errors(&self) -> Result<(u32, Vec<IoError>)> {
        self.log.drain()
    }

    /// A new error log for an owner of its own (a cache, a scan, a job): kernels launched
    /// with [`ErrorLog::view_of`] of this I/O layer's view log there.
    pub fn new_error_log(&self) -> Result<ErrorLog> {
        ErrorLog::new(&self.gpu, ERROR_LOG_CAPACITY)
    }

    /// Never frees the GPU memory: for a backend whose controller kernel could not be
    /// stopped and may still touch the queues and buffers.
    pub fn leak_memory(&mut self) {
        self.qmem.leak();
        self.buf.leak();
        self.tables.leak();
        self.log.leak();
    }

    /// Queue pair `qp`'s shared-protocol state (`bam_qp_state`), read from GPU memory.
    pub(crate) fn qp_state(&self, qp: usize) -> Result<QpState> {
        let q = &self.queue_pairs()[qp];
        let mut st = [QpState::default()];
        self.qmem
            .read((q.state - self.qmem.ptr()) as usize, &mut st)?;
        Ok(st[0])
    }

    /// Per-queue doorbell statistics summed: (SQ doorbells, CQ doorbells, completions).
    pub fn doorbell_stats(&self) -> Result<(u64, u64, u64)> {
        let (mut sq, mut cq, mut c) = (0, 0, 0);
        for i in 0..self.queue_pairs().len() {
            let st = self.qp_state(i)?;
            sq += st.sq_doorbells;
            cq += st.cq_doorbells;
            c += st.completions;
        }
        Ok((sq, cq, c))
    }
}

impl Drop for IoArray {
    fn drop(&mut self) {
        // Controllers shut down (no more DMA) and mappings undone before the memory they
        // point at is freed (the fields, after this).
        if let Some(a) = self.attached.take() {
            if !a.release() {
                // A shared controller may still write into the queues and buffers.
                self.leak_memory();
            }
        }
    }
}
