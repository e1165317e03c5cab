//! The file backend: GPU threads' NVMe commands served from files and block devices
//! through io_uring, on any Linux GPU machine (no dedicated SSD, no kernel module).
//!
//! The GPU side is the same as on every backend: threads build commands into queues in
//! GPU memory and ring doorbells there; the cache, arrays and scans do not know the
//! difference. Three parts serve those queues:
//!
//! - the **forwarder** (`crates/bam/cuda/src/file.cu`), a persistent kernel on SMs it
//!   keeps (`sms`: at least 4 by default): it fetches and validates commands, hands each to the
//!   CPU as a request, and at completion copies a read's data from pinned host staging
//!   into the command's buffer with whole warps, then posts the NVMe completion;
//! - the **rings** ([`rings`]): per queue pair, requests, completions and staging slots
//!   in pinned host memory, mapped for the GPU;
//! - the **service** ([`service`]): CPU threads (`workers`), each with its own io_uring,
//!   executing requests on the files (`O_DIRECT` or the page cache) and posting
//!   completions.
//!
//! Each path is one "SSD" of the array; several are striped like several SSDs. A user's
//! existing file is the data: one path, read-only by default, and an `Array<T>` over its
//! bytes reads them in place; the namespace ends on a whole buffer slot (a line), and
//! bytes past the end of the file read as zeros (written there, they grow the file).
//! Block size: 512 B through the page cache, the device's
//! `O_DIRECT` alignment with `direct`. `Cache::flush` ends with a Flush command, which
//! the service turns into `fdatasync` (docs/robustness.md).
//!
//! ```no_run
//! # fn main() -> bam::Result<()> {
//! use bam::cache::{io_config, Cache, CacheConfig, Layout};
//! use bam::storage::{GpuDevice, Storage};
//! let gpu = bam::Gpu::new(0)?;
//! // A file of u64 edges, read in place: element i is bytes 8 i .. 8 i + 8 of the file.
//! let device: GpuDevice = "file:/data/edges.bin".parse()?;
//! let cfg = CacheConfig::new(4096, 65536);
//! let storage = device.open(&gpu, &io_config(&cfg))?;
//! let n = std::fs::metadata("/data/edges.bin")?.len() / 8;
//! let cache = Cache::new(storage.io(), cfg)?;
//! let edges = cache.array::<u64>(n, 0, Layout::Stripe)?; // edges.view() for your kernel
//! # let _ = edges;
//! # Ok(()) }
//! ```

pub mod abi;
mod config;
mod forwarder;
pub mod media;
mod recovery;
pub mod rings;
pub mod service;

pub use config::{FileConfig, FileMode};
pub(crate) use config::{DEFAULT_SMS, DEFAULT_STAGING, DEFAULT_WORKERS};

use crate::cuda::layout::TableLayout;
use crate::cuda::{DeviceBuffer, Gpu, PinnedBuffer};
use crate::error::{Error, Result};
use crate::io::{attach_gpus, DoorbellWindow, IoArray, IoConfig};
use crate::storage::{Backend, GpuDevice, SsdCounters, Storage};
use abi::*;
use bam_nvme::model::{ModelConfig, ModelTransport};
use bam_nvme::Transport;
use forwarder::{Forwarder, QUEUES_PER_BLOCK};
use rings::{QueueRings, RingLayout};
use service::{Files, Service, ServiceControl, ServiceError};
use std::sync::{Arc, Mutex};

/// Files and block devices serving the GPU's NVMe queues: see the module docs.
pub struct FileArray {
    /// One I/O layer per GPU, on the same controllers (`io::shared`: the multi-GPU rule).
    ios: Vec<IoArray>,
    /// What each GPU runs and holds, in the order of `ios`.
    sides: Vec<GpuSide>,
    service: Service,
    files: Arc<Files>,
    /// Keeps the pinned ring memory alive (the forwarders read it): every GPU's queue
    /// pairs, GPU by GPU.
    rings: Vec<QueueRings>,
    cfg: FileConfig,
    lba: u32,
}

