//! The host-side controller backend: the strict controller model (`bam_nvme::model`)
//! running on CPU threads, serving I/O queues that live in GPU memory, across PCIe.
//!
//! It is the closest stand-in for a real SSD that runs without one: everything the real
//! backend does except the P2P mapping itself, with a real asynchronous device on the far
//! side of the link.
//!
//! - **Doorbells**: a pinned host page per controller, mapped into the GPU; GPU threads
//!   store to it as they would to a BAR (`BAM_QP_F_MMIO`: system-scope fences), and
//!   worker threads poll it and forward every new value to the model's doorbell register.
//! - **DMA**: the model reads SQEs and write data and writes read data and CQEs in GPU
//!   memory through CUDA copies ([`CudaDma`], its DMA engine), with the same validation
//!   as for host memory (PRPs inside registered memory, LBA range, CID reuse, ...).
//! - **Media**: RAM or a file, per controller.
//!
//! It is slow (every command costs a few CUDA copies, tens of microseconds) and meant for
//! verification and for trying the library where GPU-to-SSD P2P is not available.

use crate::cuda::{Gpu, PinnedBuffer};
use crate::error::{Error, Result};
use crate::io::{attach_gpus, DoorbellWindow, IoArray, IoConfig};
use crate::storage::idle::IdleWait;
use crate::storage::{Backend, Fault, GpuDevice, SsdCounters, Storage};
use bam_nvme::model::{ControllerModel, ExternalMemory, Faults, ModelConfig, ModelTransport};
use bam_nvme::Transport;
use cudarc::driver::{result, CudaStream};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Where the modelled controllers keep their data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum HostMedia {
    /// RAM (lost when the array is dropped).
    Ram,
    /// A model image per controller (`PATH.N` when there are several): a 4 KiB header,
    /// then the blocks (`bam_nvme::model::FileMedium`), locked while the array lives.
    /// Created at the configured capacity and block size if missing; an existing image
    /// keeps its capacity and must have the configured block size. A raw file is refused.
    File(PathBuf),
}

/// Configuration of a host-controller array.
#[derive(Clone, Debug, Serialize)]
pub struct HostCtlConfig {
    /// Controllers.
    pub ssds: u32,
    /// Capacity of each controller's namespace in bytes.
    pub capacity_bytes: u64,
    /// Logical block size.
    pub lba_size: u32,
    /// MDTS as a power of two of 4 KiB pages (0: no limit).
    pub mdts: u8,
    /// Medium.
    pub media: HostMedia,
    /// The GPU I/O layer: queues per controller, depth, buffer slots, timeout.
    pub io: IoConfig,
    /// CPU threads serving the queues (each polls a share of the doorbells).
    pub workers: u32,
    /// Reads and writes of these LBAs fail (Unrecovered Read Error / Write Fault).
    pub fault: Option<Fault>,
    /// Fill the media with the verification pattern (generation 0) when the array is
    /// built (off by default).
    pub fill_pattern: bool,
}

impl HostCtlConfig {
    /// One controller of 256 MiB in RAM, 512 B blocks, 4 queues of 256 entries, 4 workers.
    pub fn new() -> Self {
        HostCtlConfig {
            ssds: 1,
            capacity_bytes: 256 << 20,
            lba_size: 512,
            mdts: 5,
            media: HostMedia::Ram,
            io: IoConfig {
                queues: 4,
                depth: 256,
                ..IoConfig::new()
            },
            workers: 4,
            fault: None,
            fill_pattern: false,
        }
    }
}

impl Default for HostCtlConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// The model's DMA engine into GPU memory: synchronous CUDA copies on non-blocking
/// streams (never the legacy stream, which would wait for the user's kernels, which in
/// turn wait for these completions). With several GPUs sharing the controllers, each
/// copy runs in the context of the GPU that owns the address.
pub struct CudaDma {
    gpus: Vec<Arc<Gpu>>,
    streams: Vec<Mutex<Vec<Arc<CudaStream>>>>,
    /// Allocations seen so far: (start, end, index in `gpus`).
    owners: Mutex<Vec<(u64, u64, usize)>>,
}

