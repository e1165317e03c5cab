//! The simulated SSD array, one backend of the GPU I/O layer: controller models for
//! registers and admin commands, their media, and the persistent GPU kernel
//! (`bam_sim_controller`, or `bam_sim_controller_shared` for an array several GPUs
//! use; crates/bam/cuda/src/sim.cu) that serves the I/O queues.
//!
//! Each simulated SSD is a `bam_nvme` controller model in external-I/O-queue mode,
//! attached to an [`IoArray`] by the same code as a real SSD: its I/O queue pairs are
//! created with Create I/O CQ/SQ commands at GPU memory made DMA-reachable through
//! `Transport::map_gpu`, and the controller kernel serves them. The doorbells live in a
//! "BAR" page of GPU memory per SSD, at the offsets the controller reports
//! (0x1000 + (2 qid + is_cq) * (4 << DSTRD)).

pub mod abi;
mod config;
mod drive_profile;
mod kernel;
mod media_file;

pub use config::{Media, SimConfig};
pub use drive_profile::DriveProfile;
pub use kernel::SimProfile;
pub use media_file::MappedFile;

use crate::cuda::layout::round_up;
use crate::cuda::{DeviceBuffer, Gpu, PersistentKernel, PinnedBuffer, TableLayout};
use crate::error::{Error, Result};
use crate::io::{attach_gpus, DoorbellWindow, IoArray, IoConfig};
use crate::storage::{Backend, Fault, GpuDevice, Lie, SsdCounters, Storage};
use abi::*;
use bam_nvme::model::{ModelConfig, ModelTransport};
use bam_nvme::Transport;
use kernel::{sim_scratch, SimKernel, SimLaunch, SimQueueService, SIM_BLOCK_THREADS};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where one SSD's medium lives.
enum MediumMem {
    Dev(DeviceBuffer),
    Host(PinnedBuffer),
    File(MappedFile),
}

impl MediumMem {
    fn dev_ptr(&self) -> u64 {
        match self {
            MediumMem::Dev(b) => b.ptr(),
            MediumMem::Host(b) => b.dev_ptr(),
            MediumMem::File(f) => f.dev_ptr(),
        }
    }
}

/// A lie as the controller kernel takes it: `BAM_SIM_LIE_*` and the withholding time
/// in ns.
fn lie_code(lie: Lie) -> (u32, u64) {
    match lie {
        Lie::Duplicate => (BAM_SIM_LIE_DUPLICATE, 0),
        Lie::OtherCid => (BAM_SIM_LIE_OTHER_CID, 0),
        Lie::Unsubmitted => (BAM_SIM_LIE_UNSUBMITTED, 0),
        Lie::Stale => (BAM_SIM_LIE_STALE, 0),
        Lie::PhaseGlitch => (BAM_SIM_LIE_PHASE, 0),
        Lie::SqHeadOutOfRange => (BAM_SIM_LIE_SQ_HEAD, 0),
        Lie::Flood => (BAM_SIM_LIE_FLOOD, 0),
        Lie::Withhold(d) => (
            BAM_SIM_LIE_WITHHOLD,
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        ),
    }
}

/// The fault fields of every SSD's table entry for `fault` (all 0 for none).
#[derive(Default)]
struct FaultFields {
    lba: u64,
    nlb: u64,
    status: u32,
    lie: u32,
    lie_ns: u64,
}

/// Checks `fault` and turns it into table fields. Errors: [`Error::InvalidArgument`] for
/// a range past 2^64, a status that is not a 15-bit NVMe error status (0 only with a
/// lie).
fn fault_fields(fault: Option<Fault>) -> Result<FaultFields> {
    let Some(f) = fault.filter(|f| f.nlb != 0) else {
        return Ok(FaultFields::default());
    };
    if f.lba.checked_add(f.nlb).is_none() {
        return Err(Error::InvalidArgument(format!(
            "fault range of {} LBAs at {} passes 2^64",
            f.nlb, f.lba
        )));
    }
    if (f.status == 0 && f.lie.is_none()) || f.status > 0x7fff {
        return Err(Error::InvalidArgument(format!(
            "fault status {:#x}: not a 15-bit NVMe error status",
            f.status
        )));
    }
    let (lie, lie_ns) = f.lie.map_or((0, 0), lie_code);
    Ok(FaultFields {
        lba: f.lba,
        nlb: f.nlb,
        status: f.status as u32,
        lie,
        lie_ns,
    })
}