/// One GPU's part of a file-backed array: its forwarder and the memory it reads.
struct GpuSide {
    /// Shared with the I/O layer's queue recovery.
    forwarder: Arc<Mutex<Forwarder>>,
    /// The forwarder's tables: queues, slot records and free lists, SSDs, control.
    tables: DeviceBuffer,
    queues_off: usize,
    /// Queue pairs of this GPU.
    nqueues: usize,
    /// The "BARs": one page of doorbells per file in this GPU's memory.
    bars: DeviceBuffer,
}

/// Forwarder SMs when the configuration leaves it open: with 4, a warp copies for at most
/// two of the benchmark's 64 queue pairs; fewer held its 1 MiB reads back, more gained
/// nothing (docs/performance.md, "File backend").
const MIN_SMS: u32 = 4;

/// Queue pair state beside each ring: slot records, then the free list.
fn slot_table_bytes(nslots: u32) -> usize {
    crate::cuda::layout::round_up(nslots as usize * (std::mem::size_of::<FileSlot>() + 2), 256)
}

impl FileArray {
    /// Opens the files, brings their controllers up, attaches them to `gpu`'s I/O layer,
    /// starts the forwarder and the service threads.
    pub fn new(gpu: &Arc<Gpu>, cfg: FileConfig) -> Result<Self> {
        Self::on_gpus(std::slice::from_ref(gpu), cfg)
    }