impl CudaDma {
    /// A DMA engine into the memory of `gpus` (at least one).
    pub fn new(gpus: &[Arc<Gpu>]) -> Arc<Self> {
        Arc::new(CudaDma {
            gpus: gpus.to_vec(),
            streams: gpus.iter().map(|_| Mutex::new(Vec::new())).collect(),
            owners: Mutex::new(Vec::new()),
        })
    }

    /// Index in `gpus` of the GPU whose memory `addr` is.
    fn owner(&self, addr: u64) -> std::result::Result<usize, String> {
        if self.gpus.len() == 1 {
            return Ok(0);
        }
        let mut known = self.owners.lock().map_err(|e| e.to_string())?;
        if let Some(&(_, _, g)) = known.iter().find(|&&(s, e, _)| (s..e).contains(&addr)) {
            return Ok(g);
        }
        // The pointer query wants a current context (any: addresses are unified).
        self.gpus[0].bind().map_err(|e| e.to_string())?;
        let (ordinal, start, len) = crate::cuda::owner_of(addr).map_err(|e| e.to_string())?;
        let g = self
            .gpus
            .iter()
            .position(|g| g.ordinal() == ordinal)
            .ok_or_else(|| {
                format!("{addr:#x} is memory of GPU {ordinal}, not one this array serves")
            })?;
        known.push((start, start + len, g));
        Ok(g)
    }

    /// Runs `f` with a stream of the owning GPU's pool (its context made current on
    /// this thread first), then waits for the stream: when this returns the copy is
    /// complete and visible.
    fn with_stream(
        &self,
        addr: u64,
        f: impl FnOnce(&CudaStream) -> std::result::Result<(), cudarc::driver::DriverError>,
    ) -> std::result::Result<(), String> {
        let g = self.owner(addr)?;
        let gpu = &self.gpus[g];
        gpu.bind().map_err(|e| e.to_string())?;
        let popped = self.streams[g].lock().map_err(|e| e.to_string())?.pop();
        let stream = match popped {
            Some(s) => s,
            None => gpu.stream().map_err(|e| e.to_string())?,
        };
        let r = f(&stream).and_then(|()| stream.synchronize());
        if let Ok(mut pool) = self.streams[g].lock() {
            pool.push(stream);
        }
        r.map_err(|e| e.to_string())
    }
}

impl ExternalMemory for CudaDma {
    fn read(&self, addr: u64, out: &mut [u8]) -> std::result::Result<(), String> {
        // SAFETY: `addr` lies in a region registered with the model, which is GPU memory
        // of one of these contexts that lives until the region is unregistered (IoArray
        // drops the mappings before the memory); `out` outlives the synchronisation in
        // with_stream.
        self.with_stream(addr, |s| unsafe {
            result::memcpy_dtoh_async(out, addr, s.cu_stream())
        })
    }
    fn write(&self, addr: u64, data: &[u8]) -> std::result::Result<(), String> {
        // SAFETY: as in `read`; `data` outlives the synchronisation.
        self.with_stream(addr, |s| unsafe {
            result::memcpy_htod_async(addr, data, s.cu_stream())
        })
    }
}

/// One queue a worker serves: its doorbells in the pinned page and the model's registers.
struct Served {
    model: Arc<ControllerModel>,
    /// The doorbell page of the GPU that owns the queue.
    page: Arc<DoorbellPage>,
    /// Index of the SQ tail doorbell word in the pinned page (u32 units).
    sq_word: usize,
    /// Index of the CQ head doorbell word.
    cq_word: usize,
    /// BAR offsets of the two doorbells.
    sq_reg: usize,
    cq_reg: usize,
    /// The doorbell values forwarded last (SQ tail, CQ head), locked while the worker
    /// forwards and while the queue pair is recovered.
    last: Mutex<(u32, u32)>,
}