/// A simulated SSD array: controller models attached to the GPU I/O layer, their media,
/// and the running controller kernel that serves the queues.
pub struct SimArray {
    /// One I/O layer per GPU served; the controller kernel runs on the first one's GPU.
    ios: Vec<IoArray>,
    /// The controller kernel's per-queue memory for the queues of the other GPUs (in
    /// the first GPU's memory, where the kernel polls it).
    remote_scratch: Option<DeviceBuffer>,
    cfg: SimConfig,
    bars: DeviceBuffer,
    media: Vec<MediumMem>,
    tables: DeviceBuffer,
    ctl_off: usize,
    /// The controller kernel (shared with the queue recovery of the I/O layers, which
    /// stops and starts it).
    kernel: Arc<Mutex<SimKernel>>,
    sim_view: SimView,
    simq_off: usize,
    /// Offset of the `bam_sim_ssd` table in `tables`.
    ssds_off: usize,
    /// Serialises [`SimArray::set_fault`].
    fault_lock: Mutex<()>,
}

/// Capacity of the device-side error log.
pub const ERROR_LOG_CAPACITY: u32 = crate::io::ERROR_LOG_CAPACITY;

impl SimArray {
    /// Builds the array, brings every controller up, creates the GPU queues and starts
    /// the controller kernel on `cfg.sim_sms` reserved SMs.
    pub fn new(gpu: &Arc<Gpu>, cfg: SimConfig) -> Result<Self> {
        Self::on_gpus(std::slice::from_ref(gpu), cfg)
    }

    /// One simulated array serving queue pairs of every GPU in `gpus`: the media, the
    /// controllers' doorbells and the controller kernel live on the first GPU; every GPU
    /// gets `cfg.queues` queue pairs per SSD in its own memory and its own I/O layer
    /// ([`Storage::ios`], in the order of `gpus`). The kernel reaches the other GPUs'
    /// queues and buffers, and their threads its doorbells, through peer access (an
    /// error names the pair of GPUs that lack it); their queues are ordered with
    /// system-scope fences. Each GPU running its own array (`SimArray::new` on each)
    /// measures the I/O stack per GPU; this measures one array shared.
    pub fn on_gpus(gpus: &[Arc<Gpu>], cfg: SimConfig) -> Result<Self> {
        let Some(gpu) = gpus.first() else {
            return Err(Error::InvalidArgument(
                "a simulated array needs a GPU".into(),
            ));
        };
        // Refuses a GPU the controller kernel cannot run on; kept for every start.
        let launch = SimLaunch::of(gpu)?;
        let capacity = check(gpu, gpus.len() as u32, &cfg)?;
        for other in &gpus[1..] {
            other.enable_peer_access(gpu)?;
            gpu.enable_peer_access(other)?;
        }
        gpu.bind()?;
        let bars = Bars::new(gpu, &cfg)?;
        let media = media(gpu, &cfg, capacity)?;
        let (ios, remote_scratch) = attach(gpus, &cfg, capacity, &bars)?;
        let built = ControllerTables::build(gpu, &cfg, &ios, remote_scratch.as_ref(), &media)?;
        let kernel = Arc::new(Mutex::new(SimKernel {
            gpu: gpu.clone(),
            kernel: PersistentKernel::new(gpu)?,
            launch,
            view: built.view,
            blocks: cfg.sim_sms,
            shared: remote_scratch.is_some(),
        }));
        // Queue recovery (IoArray::recover): the kernel, stopped, forgets the queue.
        let mut first = 0;
        for io in &ios {
            let n = io.queue_pairs().len();
            io.set_queue_service(Arc::new(SimQueueService {
                kernel: kernel.clone(),
                table: built.view.queues + (std::mem::size_of::<SimQueue>() * first) as u64,
                queues: built.queues[first..first + n].to_vec(),
            }));
            first += n;
        }
        let arr = SimArray {
            ios,
            remote_scratch,
            cfg,
            bars: bars.mem,
            media,
            tables: built.mem,
            ctl_off: built.control_off,
            kernel,
            sim_view: built.view,
            simq_off: built.queues_off,
            ssds_off: built.ssds_off,
            fault_lock: Mutex::new(()),
        };
        if arr.cfg.fill_pattern {
            arr.fill_pattern()?;
        }
        arr.start()?;
        Ok(arr)
    }