    /// The same files serving every GPU of `gpus`: each GPU gets its own queue pairs
    /// (`cfg.io` per GPU), staging (`cfg.staging_bytes` per GPU), forwarder (`cfg.sms`
    /// SMs of each GPU) and service threads (`cfg.workers` per GPU, one set serving
    /// every GPU's queues). Other GPUs' writes
    /// follow the multi-GPU rule of `io::shared`, as on every backend.
    pub fn on_gpus(gpus: &[Arc<Gpu>], cfg: FileConfig) -> Result<Self> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        if gpus.is_empty() {
            return bad("a file-backed array needs a GPU".into());
        }
        if cfg.workers == 0 {
            return bad("a file-backed array needs at least one worker".into());
        }
        cfg.io.validate()?;
        let nssd = cfg.paths.len();
        if nssd > 1024 {
            return bad(format!("{nssd} files: at most 1024"));
        }
        let nqp = nssd * cfg.io.queues as usize;
        let sms = match cfg.sms {
            0 => (nqp.div_ceil(QUEUES_PER_BLOCK as usize) as u32).max(MIN_SMS),
            n => n,
        };
        if let Some(gpu) = gpus.iter().find(|g| sms >= g.sms) {
            return bad(format!(
                "{nqp} queue pairs need {sms} forwarder SMs; {} has {}",
                gpu.name, gpu.sms
            ));
        }
        if nqp > (sms * QUEUES_PER_BLOCK) as usize {
            return bad(format!(
                "{nqp} queue pairs need sms={} at least (each forwarder SM serves {QUEUES_PER_BLOCK})",
                nqp.div_ceil(QUEUES_PER_BLOCK as usize)
            ));
        }
        if cfg.fault.is_some_and(|f| f.lie.is_some()) {
            return bad("lying completions are the simulated array's alone (sim:)".into());
        }
        let files = Files::open(&cfg)?;
        let lba = files.lba;
        if lba as u64 > cfg.io.slot_bytes {
            return bad(format!(
                "the files need {lba}-byte blocks for O_DIRECT, and buffer slots of {} B \
                 cannot hold one (use `buffered`, or larger lines)",
                cfg.io.slot_bytes
            ));
        }
        let staging_slot = cfg.io.slot_bytes.max(8192);
        if cfg.fill_pattern {
            fill_pattern(&files.media, &files.ns_bytes)?;
        }
        let files = Arc::new(files);
        // Controllers: models for the admin commands only (the forwarder serves the
        // I/O queues), one per file, with its namespace.
        let mdts = (staging_slot / 4096).trailing_zeros() as u8;
        let transports = files
            .ns_bytes
            .iter()
            .enumerate()
            .map(|(s, &bytes)| {
                let mut mc = ModelConfig::ram(bytes);
                mc.lba_size = lba;
                mc.max_queue_entries = 32768;
                mc.max_io_queues = cfg
                    .io
                    .queues
                    .saturating_mul(gpus.len() as u32)
                    .min(u16::MAX as u32) as u16;
                mc.mdts = mdts;
                mc.external_io_queues = true;
                mc.serial = format!("BAMFILE{s:05}");
                mc.model_number = "bam file backend".into();
                Ok(Arc::new(ModelTransport::new(mc.build()?)) as Arc<dyn Transport>)
            })
            .collect::<Result<Vec<_>>>()?;
        let each = crate::cuda::layout::round_up(0x1000 + 8 * (cfg.io.queues as usize + 1), 4096);
        let bars = gpus
            .iter()
            .map(|gpu| {
                gpu.bind()?;
                DeviceBuffer::zeroed(gpu, each * nssd)
            })
            .collect::<Result<Vec<_>>>()?;
        let window = |g: usize, s: usize| DoorbellWindow {
            addr: bars[g].ptr() + (s * each) as u64,
            len: each,
            mmio: false,
        };
        let io_cfg = IoConfig {
            queue_scratch_bytes: 0,
            ..cfg.io.clone()
        };
        let mut ios = attach_gpus(gpus, &transports, window, |_| &io_cfg)?;
        // Staging: a power of two of slots per queue pair, at most its depth.
        let per_queue = (cfg.staging_bytes / (nqp as u64 * staging_slot)).clamp(1, 65536);
        let nslots = (1u64 << (63 - per_queue.leading_zeros())).min(cfg.io.depth as u64) as u32;
        let layout = RingLayout::new(nslots, staging_slot as u32)?;
        let mut sides = Vec::with_capacity(gpus.len());
        let mut all_rings = Vec::new();
        for ((gpu, io), bars) in gpus.iter().zip(&mut ios).zip(bars) {
            io.set_reserved_sms(sms);
            let (side, rings) = gpu_side(gpu, io, layout, sms, bars)?;
            sides.push(side);
            all_rings.extend(rings);
        }
        // Service threads per GPU, as staging and SMs are: one GPU's share of threads
        // serving several GPUs' queues held them all back (docs/multi-gpu.md).
        let threads = cfg.workers.saturating_mul(gpus.len() as u32);
        let service = Service::start(files.clone(), all_rings.clone(), threads)?;
        let arr = FileArray {
            ios,
            sides,
            service,
            files,
            rings: all_rings,
            cfg,
            lba,
        };
        // Started last: a failure drops `arr`, whose Drop stops the ones that started.
        for side in &arr.sides {
            side.forwarder
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .start()?;
        }
        tracing::info!(
            "file backend: {nssd} file(s), {lba}-byte blocks, {} GPU(s) with {nqp} queue pairs \
             each, {nslots} staging slots of {staging_slot} B per queue pair, {} workers and \
             {sms} SMs per GPU",
            gpus.len(),
            arr.cfg.workers
        );
        Ok(arr)
    }

    /// The configuration.
    pub fn config(&self) -> &FileConfig {
        &self.cfg
    }

    /// The block size of every file's namespace.
    pub fn lba_size(&self) -> u32 {
        self.lba
    }

    /// The service threads' counters and failures.
    pub fn service(&self) -> &Arc<ServiceControl> {
        self.service.control()
    }

    /// The errors the service saw (file, offset, errno, the status it completed with).
    pub fn errors(&self) -> Vec<ServiceError> {
        self.service.control().errors()
    }

    /// An error when a service thread has died.
    pub fn health(&self) -> Result<()> {
        self.service.health()
    }

    /// The forwarders' queue tables as they are now, GPU by GPU.
    fn queue_table(&self) -> Result<Vec<FileQueue>> {
        let mut all = Vec::with_capacity(self.rings.len());
        for side in &self.sides {
            let mut q = vec![FileQueue::default(); side.nqueues];
            side.tables.read(side.queues_off, &mut q)?;
            all.extend(q);
        }
        Ok(all)
    }
}

