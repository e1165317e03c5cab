//! The simulated SSD array: host part (controller model bring-up, GPU queue pairs,
//! I/O buffers, media) and the launch of the GPU part (`bam_sim_controller`).
//!
//! Each simulated SSD is a `bam_nvme` controller model in external-I/O-queue mode,
//! brought up by the same `bam_nvme::Controller` code as a real SSD. Its I/O queue
//! pairs are created with Create I/O CQ/SQ commands whose memory is GPU memory made
//! DMA-reachable through `Transport::map_gpu`; the GPU kernel then serves them. The
//! doorbells live in a "BAR" page of GPU memory per SSD, at the offsets the controller
//! reports (0x1000 + (2 qid + is_cq) * (4 << DSTRD)).

use crate::abi::*;
use crate::error::{Error, IoError, Result};
use crate::gpu::{arg, DeviceBuffer, Gpu, MappedFile, PinnedBuffer};
use crate::presets::DeviceModel;
use bam_nvme::model::{ModelConfig, ModelTransport};
use bam_nvme::transport::dma::GpuMapping;
use bam_nvme::{Controller, ControllerOptions, Transport};
use cudarc::driver::CudaStream;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the simulated SSDs keep their data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Media {
    /// GPU memory: measures the I/O software stack alone.
    Hbm,
    /// Pinned host memory: data crosses PCIe as SSD data would.
    Host,
    /// A file mapped into host memory (one file per SSD: `PATH.N` when N > 1 SSDs).
    File(PathBuf),
}

/// Commands touching `[lba, lba + nlb)` complete with `status` (an NVMe status field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// First LBA.
    pub lba: u64,
    /// LBAs.
    pub nlb: u64,
    /// Status field ((SCT << 8) | SC).
    pub status: u16,
}

/// Configuration of a simulated array and its GPU queues and buffers.
#[derive(Clone, Debug, Serialize)]
pub struct SimConfig {
    /// Device model of every SSD.
    pub model: DeviceModel,
    /// Number of SSDs.
    pub ssds: u32,
    /// Medium.
    pub media: Media,
    /// Capacity of each SSD in bytes.
    pub capacity_bytes: u64,
    /// I/O queue pairs per SSD.
    pub queues: u32,
    /// Entries per queue (power of two).
    pub depth: u32,
    /// SMs reserved for the simulated controllers.
    pub sim_sms: u32,
    /// Bound of every GPU-side wait.
    pub timeout: Duration,
    /// Bytes per I/O buffer slot.
    pub slot_bytes: u64,
    /// I/O buffer slots.
    pub nslots: u32,
    /// Fault injection.
    pub fault: Option<Fault>,
    /// Fill the media with the verification pattern (generation 0).
    pub fill_pattern: bool,
}

impl SimConfig {
    /// Defaults: one `ideal` SSD of 1 GiB in GPU memory, 1 queue of 1024 entries.
    pub fn new(model: DeviceModel) -> Self {
        SimConfig {
            model,
            ssds: 1,
            media: Media::Hbm,
            capacity_bytes: 1 << 30,
            queues: 1,
            depth: 1024,
            sim_sms: 16,
            timeout: Duration::from_secs(2),
            slot_bytes: 4096,
            nslots: 1024,
            fault: None,
            fill_pattern: true,
        }
    }
}

/// Counters of one simulated SSD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SsdCounters {
    /// Read commands.
    pub reads: u64,
    /// Write commands.
    pub writes: u64,
    /// Other commands (flush).
    pub others: u64,
    /// Bytes read from the medium.
    pub read_bytes: u64,
    /// Bytes written to the medium.
    pub write_bytes: u64,
    /// Commands completed with an error status.
    pub errors: u64,
    /// Invalid doorbell values seen.
    pub bad_doorbells: u64,
}

/// Cumulative profile of one controller warp (warp 0), published every 64 iterations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SimProfile {
    /// Service loop iterations.
    pub loops: u64,
    /// SM cycles spent in the loop.
    pub cycles: u64,
    /// Cycles in visits that fetched commands (fetch, validation, data, model).
    pub fetch_cycles: u64,
    /// Cycles in visits that posted completions.
    pub post_cycles: u64,
    /// Commands fetched.
    pub commands: u64,
}