    /// `storage` as a simulated array, when it is one (its media, for baselines).
    pub fn of(storage: &dyn Storage) -> Option<&SimArray> {
        match storage.backend() {
            Backend::Sim(s) => Some(s),
            _ => None,
        }
    }

    /// The GPU I/O layer over the simulated SSDs: hand it to the cache or the benchmark
    /// (the first GPU's; [`Storage::ios`] has every GPU's).
    pub fn io(&self) -> &IoArray {
        &self.ios[0]
    }

    /// The control block (in GPU memory; the kernel writes it while it runs), read
    /// through the copy stream.
    fn read_control(&self) -> Result<SimControl> {
        let mut c = [SimControl::default()];
        self.tables.read(self.ctl_off, &mut c)?;
        Ok(c[0])
    }

    /// Stores one u32 field of the control block (the kernel polls it).
    fn write_control_u32(&self, field_off: usize, v: u32) -> Result<()> {
        self.tables.write(self.ctl_off + field_off, &[v])
    }

    /// Fills every medium with the verification pattern, generation 0.
    pub fn fill_pattern(&self) -> Result<()> {
        let gpu = self.io().gpu();
        let stream = gpu.stream()?;
        let bytes = self.cfg.capacity_bytes / self.cfg.model.lba_size as u64
            * self.cfg.model.lba_size as u64;
        for (i, m) in self.media.iter().enumerate() {
            // SAFETY: the medium holds `bytes` bytes (capacity rounded down to blocks)
            // and outlives the synchronisation below.
            unsafe { crate::pattern::fill_raw(gpu, &stream, m.dev_ptr(), bytes, i as u32, 0)? };
        }
        gpu.sync_timeout(&stream, Duration::from_secs(120))
    }

    /// Launches the controller kernel and waits until every block is resident.
    fn start(&self) -> Result<()> {
        self.kernel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .start()
    }

    /// Stops the controller kernel (bounded wait). The kernel counts as running until
    /// it has been seen to finish, so that after a failed stop Drop leaks the memory it
    /// may still touch rather than freeing it under it.
    pub fn stop(&mut self) -> Result<()> {
        self.kernel.lock().unwrap_or_else(|e| e.into_inner()).stop()
    }

    /// Profile of the controller kernel's warp 0 (cumulative since start; take the
    /// difference of two readings around a job).
    pub fn profile(&self) -> Result<SimProfile> {
        let c = self.read_control()?;
        Ok(SimProfile {
            loops: c.loops,
            cycles: c.prof_cycles,
            fetch_cycles: c.prof_fetch,
            post_cycles: c.prof_post,
            commands: c.prof_cmds,
        })
    }

    /// Fault injection: a stalled controller stops serving its queues.
    pub fn set_stall(&self, stall: bool) -> Result<()> {
        self.write_control_u32(std::mem::offset_of!(SimControl, stall), stall as u32)
    }

    /// Fault injection while the array runs: from now on, reads and writes touching
    /// `[fault.lba, fault.lba + fault.nlb)` of any of the SSDs complete with
    /// `fault.status`; `None` (or `nlb` 0) ends the fault. Rewrites the fault fields of
    /// every SSD's entry in the controllers' table (`bam_sim_ssd`; [`Self::config`] keeps
    /// the fault the array was created with).
    ///
    /// Visibility: the controller kernel validates commands against a copy of the table
    /// in each block's shared memory (for the first 32 SSDs; the others' entries are read
    /// from the table itself). After writing the table this function raises the control
    /// block's fault epoch; every warp of the kernel looks at the epoch every 64 turns of
    /// its service loop, copies the new fields and acknowledges, and `set_fault` returns
    /// once every warp has (microseconds to milliseconds). So every command that the
    /// controllers fetch after `set_fault` returns, in particular every command submitted
    /// after it returns, gets the new fault; commands fetched before keep the outcome they
    /// got, and a command fetched while `set_fault` runs may see the old fault, the new
    /// one, none, or a mix of their fields. For a clean cut, change it while no I/O runs
    /// on the LBAs concerned. On a stopped array ([`Self::stop`]) it only writes the table.
    ///
    /// Errors: [`Error::InvalidArgument`] for a range past 2^64 or a status that is not a
    /// 15-bit NVMe error status ((SCT << 8) | SC with CRD/M/DNR; 0 only with a lie);
    /// [`Error::Timeout`] when the warps do not all acknowledge within 10 s (the table
    /// holds the new fault then, but some warps may still apply the old one); errors of
    /// the copies to and from the GPU.
    pub fn set_fault(&self, fault: Option<Fault>) -> Result<()> {
        self.set_faults(0..self.sim_view.nssd as usize, fault)
    }