/// One GPU's rings, forwarder tables and forwarder (not started), its queue recovery
/// handed to `io`.
fn gpu_side(
    gpu: &Arc<Gpu>,
    io: &mut IoArray,
    layout: RingLayout,
    sms: u32,
    bars: DeviceBuffer,
) -> Result<(GpuSide, Vec<QueueRings>)> {
    let rings = (0..io.queue_pairs().len())
        .map(|_| {
            let mem = Arc::new(PinnedBuffer::new(gpu, layout.bytes)?);
            let base = mem.host_ptr();
            // SAFETY: pinned memory is page aligned, layout.bytes long and lives as long
            // as the view's owner (`mem`).
            Ok(unsafe { QueueRings::new(mem.clone(), base, layout) }).map(|r| (r, mem))
        })
        .collect::<Result<Vec<_>>>()?;
    let built = build_tables(gpu, io, &rings, layout)?;
    let rings: Vec<QueueRings> = rings.into_iter().map(|(r, _)| r).collect();
    let forwarder = Arc::new(Mutex::new(Forwarder::new(gpu, built.view, sms)?));
    let queue_size = std::mem::size_of::<FileQueue>() as u64;
    io.set_queue_service(Arc::new(recovery::FileQueueService {
        gpu: gpu.clone(),
        forwarder: forwarder.clone(),
        queues: built
            .queues
            .iter()
            .zip(&rings)
            .enumerate()
            .map(|(i, (q, r))| recovery::QueueState {
                entry: built.view.queues + i as u64 * queue_size,
                built: *q,
                rings: r.clone(),
            })
            .collect(),
    }));
    let side = GpuSide {
        forwarder,
        tables: built.mem,
        queues_off: built.queues_off,
        nqueues: rings.len(),
        bars,
    };
    Ok((side, rings))
}

/// The forwarder's tables in GPU memory and its view of them.
struct Tables {
    mem: DeviceBuffer,
    view: FileView,
    queues_off: usize,
    /// The queue entries as written.
    queues: Vec<FileQueue>,
}

fn build_tables(
    gpu: &Arc<Gpu>,
    io: &IoArray,
    rings: &[(QueueRings, Arc<PinnedBuffer>)],
    layout: RingLayout,
) -> Result<Tables> {
    let qps = io.queue_pairs();
    let mut t = TableLayout::new();
    let queues_off = t.of::<FileQueue>(qps.len(), 256);
    let slots_off = t.array(slot_table_bytes(layout.nslots), qps.len(), 256);
    let ssds_off = t.of::<FileSsd>(io.ssd_views().len(), 256);
    let control_off = t.of::<FileControl>(1, 256);
    let mem = DeviceBuffer::zeroed(gpu, t.bytes())?;
    let free: Vec<u16> = (0..layout.nslots).map(|i| i as u16).collect();
    let mut queues = Vec::with_capacity(qps.len());
    for (i, (q, (_, pinned))) in qps.iter().zip(rings).enumerate() {
        let host = pinned.dev_ptr();
        let slots = mem.ptr() + (slots_off + i * slot_table_bytes(layout.nslots)) as u64;
        let free_off = slots_off
            + i * slot_table_bytes(layout.nslots)
            + layout.nslots as usize * std::mem::size_of::<FileSlot>();
        mem.write(free_off, &free)?;
        queues.push(FileQueue {
            sq: q.sq,
            cq: q.cq,
            sq_db: q.sq_db,
            cq_db: q.cq_db,
            ring: host,
            reqs: host + layout.reqs as u64,
            cpls: host + layout.cpls as u64,
            staging: host + layout.staging as u64,
            slots,
            depth: q.depth,
            qid: q.qid,
            ssd: q.ssd,
            nslots: layout.nslots,
            slot_bytes: layout.slot_bytes,
            free_top: layout.nslots,
            ..Default::default()
        });
    }
    let ssds: Vec<FileSsd> = io
        .ssd_views()
        .iter()
        .map(|v| FileSsd {
            nlb: v.nlb,
            lba_shift: v.lba_shift,
            nsid: v.nsid,
            mdts_bytes: v.mdts_bytes,
            pad: 0,
        })
        .collect();
    mem.write(queues_off, &queues)?;
    mem.write(ssds_off, &ssds)?;
    let (buf, buf_len) = io.buffer();
    Ok(Tables {
        view: FileView {
            queues: mem.ptr() + queues_off as u64,
            ssds: mem.ptr() + ssds_off as u64,
            control: mem.ptr() + control_off as u64,
            buf,
            buf_len: buf_len as u64,
            nqueues: queues.len() as u32,
            nssd: ssds.len() as u32,
        },
        mem,
        queues_off,
        queues,
    })
}