/// The workers' side of queue recovery: the queue's doorbells are not forwarded while the
/// controller deletes and creates it again; then the doorbell words and the values
/// forwarded last start from 0, as the new queue does.
struct HostQueueService {
    /// This I/O layer's queues, in the order of its queue pairs.
    queues: Vec<Arc<Served>>,
}

impl crate::io::QueueService for HostQueueService {
    fn recreate(&self, qp: usize, recreate: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let q = self
            .queues
            .get(qp)
            .ok_or_else(|| Error::InvalidArgument(format!("no queue pair {qp}")))?;
        let mut last = q.last.lock().unwrap_or_else(|e| e.into_inner());
        recreate()?;
        q.page.word(q.sq_word).store(0, Ordering::Release);
        q.page.word(q.cq_word).store(0, Ordering::Release);
        *last = (0, 0);
        Ok(())
    }
}

/// Flags the workers poll.
#[derive(Default)]
struct Control {
    stop: AtomicBool,
    stall: AtomicBool,
}

/// A pinned page of doorbells the GPU writes and the workers read, as atomics.
struct DoorbellPage {
    mem: PinnedBuffer,
}

impl DoorbellPage {
    fn word(&self, i: usize) -> &AtomicU32 {
        assert!(
            4 * i + 4 <= self.mem.len(),
            "doorbell word {i} outside the page"
        );
        // SAFETY: in bounds (checked) and 4-byte aligned (the page is page aligned); the
        // pinned memory lives as long as `self`, and is only accessed as atomics here and
        // by GPU stores of whole words.
        unsafe { &*(self.mem.host_ptr().add(4 * i) as *const AtomicU32) }
    }
}

/// Polls the doorbells of `queues` and forwards every new value to the model, which then
/// fetches and executes commands and posts completions (through [`CudaDma`]) in this
/// thread.
fn serve(queues: Vec<Arc<Served>>, ctl: Arc<Control>) {
    let mut wait = IdleWait::default();
    while !ctl.stop.load(Ordering::Acquire) {
        if ctl.stall.load(Ordering::Acquire) {
            IdleWait::stalled();
            continue;
        }
        let mut busy = false;
        for q in &queues {
            let mut seen = q.last.lock().unwrap_or_else(|e| e.into_inner());
            // CQ head first: entries it frees let a full queue go on.
            let cq = q.page.word(q.cq_word).load(Ordering::Acquire);
            if cq != seen.1 {
                seen.1 = cq;
                q.model.write_register(q.cq_reg, cq);
                busy = true;
            }
            let sq = q.page.word(q.sq_word).load(Ordering::Acquire);
            if sq != seen.0 {
                seen.0 = sq;
                q.model.write_register(q.sq_reg, sq);
                busy = true;
            }
        }
        if busy {
            wait.busy();
        } else {
            wait.idle();
        }
    }
}

/// Controller models on CPU threads serving GPU-resident queues: see the module docs.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use bam::storage::hostctl::{HostCtlArray, HostCtlConfig};
/// let gpu = bam::Gpu::new(0)?;
/// let arr = HostCtlArray::new(&gpu, HostCtlConfig::new())?;
/// let io = arr.io(); // to the cache, `Array<T>` or the benchmark, like any backend
/// # let _ = io;
/// # Ok(()) }
/// ```
pub struct HostCtlArray {
    /// One I/O layer per GPU, over the same controllers.
    ios: Vec<IoArray>,
    models: Vec<Arc<ControllerModel>>,
    workers: Vec<JoinHandle<()>>,
    ctl: Arc<Control>,
    _pages: Vec<Arc<DoorbellPage>>,
    cfg: HostCtlConfig,
}

impl HostCtlArray {
    /// Builds the models, attaches them to the GPU I/O layer and starts the workers.
    pub fn new(gpu: &Arc<Gpu>, cfg: HostCtlConfig) -> Result<Self> {
        Self::on_gpus(std::slice::from_ref(gpu), cfg)
    }