    /// [`Self::set_fault`] for SSD `ssd` alone (the others keep theirs): replicas that
    /// fail differently. Errors as `set_fault`'s, and [`Error::InvalidArgument`] for an
    /// SSD the array does not have.
    pub fn set_fault_on(&self, ssd: usize, fault: Option<Fault>) -> Result<()> {
        if ssd >= self.sim_view.nssd as usize {
            return Err(Error::InvalidArgument(format!(
                "set_fault_on: no SSD {ssd} (the array has {})",
                self.sim_view.nssd
            )));
        }
        self.set_faults(ssd..ssd + 1, fault)
    }

    fn set_faults(&self, ssds: std::ops::Range<usize>, fault: Option<Fault>) -> Result<()> {
        let f = fault_fields(fault)?;
        // One change at a time: the acknowledgements count the warps for one epoch.
        let _one = self.fault_lock.lock().unwrap_or_else(|p| p.into_inner());
        let size = std::mem::size_of::<SimSsd>();
        let lba_off = std::mem::offset_of!(SimSsd, fault_lba);
        let nlb_off = std::mem::offset_of!(SimSsd, fault_nlb);
        let status_off = std::mem::offset_of!(SimSsd, fault_status);
        let flags_off = std::mem::offset_of!(SimSsd, flags);
        let lie_ns_off = std::mem::offset_of!(SimSsd, lie_ns);
        for i in ssds {
            let base = self.ssds_off + i * size;
            self.tables.write(base + nlb_off, &[0u64])?;
            self.tables.write(base + lba_off, &[f.lba])?;
            self.tables.write(base + status_off, &[f.status])?;
            self.tables.write(base + flags_off, &[f.lie])?;
            self.tables.write(base + lie_ns_off, &[f.lie_ns])?;
            self.tables.write(base + nlb_off, &[f.nlb])?;
        }
        if !self
            .kernel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .kernel
            .running()
        {
            return Ok(()); // a kernel copies the table when it starts
        }
        // Every warp acknowledged the previous epoch before its set_fault returned, so
        // none adds to the count zeroed here but for the new epoch.
        let epoch = self.read_control()?.fault_epoch.wrapping_add(1);
        self.write_control_u32(std::mem::offset_of!(SimControl, fault_acks), 0)?;
        self.write_control_u32(std::mem::offset_of!(SimControl, fault_epoch), epoch)?;
        let warps = self.cfg.sim_sms * (SIM_BLOCK_THREADS / 32);
        let t0 = Instant::now();
        loop {
            let acks = self.read_control()?.fault_acks;
            if acks >= warps {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(Error::Timeout(format!(
                    "set_fault: {acks} of {warps} simulator warps took the new fault"
                )));
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Device pointer of the medium of SSD `i`.
    pub fn medium_ptr(&self, i: usize) -> u64 {
        self.media[i].dev_ptr()
    }

    /// Reads `out.len()` bytes of SSD `ssd`'s medium at byte `off`.
    pub fn read_medium(&self, ssd: usize, off: u64, out: &mut [u8]) -> Result<()> {
        let cap = self.cfg.capacity_bytes;
        if ssd >= self.media.len() || off.saturating_add(out.len() as u64) > cap {
            return Err(Error::InvalidArgument("medium range out of bounds".into()));
        }
        crate::cuda::read_device(self.io().gpu(), self.media[ssd].dev_ptr() + off, out)
    }

    /// Counters per SSD (published by the controller kernel every ~1000 loops and at exit).
    pub fn counters(&self) -> Result<Vec<SsdCounters>> {
        let mut q = vec![SimQueue::default(); self.sim_view.nqueues as usize];
        self.tables.read(self.simq_off, &mut q)?;
        let mut out = vec![SsdCounters::default(); self.cfg.ssds as usize];
        for x in &q {
            let c = &mut out[x.ssd as usize];
            c.reads += x.reads;
            c.writes += x.writes;
            c.others += x.others;
            c.read_bytes += x.read_bytes;
            c.write_bytes += x.write_bytes;
            c.errors += x.errors;
            c.bad_doorbells += x.bad_doorbells;
        }
        Ok(out)
    }
}

/// Checks `cfg` for an array serving `ngpu` GPUs, with the controller kernel on `gpu`;
/// returns the bytes of each SSD (the capacity rounded down to whole blocks).
fn check(gpu: &Gpu, ngpu: u32, cfg: &SimConfig) -> Result<u64> {
    let m = &cfg.model;
    let io = &cfg.io;
    let bad = |s: String| Err(Error::InvalidArgument(s));
    if cfg.ssds == 0 || io.queues == 0 {
        return bad("need at least one SSD and one queue".into());
    }
    if !io.depth.is_power_of_two() || io.depth < 2 || io.depth > m.max_depth {
        return bad(format!(
            "queue depth {} must be a power of two in 2..={}",
            io.depth, m.max_depth
        ));
    }
    if io.queues.saturating_mul(ngpu) > m.max_queues as u32 {
        return bad(format!(
            "{} queues per SSD for each of {ngpu} GPU(s); the {} model grants {}",
            io.queues, m.name, m.max_queues
        ));
    }
    if cfg.sim_sms == 0 || cfg.sim_sms >= gpu.sms {
        return bad(format!(
            "--sim-sms {} must be in 1..{}",
            cfg.sim_sms, gpu.sms
        ));
    }
    let nqp = (cfg.ssds * io.queues * ngpu) as usize;
    let warps = cfg.sim_sms as usize * (SIM_BLOCK_THREADS / 32) as usize;
    if nqp > warps * 32 {
        return bad(format!(
            "{nqp} queues need at least {} simulator SMs",
            nqp.div_ceil(32 * 16)
        ));
    }
    if !io.slot_bytes.is_power_of_two() || io.slot_bytes < 512 || io.slot_bytes > (2 << 20) {
        return bad("buffer slots must be a power of two from 512 B to 2 MiB".into());
    }
    let lba = m.lba_size as u64;
    let capacity = cfg.capacity_bytes / lba * lba;
    if capacity == 0 {
        return bad("capacity holds no block".into());
    }
    Ok(capacity)
}

/// The controllers' "BARs": one page of doorbells per SSD in GPU memory, which the
/// controller kernel polls.
struct Bars {
    mem: DeviceBuffer,
    /// Bytes per SSD.
    each: usize,
}

impl Bars {
    fn new(gpu: &Arc<Gpu>, cfg: &SimConfig) -> Result<Bars> {
        let each = round_up(0x1000 + 8 * (cfg.model.max_queues as usize + 1), 4096);
        Ok(Bars {
            mem: DeviceBuffer::zeroed(gpu, each * cfg.ssds as usize)?,
            each,
        })
    }
}

/// Every SSD's medium of `capacity` bytes, on `gpu`.
fn media(gpu: &Arc<Gpu>, cfg: &SimConfig, capacity: u64) -> Result<Vec<MediumMem>> {
    (0..cfg.ssds)
        .map(|i| {
            Ok(match &cfg.media {
                Media::Hbm => MediumMem::Dev(DeviceBuffer::zeroed(gpu, capacity as usize)?),
                Media::Host => MediumMem::Host(PinnedBuffer::new(gpu, capacity as usize)?),
                Media::File(p) => {
                    let path = if cfg.ssds == 1 {
                        p.clone()
                    } else {
                        PathBuf::from(format!("{}.{i}", p.display()))
                    };
                    MediumMem::File(MappedFile::open(gpu, &path, capacity as usize)?)
                }
            })
        })
        .collect()
}

/// One controller model per SSD, for admin commands (the kernel serves the I/O queues).
fn controller_models(cfg: &SimConfig, capacity: u64) -> Result<Vec<Arc<dyn Transport>>> {
    let m = &cfg.model;
    let mdts_field = if m.mdts_bytes == 0 {
        0
    } else {
        (m.mdts_bytes / 4096).trailing_zeros() as u8
    };
    (0..cfg.ssds as usize)
        .map(|s| {
            let mut mc = ModelConfig::ram(capacity);
            mc.lba_size = m.lba_size;
            mc.max_queue_entries = m.max_depth;
            mc.max_io_queues = m.max_queues;
            mc.mdts = mdts_field;
            mc.external_io_queues = true;
            mc.serial = format!("BAMSIM{s:06}");
            mc.model_number = format!("bam simulated {}", m.name);
            Ok(Arc::new(ModelTransport::new(mc.build()?)) as Arc<dyn Transport>)
        })
        .collect()
}

/// Brings the controllers up and attaches them to one I/O layer per GPU. The first
/// GPU's queues keep the controller kernel's per-queue memory in their own scratch; the
/// other GPUs' queues keep it in the returned buffer on the first GPU, where the kernel
/// polls it.
fn attach(
    gpus: &[Arc<Gpu>],
    cfg: &SimConfig,
    capacity: u64,
    bars: &Bars,
) -> Result<(Vec<IoArray>, Option<DeviceBuffer>)> {
    let transports = controller_models(cfg, capacity)?;
    let (_, scratch) = sim_scratch(cfg.io.depth);
    let local = IoConfig {
        queue_scratch_bytes: scratch,
        ..cfg.io.clone()
    };
    let remote = IoConfig {
        queue_scratch_bytes: 0,
        ..cfg.io.clone()
    };
    // Every GPU rings the doorbells in the first GPU's memory; the others across the
    // peer link, ordered at system scope.
    let window = |g: usize, s: usize| DoorbellWindow {
        addr: bars.mem.ptr() + (s * bars.each) as u64,
        len: bars.each,
        mmio: g > 0,
    };
    let mut ios = attach_gpus(gpus, &transports, window, |g| {
        if g == 0 {
            &local
        } else {
            &remote
        }
    })?;
    ios[0].set_reserved_sms(cfg.sim_sms);
    let remote_qps: usize = ios[1..].iter().map(|io| io.queue_pairs().len()).sum();
    let remote_scratch = if remote_qps > 0 {
        Some(DeviceBuffer::zeroed(&gpus[0], scratch * remote_qps)?)
    } else {
        None
    };
    Ok((ios, remote_scratch))
}

/// The controller kernel's tables in GPU memory: its queues (every GPU's, the first
/// GPU's first), its SSDs, the DMA regions it may reach, the SSDs' virtual clocks and its
/// control block.
struct ControllerTables {
    mem: DeviceBuffer,
    view: SimView,
    /// The queue entries as written.
    queues: Vec<SimQueue>,
    queues_off: usize,
    ssds_off: usize,
    control_off: usize,
}

impl ControllerTables {
    fn build(
        gpu: &Arc<Gpu>,
        cfg: &SimConfig,
        ios: &[IoArray],
        remote_scratch: Option<&DeviceBuffer>,
        media: &[MediumMem],
    ) -> Result<ControllerTables> {
        let queues = queue_entries(cfg, ios, remote_scratch);
        let mut ssds = ssd_entries(cfg, &ios[0], media)?;
        let regions: Vec<SimRegion> = ios
            .iter()
            .flat_map(|io| io.dma_regions())
            .map(|r| SimRegion {
                iova: r.iova,
                len: r.len,
                dev: r.dev,
                reserved: 0,
            })
            .collect();
        let mut t = TableLayout::new();
        let queues_off = t.of::<SimQueue>(queues.len(), 256);
        let ssds_off = t.of::<SimSsd>(ssds.len(), 256);
        let regions_off = t.of::<SimRegion>(regions.len(), 256);
        let vclocks_off = t.of::<u64>(ssds.len(), 256);
        let control_off = t.of::<SimControl>(1, 256);
        let mem = DeviceBuffer::zeroed(gpu, t.bytes())?;
        for (i, s) in ssds.iter_mut().enumerate() {
            s.vclock = mem.ptr() + (vclocks_off + 8 * i) as u64;
        }
        mem.write(queues_off, &queues)?;
        mem.write(ssds_off, &ssds)?;
        mem.write(regions_off, &regions)?;
        let view = SimView {
            queues: mem.ptr() + queues_off as u64,
            ssds: mem.ptr() + ssds_off as u64,
            regions: mem.ptr() + regions_off as u64,
            control: mem.ptr() + control_off as u64,
            nqueues: queues.len() as u32,
            nssd: cfg.ssds,
            nregions: regions.len() as u32,
            flags: 0,
        };
        Ok(ControllerTables {
            mem,
            view,
            queues,
            queues_off,
            ssds_off,
            control_off,
        })
    }
}

/// Every GPU's queue pairs as the controller kernel serves them; the other GPUs' are
/// served through peer access with system-scope ordering (`BAM_SIM_Q_SYSTEM`), their
/// per-queue memory in `remote_scratch` (queue k of them, in this order, at k times the
/// scratch size).
fn queue_entries(
    cfg: &SimConfig,
    ios: &[IoArray],
    remote_scratch: Option<&DeviceBuffer>,
) -> Vec<SimQueue> {
    let (bitmap_off, scratch) = sim_scratch(cfg.io.depth);
    let local = ios[0].queue_pairs().len();
    let mut out: Vec<SimQueue> = Vec::new();
    for (g, io) in ios.iter().enumerate() {
        for (i, q) in io.queue_pairs().iter().enumerate() {
            let pending = match remote_scratch {
                Some(r) if g > 0 => r.ptr() + ((out.len() - local) * scratch) as u64,
                _ => io.queue_scratch(i),
            };
            out.push(SimQueue {
                sq: q.sq,
                cq: q.cq,
                sq_db: q.sq_db,
                cq_db: q.cq_db,
                pending,
                cid_bitmap: pending + bitmap_off as u64,
                depth: q.depth | if g > 0 { BAM_SIM_Q_SYSTEM } else { 0 },
                qid: q.qid,
                ssd: q.ssd,
                ..Default::default()
            });
        }
    }
    out
}

/// Every SSD as the controller kernel models it: medium, namespace, timing costs and
/// injected fault.
fn ssd_entries(cfg: &SimConfig, io: &IoArray, media: &[MediumMem]) -> Result<Vec<SimSsd>> {
    let m = &cfg.model;
    let cost = |per_s: u64| 1_000_000_000_000u64.checked_div(per_s).unwrap_or(0);
    let fields = fault_fields(cfg.fault)?;
    Ok(io
        .ssd_views()
        .iter()
        .enumerate()
        .map(|(s, v)| SimSsd {
            medium: media[s].dev_ptr(),
            nlb: v.nlb,
            lba_shift: v.lba_shift,
            nsid: v.nsid,
            mdts_bytes: v.mdts_bytes,
            page_shift: 12,
            lat_read_ns: m.lat_read_ns,
            lat_write_ns: m.lat_write_ns,
            ps_per_read_cmd: cost(m.iops_read),
            ps_per_write_cmd: cost(m.iops_write),
            ps_per_read_byte: cost(m.bw_read),
            ps_per_write_byte: cost(m.bw_write),
            fault_lba: fields.lba,
            fault_nlb: fields.nlb,
            fault_status: fields.status,
            flags: fields.lie,
            lie_ns: fields.lie_ns,
            ..Default::default()
        })
        .collect())
}

impl Drop for SimArray {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::error!("simulated array: controller kernel did not stop: {e}");
            // The kernel may still touch our memory: leak it rather than free it under it.
            std::mem::forget(std::mem::take(&mut self.media));
            for io in &mut self.ios {
                io.leak_memory();
            }
            if let Some(r) = &mut self.remote_scratch {
                r.leak();
            }
            self.bars.leak();
            self.tables.leak();
        }
    }
}

/// The simulated array as a storage backend.
impl Storage for SimArray {
    fn ios(&self) -> &[IoArray] {
        &self.ios
    }
    fn device(&self) -> GpuDevice {
        let c = &self.cfg;
        GpuDevice::Sim {
            model: c.model.clone(),
            ssds: c.ssds,
            media: c.media.clone(),
            capacity: c.capacity_bytes,
            sms: c.sim_sms,
            fill_pattern: c.fill_pattern,
        }
    }
    fn counters(&self) -> Result<Vec<SsdCounters>> {
        SimArray::counters(self)
    }
    fn set_stall(&self, stall: bool) -> Result<()> {
        SimArray::set_stall(self, stall)
    }
    fn read_medium(&self, ssd: usize, off: u64, out: &mut [u8]) -> Result<()> {
        SimArray::read_medium(self, ssd, off, out)
    }
    fn backend(&self) -> Backend<'_> {
        Backend::Sim(self)
    }
}