/// Writes the verification pattern (generation 0) over every file's namespace, in
/// 4 MiB pieces shared out to up to 8 threads.
fn fill_pattern(media: &[media::FileMedium], ns_bytes: &[u64]) -> Result<()> {
    const PIECE: u64 = 4 << 20;
    let pieces: Vec<(usize, u64)> = ns_bytes
        .iter()
        .enumerate()
        .flat_map(|(s, &len)| (0..len.div_ceil(PIECE)).map(move |k| (s, k * PIECE)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                sc.spawn(|| -> Result<()> {
                    let mut chunk = vec![0u8; PIECE as usize];
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(s, off)) = pieces.get(i) else {
                            return Ok(());
                        };
                        let n = (ns_bytes[s] - off).min(PIECE) as usize;
                        crate::pattern::fill(&mut chunk[..n], s as u32, off, 0);
                        let m = &media[s];
                        m.write_at(off, &chunk[..n]).map_err(|e| {
                            Error::InvalidArgument(format!("{}: {e}", m.path.display()))
                        })?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| {
                    Err(Error::InvalidArgument(
                        "pattern fill: a thread panicked".into(),
                    ))
                })
            })
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    })
}

impl Storage for FileArray {
    fn ios(&self) -> &[IoArray] {
        &self.ios
    }
    fn device(&self) -> GpuDevice {
        let c = &self.cfg;
        GpuDevice::File {
            paths: c.paths.clone(),
            mode: c.mode,
            writable: c.writable,
            size: c.size,
            workers: c.workers,
            sms: c.sms,
            staging: c.staging_bytes,
            fill_pattern: c.fill_pattern,
        }
    }
    fn counters(&self) -> Result<Vec<SsdCounters>> {
        let mut out = vec![SsdCounters::default(); self.files.media.len()];
        for q in self.queue_table()? {
            let c = &mut out[q.ssd as usize];
            c.reads += q.reads;
            c.writes += q.writes;
            c.others += q.others;
            c.read_bytes += q.read_bytes;
            c.write_bytes += q.write_bytes;
            c.errors += q.errors;
            c.bad_doorbells += q.bad_doorbells;
        }
        Ok(out)
    }
    fn set_stall(&self, stall: bool) -> Result<()> {
        self.service.set_stall(stall);
        Ok(())
    }
    fn read_medium(&self, ssd: usize, off: u64, out: &mut [u8]) -> Result<()> {
        let m = self
            .files
            .media
            .get(ssd)
            .ok_or_else(|| Error::InvalidArgument(format!("no file {ssd}")))?;
        m.read_at(off, out)
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", m.path.display())))
    }
    fn backend(&self) -> Backend<'_> {
        Backend::File(self)
    }
}

impl Drop for FileArray {
    fn drop(&mut self) {
        // The forwarders first: nothing may touch the rings, queues or buffers after.
        let mut running = false;
        for side in &self.sides {
            let mut f = side.forwarder.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = f.stop() {
                tracing::error!("file backend: a forwarder did not stop: {e}");
            }
            running |= f.running();
        }
        if running {
            // One may still touch our memory: leak it rather than free it under it.
            for io in &mut self.ios {
                io.leak_memory();
            }
            for side in &mut self.sides {
                side.tables.leak();
                side.bars.leak();
            }
            std::mem::forget(std::mem::take(&mut self.rings));
        }
        self.service.stop();
    }
}