impl SimProfile {
    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &SimProfile) -> SimProfile {
        SimProfile {
            loops: self.loops.wrapping_sub(earlier.loops),
            cycles: self.cycles.wrapping_sub(earlier.cycles),
            fetch_cycles: self.fetch_cycles.wrapping_sub(earlier.fetch_cycles),
            post_cycles: self.post_cycles.wrapping_sub(earlier.post_cycles),
            commands: self.commands.wrapping_sub(earlier.commands),
        }
    }
}

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

fn align(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// Bus address of device address `dev` inside `m`.
fn iova_of(m: &GpuMapping, dev: u64) -> u64 {
    let page = m.page_size as u64;
    let first = m.dev_ptr & !(page - 1);
    m.pages[((dev - first) / page) as usize] + (dev - first) % page
}

/// Coalesced (iova, len, dev) runs of a mapping.
fn regions_of(m: &GpuMapping) -> Vec<SimRegion> {
    let page = m.page_size as u64;
    let first = m.dev_ptr & !(page - 1);
    let end = m.dev_ptr + m.len as u64;
    let mut out: Vec<SimRegion> = Vec::new();
    for (i, &bus) in m.pages.iter().enumerate() {
        let pdev = first + i as u64 * page;
        let lo = pdev.max(m.dev_ptr);
        let hi = (pdev + page).min(end);
        let iova = bus + (lo - pdev);
        if let Some(r) = out.last_mut() {
            if r.iova + r.len == iova && r.dev + r.len == lo {
                r.len += hi - lo;
                continue;
            }
        }
        out.push(SimRegion {
            iova,
            len: hi - lo,
            dev: lo,
            reserved: 0,
        });
    }
    out
}

/// Offsets of one queue pair's pieces in the queue memory.
#[derive(Clone, Copy)]
struct QpLayout {
    sq: usize,
    cq: usize,
    slots: usize,
    state: usize,
    pending: usize,
    bitmap: usize,
    size: usize,
}

impl QpLayout {
    fn new(depth: usize) -> Self {
        let sq = 0;
        let cq = align(sq + 64 * depth, 4096);
        let slots = align(cq + 16 * depth, 256);
        let state = align(slots + 12 * depth, 256);
        let pending = align(state + 128, 256);
        let bitmap = align(pending + 16 * depth, 256);
        let size = align(bitmap + 8192, 4096);
        QpLayout {
            sq,
            cq,
            slots,
            state,
            pending,
            bitmap,
            size,
        }
    }
}

/// A simulated SSD array with its GPU queues, I/O buffers and running controller kernel.
pub struct SimArray {
    gpu: Arc<Gpu>,
    cfg: SimConfig,
    controllers: Vec<Controller>,
    _mappings: Vec<GpuMapping>,
    qmem: DeviceBuffer,
    _bars: DeviceBuffer,
    buf: DeviceBuffer,
    media: Vec<MediumMem>,
    tables: DeviceBuffer,
    ctl_off: usize,
    stream: Arc<CudaStream>,
    io_view: IoView,
    sim_view: SimView,
    errlog_off: usize,
    simq_off: usize,
    running: bool,
    nqp: usize,
    layout: QpLayout,
}

/// Capacity of the device-side error log.
pub const ERROR_LOG_CAPACITY: u32 = 4096;

impl SimArray {
    /// Builds the array, brings every controller up, creates the GPU queues and starts
    /// the controller kernel on `cfg.sim_sms` reserved SMs.
    pub fn new(gpu: &Arc<Gpu>, cfg: SimConfig) -> Result<Self> {
        let m = &cfg.model;
        let bad = |s: String| Err(Error::InvalidArgument(s));
        if cfg.ssds == 0 || cfg.queues == 0 {
            return bad("need at least one SSD and one queue".into());
        }
        if !cfg.depth.is_power_of_two() || cfg.depth < 2 || cfg.depth > m.max_depth {
            return bad(format!(
                "queue depth {} must be a power of two in 2..={}",
                cfg.depth, m.max_depth
            ));
        }
        if cfg.queues > m.max_queues as u32 {
            return bad(format!(
                "{} queues per SSD; the {} model grants {}",
                cfg.queues, m.name, m.max_queues
            ));
        }
        if cfg.sim_sms == 0 || cfg.sim_sms >= gpu.sms {
            return bad(format!(
                "--sim-sms {} must be in 1..{}",
                cfg.sim_sms, gpu.sms
            ));
        }
        let nqp = (cfg.ssds * cfg.queues) as usize;
        let warps = cfg.sim_sms as usize * 16;
        if nqp > warps * 32 {
            return bad(format!(
                "{nqp} queues need at least {} simulator SMs",
                nqp.div_ceil(32 * 16)
            ));
        }
        if !cfg.slot_bytes.is_power_of_two() || cfg.slot_bytes < 512 || cfg.slot_bytes > (2 << 20) {
            return bad("buffer slots must be a power of two from 512 B to 2 MiB".into());
        }
        let lba = m.lba_size as u64;
        let capacity = cfg.capacity_bytes / lba * lba;
        if capacity == 0 {
            return bad("capacity holds no block".into());
        }
        gpu.bind()?;

        // --- GPU memory -------------------------------------------------------------
        let layout = QpLayout::new(cfg.depth as usize);
        let qmem = DeviceBuffer::zeroed(gpu, layout.size * nqp)?;
        let bar_bytes = align(0x1000 + 8 * (m.max_queues as usize + 1), 4096);
        let bars = DeviceBuffer::zeroed(gpu, bar_bytes * cfg.ssds as usize)?;
        let page = 4096u64;
        let slot_pages = cfg.slot_bytes.div_ceil(page);
        let prp_stride = if cfg.slot_bytes > 2 * page {
            (slot_pages * 8).next_power_of_two().max(8)
        } else {
            0
        };
        let prp_off = align((cfg.slot_bytes * cfg.nslots as u64) as usize, 4096);
        let buf_len = prp_off + (prp_stride * cfg.nslots as u64) as usize;
        let buf = DeviceBuffer::zeroed(gpu, buf_len + 65536)?;
        // Slots and PRP lists must start on controller pages: align the region to 64 KiB.
        let buf_base = buf.ptr().div_ceil(65536) * 65536;
        let mut media = Vec::new();
        for i in 0..cfg.ssds {
            media.push(match &cfg.media {
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
            });
        }

        // --- bring-up through the controller model ---------------------------------
        let mut controllers = Vec::new();
        let mut mappings = Vec::new();
        let mut regions: Vec<SimRegion> = Vec::new();
        let mut qp_views = Vec::with_capacity(nqp);
        let mut sim_queues = Vec::with_capacity(nqp);
        let mut ssd_views = Vec::new();
        let mut sim_ssds = Vec::new();
        let mut iova_table: Option<Vec<u64>> = None;
        let mdts_field = if m.mdts_bytes == 0 {
            0
        } else {
            (m.mdts_bytes / 4096).trailing_zeros() as u8
        };
        #[allow(clippy::needless_range_loop)]
        for s in 0..cfg.ssds as usize {
            let mut mc = ModelConfig::ram(capacity);
            mc.lba_size = m.lba_size;
            mc.max_queue_entries = m.max_depth;
            mc.max_io_queues = m.max_queues;
            mc.mdts = mdts_field;
            mc.external_io_queues = true;
            mc.serial = format!("BAMSIM{s:06}");
            mc.model_number = format!("bam simulated {}", m.name);
            let transport: Arc<dyn Transport> = Arc::new(ModelTransport::new(mc.build()?));
            let qbase = qmem.ptr() + (s * cfg.queues as usize * layout.size) as u64;
            let qlen = cfg.queues as usize * layout.size;
            let qmap = transport.map_gpu(qbase, qlen)?;
            let bmap = transport.map_gpu(buf_base, buf_len)?;
            if s == 0 {
                regions.extend(regions_of(&bmap));
                let identity = bmap.pages.iter().enumerate().all(|(i, &p)| {
                    p == (bmap.dev_ptr & !(bmap.page_size as u64 - 1)) + (i * bmap.page_size) as u64
                });
                if !identity {
                    iova_table = Some(bmap.pages.clone());
                }
            }
            regions.extend(regions_of(&qmap));
            let opts = ControllerOptions {
                io_queue_pairs: cfg.queues as u16,
                ..Default::default()
            };
            let ctrl = Controller::new(transport, opts)?;
            let ns = ctrl.namespace(1)?;
            let mdts = ctrl.max_transfer_bytes() as u32;
            let bar = bars.ptr() + (s * bar_bytes) as u64;
            let first_qp = qp_views.len() as u32;
            for q in 0..cfg.queues as usize {
                let base = qbase + (q * layout.size) as u64;
                let raw = ctrl.create_raw_queue_pair(
                    iova_of(&qmap, base + layout.sq as u64),
                    iova_of(&qmap, base + layout.cq as u64),
                    cfg.depth,
                )?;
                if raw.sq_doorbell + 4 > bar_bytes || raw.cq_doorbell + 4 > bar_bytes {
                    return Err(Error::InvalidArgument(
                        "doorbell outside the simulated BAR".into(),
                    ));
                }
                // The same queue pair seen by the submitters (QpView) and by the
                // controller kernel (SimQueue).
                let (sq, cq) = (base + layout.sq as u64, base + layout.cq as u64);
                let (sq_db, cq_db) = (bar + raw.sq_doorbell as u64, bar + raw.cq_doorbell as u64);
                qp_views.push(QpView {
                    sq,
                    cq,
                    sq_db,
                    cq_db,
                    state: base + layout.state as u64,
                    slots: base + layout.slots as u64,
                    depth: cfg.depth,
                    qid: raw.qid,
                    ssd: s as u16,
                    flags: 0,
                    reserved: 0,
                });
                sim_queues.push(SimQueue {
                    sq,
                    cq,
                    sq_db,
                    cq_db,
                    pending: base + layout.pending as u64,
                    cid_bitmap: base + layout.bitmap as u64,
                    depth: cfg.depth,
                    qid: raw.qid,
                    ssd: s as u16,
                    ..Default::default()
                });
            }
            ssd_views.push(SsdView {
                nlb: ns.blocks,
                nsid: ns.nsid,
                lba_shift: ns.block_size.trailing_zeros(),
                mdts_bytes: mdts,
                nqueues: cfg.queues,
                first_qp,
                reserved: 0,
            });
            let cost = |iops: u64| 1_000_000_000_000u64.checked_div(iops).unwrap_or(0);
            let (fl, fnlb, fst) = cfg
                .fault
                .map(|f| (f.lba, f.nlb, f.status as u32))
                .unwrap_or((0, 0, 0));
            sim_ssds.push(SimSsd {
                medium: media[s].dev_ptr(),
                nlb: ns.blocks,
                lba_shift: ns.block_size.trailing_zeros(),
                nsid: ns.nsid,
                mdts_bytes: mdts,
                page_shift: 12,
                lat_read_ns: m.lat_read_ns,
                lat_write_ns: m.lat_write_ns,
                ps_per_read_cmd: cost(m.iops_read),
                ps_per_write_cmd: cost(m.iops_write),
                ps_per_read_byte: cost(m.bw_read),
                ps_per_write_byte: cost(m.bw_write),
                fault_lba: fl,
                fault_nlb: fnlb,
                fault_status: fst,
                ..Default::default()
            });
            mappings.push(qmap);
            mappings.push(bmap);
            controllers.push(ctrl);
        }

        // --- tables in GPU memory ------------------------------------------------------
        let off_qp = 0;
        let off_ssd = align(off_qp + 64 * nqp, 256);
        let off_err = align(off_ssd + 32 * ssd_views.len(), 256);
        let off_ent = off_err + 256;
        let off_simq = align(off_ent + 32 * ERROR_LOG_CAPACITY as usize, 256);
        let off_sims = align(off_simq + 128 * nqp, 256);
        let off_reg = align(off_sims + 128 * sim_ssds.len(), 256);
        let off_vclk = align(off_reg + 32 * regions.len(), 256);
        let off_ctl = align(off_vclk + 8 * sim_ssds.len(), 256);
        let off_iova = align(off_ctl + std::mem::size_of::<SimControl>(), 256);
        let total = off_iova + 8 * iova_table.as_ref().map_or(0, |t| t.len());
        let tables = DeviceBuffer::zeroed(gpu, total)?;
        for (i, s) in sim_ssds.iter_mut().enumerate() {
            s.vclock = tables.ptr() + (off_vclk + 8 * i) as u64;
        }
        tables.write(off_qp, &qp_views)?;
        tables.write(off_ssd, &ssd_views)?;
        tables.write(
            off_err,
            &[ErrorLog {
                capacity: ERROR_LOG_CAPACITY,
                entries: tables.ptr() + off_ent as u64,
                ..Default::default()
            }],
        )?;
        tables.write(off_simq, &sim_queues)?;
        tables.write(off_sims, &sim_ssds)?;
        tables.write(off_reg, &regions)?;
        if let Some(t) = &iova_table {
            tables.write(off_iova, t)?;
        }
        // PRP lists: entry j of slot i = bus address of the slot's page j.
        if prp_stride != 0 {
            let per = (prp_stride / 8) as usize;
            let mut lists = vec![0u64; per * cfg.nslots as usize];
            let bmap = &mappings[1];
            for i in 0..cfg.nslots as usize {
                for j in 0..slot_pages as usize {
                    // Slots start at the aligned region base (not at the allocation).
                    lists[i * per + j] =
                        iova_of(bmap, buf_base + i as u64 * cfg.slot_bytes + j as u64 * page);
                }
            }
            buf.write((buf_base - buf.ptr()) as usize + prp_off, &lists)?;
        }
        let io_view = IoView {
            qps: tables.ptr() + off_qp as u64,
            ssds: tables.ptr() + off_ssd as u64,
            errlog: tables.ptr() + off_err as u64,
            timeout_ns: cfg.timeout.as_nanos() as u64,
            nssd: cfg.ssds,
            nqp: nqp as u32,
            stripe_lbas: (cfg.slot_bytes / lba).max(1) as u32,
            // SSD s owns queue pairs s * queues .. (qp_views is built SSD by SSD).
            flags: cfg.queues << crate::abi::BAM_IO_QPS_PER_SSD_SHIFT,
            buf: BufView {
                base: buf_base,
                len: buf_len as u64,
                iova_table: if iova_table.is_some() {
                    tables.ptr() + off_iova as u64
                } else {
                    0
                },
                slot_bytes: cfg.slot_bytes,
                prp_off: prp_off as u64,
                iova_shift: mappings[1].page_size.trailing_zeros(),
                nslots: cfg.nslots,
                prp_stride: prp_stride as u32,
                page_shift: 12,
                reserved: 0,
            },
        };
        let sim_view = SimView {
            queues: tables.ptr() + off_simq as u64,
            ssds: tables.ptr() + off_sims as u64,
            regions: tables.ptr() + off_reg as u64,
            control: tables.ptr() + off_ctl as u64,
            nqueues: nqp as u32,
            nssd: cfg.ssds,
            nregions: regions.len() as u32,
            flags: 0,
        };
        let stream = gpu.stream()?;
        let mut arr = SimArray {
            gpu: gpu.clone(),
            cfg,
            controllers,
            _mappings: mappings,
            qmem,
            _bars: bars,
            buf,
            media,
            tables,
            ctl_off: off_ctl,
            stream,
            io_view,
            sim_view,
            errlog_off: off_err,
            simq_off: off_simq,
            running: false,
            nqp,
            layout,
        };
        if arr.cfg.fill_pattern {
            arr.fill_pattern()?;
        }
        arr.start()?;
        Ok(arr)
    }

    /// The control block (in GPU memory), read through the copy stream.
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
        let stream = self.gpu.stream()?;
        for (i, m) in self.media.iter().enumerate() {
            let mut ptr = m.dev_ptr();
            let mut words = self.cfg.capacity_bytes / self.cfg.model.lba_size as u64
                * self.cfg.model.lba_size as u64
                / 4;
            let mut ssd = i as u32;
            let mut gen = 0u32;
            let mut params = [arg(&mut ptr), arg(&mut words), arg(&mut ssd), arg(&mut gen)];
            // SAFETY: matches bam_fill_pattern(uint64_t, uint64_t, uint32_t, uint32_t); the
            // medium outlives the synchronisation below.
            unsafe {
                self.gpu.launch(
                    self.gpu.fill_pattern,
                    self.gpu.sms * 4,
                    256,
                    0,
                    &stream,
                    &mut params,
                )?
            };
        }
        self.gpu.sync_timeout(&stream, Duration::from_secs(120))
    }

    /// Launches the controller kernel and waits until every block is resident.
    fn start(&mut self) -> Result<()> {
        // The kernel is not running: reset the control block (handshake, stop, stall).
        self.tables.write(self.ctl_off, &[SimControl::default()])?;
        let mut view = self.sim_view;
        let mut params = [arg(&mut view)];
        // SAFETY: matches bam_sim_controller(bam_sim_view); every table it points to lives
        // until stop() has seen the kernel finish (Drop calls stop).
        unsafe {
            self.gpu.launch(
                self.gpu.sim_controller,
                self.cfg.sim_sms,
                512,
                self.gpu.sim_smem,
                &self.stream,
                &mut params,
            )?
        };
        self.running = true;
        let t0 = Instant::now();
        loop {
            let started = self.read_control()?.started;
            if started == self.cfg.sim_sms {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(Error::Timeout(format!(
                    "only {started} of {} simulator blocks became resident (is another kernel filling the GPU?)",
                    self.cfg.sim_sms
                )));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Stops the controller kernel (bounded wait).
    pub fn stop(&mut self) -> Result<()> {
        if !self.running {
            return Ok(());
        }
        self.write_control_u32(std::mem::offset_of!(SimControl, stop), 1)?;
        self.running = false;
        self.gpu.sync_timeout(&self.stream, Duration::from_secs(10))
    }

    /// Profile of the controller kernel's warp 0 (cumulative since start; take the
    /// difference of two readings around a job).
    pub fn profile(&self) -> Result<SimProfile> {
        let c = self.read_control()?;
        Ok(SimProfile {
            loops: c.loops,
            cycles: c.reserved[1],
            fetch_cycles: c.reserved[2],
            post_cycles: c.reserved[3],
            commands: c.reserved[4],
        })
    }

    /// Fault injection: a stalled controller stops serving its queues.
    pub fn set_stall(&self, stall: bool) -> Result<()> {
        self.write_control_u32(std::mem::offset_of!(SimControl, stall), stall as u32)
    }

    /// The device-side view that I/O kernels take as a parameter.
    pub fn io_view(&self) -> IoView {
        self.io_view
    }

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// The controllers (host side).
    pub fn controllers(&self) -> &[Controller] {
        &self.controllers
    }

    /// Device pointer of the medium of SSD `i`.
    pub fn medium_ptr(&self, i: usize) -> u64 {
        self.media[i].dev_ptr()
    }

    /// Takes the device-side error log (and clears it).
    pub fn take_errors(&self) -> Result<(u32, Vec<IoError>)> {
        let mut hdr = [ErrorLog::default()];
        self.tables.read(self.errlog_off, &mut hdr)?;
        let n = hdr[0].count.min(hdr[0].capacity) as usize;
        let mut entries = vec![ErrorEntry::default(); n];
        if n > 0 {
            self.tables.read(self.errlog_off + 256, &mut entries)?;
        }
        let count = hdr[0].count;
        hdr[0].flag = 0;
        hdr[0].count = 0;
        self.tables.write(self.errlog_off, &hdr)?;
        Ok((count, entries.iter().map(IoError::from_entry).collect()))
    }

    /// Counters per SSD (published by the controller kernel every ~1000 loops and at exit).
    pub fn counters(&self) -> Result<Vec<SsdCounters>> {
        let mut q = vec![SimQueue::default(); self.nqp];
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

    /// Per-queue doorbell statistics: (SQ doorbells, CQ doorbells, completions) summed.
    pub fn doorbell_stats(&self) -> Result<(u64, u64, u64)> {
        let (mut sq, mut cq, mut c) = (0, 0, 0);
        for i in 0..self.nqp {
            let mut st = [QpState::default()];
            self.qmem
                .read(i * self.layout.size + self.layout.state, &mut st)?;
            sq += st[0].sq_doorbells;
            cq += st[0].cq_doorbells;
            c += st[0].completions;
        }
        Ok((sq, cq, c))
    }

    /// The I/O buffer region.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buf
    }
}

impl Drop for SimArray {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::error!("simulated array: controller kernel did not stop: {e}");
            // The kernel may still touch our memory: leak it rather than free it under it.
            std::mem::forget(std::mem::take(&mut self.media));
        }
    }
}