    /// The same controllers serving queue pairs of every GPU in `gpus`: each GPU gets
    /// `cfg.io.queues` queue pairs per controller in its own memory, its own doorbell
    /// page and its own I/O layer ([`Storage::ios`], in the order of `gpus`). Bring-up
    /// and admin happen once.
    pub fn on_gpus(gpus: &[Arc<Gpu>], cfg: HostCtlConfig) -> Result<Self> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        if cfg.ssds == 0 || cfg.workers == 0 || gpus.is_empty() {
            return bad(
                "a host-controller array needs at least one SSD, one worker and one GPU".into(),
            );
        }
        let ngpu = gpus.len() as u32;
        let qps = cfg.io.queues.saturating_mul(ngpu);
        if qps > 1024 {
            return bad(format!(
                "{} queues per SSD for each of {ngpu} GPU(s): at most 1024 in all",
                cfg.io.queues
            ));
        }
        cfg.io.validate()?;
        // Doorbells: 0x1000 + 8 bytes per queue pair (admin included), per controller.
        let bar_bytes = (0x1000 + 8 * (qps as usize + 1)).next_multiple_of(4096);
        let pages = gpus
            .iter()
            .map(|g| {
                g.bind()?;
                Ok(Arc::new(DoorbellPage {
                    mem: PinnedBuffer::new(g, bar_bytes * cfg.ssds as usize)?,
                }))
            })
            .collect::<Result<Vec<_>>>()?;
        let dma = CudaDma::new(gpus);
        let mut models = Vec::new();
        let mut transports: Vec<Arc<dyn Transport>> = Vec::new();
        for s in 0..cfg.ssds as usize {
            let mut mc = match &cfg.media {
                HostMedia::Ram => ModelConfig::ram(cfg.capacity_bytes),
                HostMedia::File(p) if cfg.ssds == 1 => ModelConfig::file(p, cfg.capacity_bytes),
                HostMedia::File(p) => ModelConfig::file(
                    PathBuf::from(format!("{}.{s}", p.display())),
                    cfg.capacity_bytes,
                ),
            };
            mc.lba_size = cfg.lba_size;
            mc.max_queue_entries = 32768;
            mc.max_io_queues = qps as u16;
            mc.mdts = cfg.mdts;
            mc.serial = format!("BAMHOST{s:05}");
            mc.model_number = "bam host-side controller model".into();
            mc.faults = Faults {
                media_error_lbas: cfg.fault.map(|f| f.lba..f.lba.saturating_add(f.nlb)),
                ..Faults::default()
            };
            let model = mc.build()?;
            model.dma().set_external_memory(dma.clone());
            transports.push(Arc::new(ModelTransport::new(model.clone())));
            models.push(model);
        }
        let window = |g: usize, s: usize| DoorbellWindow {
            addr: pages[g].mem.dev_ptr() + (s * bar_bytes) as u64,
            len: bar_bytes,
            mmio: true,
        };
        let ios = attach_gpus(gpus, &transports, window, |_| &cfg.io)?;
        if cfg.fill_pattern {
            for (s, m) in models.iter().enumerate() {
                fill_medium(m, s as u32)?;
            }
        }
        // Queue pairs of every GPU dealt round-robin to the workers.
        let all: Vec<(usize, crate::abi::QpView)> = ios
            .iter()
            .enumerate()
            .flat_map(|(g, io)| io.queue_pairs().iter().map(move |q| (g, *q)))
            .collect();
        let nworkers = (cfg.workers as usize).min(all.len());
        let mut shares: Vec<Vec<Arc<Served>>> = (0..nworkers).map(|_| Vec::new()).collect();
        let mut per_io: Vec<Vec<Arc<Served>>> = ios.iter().map(|_| Vec::new()).collect();
        for (i, (g, q)) in all.iter().enumerate() {
            let s = q.ssd as usize;
            let base = window(*g, s).addr;
            let (sq_reg, cq_reg) = ((q.sq_db - base) as usize, (q.cq_db - base) as usize);
            let served = Arc::new(Served {
                model: models[s].clone(),
                page: pages[*g].clone(),
                sq_word: (s * bar_bytes + sq_reg) / 4,
                cq_word: (s * bar_bytes + cq_reg) / 4,
                sq_reg,
                cq_reg,
                last: Mutex::new((0, 0)),
            });
            shares[i % nworkers].push(served.clone());
            per_io[*g].push(served);
        }
        for (io, queues) in ios.iter().zip(per_io) {
            io.set_queue_service(Arc::new(HostQueueService { queues }));
        }
        let ctl = Arc::new(Control::default());
        let mut workers = Vec::new();
        for (w, share) in shares.into_iter().enumerate() {
            let c = ctl.clone();
            let h = std::thread::Builder::new()
                .name(format!("bam-hostctl-{w}"))
                .spawn(move || serve(share, c))?;
            workers.push(h);
        }
        Ok(HostCtlArray {
            ios,
            models,
            workers,
            ctl,
            _pages: pages,
            cfg,
        })
    }

    /// The GPU I/O layer over the modelled controllers (the first GPU's).
    pub fn io(&self) -> &IoArray {
        &self.ios[0]
    }

    /// The configuration.
    pub fn config(&self) -> &HostCtlConfig {
        &self.cfg
    }

    /// The controller models (their statistics, error logs and media).
    pub fn models(&self) -> &[Arc<ControllerModel>] {
        &self.models
    }

    fn stop_workers(&mut self) {
        self.ctl.stop.store(true, Ordering::Release);
        for h in self.workers.drain(..) {
            if h.join().is_err() {
                tracing::error!("a host controller worker panicked");
            }
        }
    }
}

/// Writes the generation-0 pattern over a model's whole medium.
fn fill_medium(m: &ControllerModel, ssd: u32) -> Result<()> {
    let len = m.medium().len();
    let mut chunk = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(chunk.len() as u64) as usize;
        crate::pattern::fill(&mut chunk[..n], ssd, off, 0);
        m.medium().write_at(off, &chunk[..n])?;
        off += n as u64;
    }
    Ok(())
}

impl Storage for HostCtlArray {
    fn ios(&self) -> &[IoArray] {
        &self.ios
    }
    fn device(&self) -> GpuDevice {
        let c = &self.cfg;
        GpuDevice::HostCtl {
            ssds: c.ssds,
            capacity: c.capacity_bytes,
            lba: c.lba_size,
            media: c.media.clone(),
            workers: c.workers,
            fill_pattern: c.fill_pattern,
        }
    }
    fn counters(&self) -> Result<Vec<SsdCounters>> {
        Ok(self
            .models
            .iter()
            .map(|m| {
                let s = m.stats();
                let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                SsdCounters {
                    reads: r(&s.reads),
                    writes: r(&s.writes),
                    others: r(&s.flushes),
                    read_bytes: r(&s.bytes_read),
                    write_bytes: r(&s.bytes_written),
                    errors: r(&s.errors),
                    bad_doorbells: m.doorbell_errors().len() as u64,
                }
            })
            .collect())
    }
    fn set_stall(&self, stall: bool) -> Result<()> {
        self.ctl.stall.store(stall, Ordering::Release);
        Ok(())
    }
    fn read_medium(&self, ssd: usize, off: u64, out: &mut [u8]) -> Result<()> {
        let m = self
            .models
            .get(ssd)
            .ok_or_else(|| Error::InvalidArgument(format!("no SSD {ssd}")))?;
        if off.saturating_add(out.len() as u64) > m.medium().len() {
            return Err(Error::InvalidArgument("medium range out of bounds".into()));
        }
        m.medium().read_at(off, out)?;
        Ok(())
    }
    fn backend(&self) -> Backend<'_> {
        Backend::HostCtl(self)
    }
}

impl Drop for HostCtlArray {
    fn drop(&mut self) {
        // No model may touch GPU memory once the I/O layer starts freeing it.
        self.stop_workers();
    }
}
