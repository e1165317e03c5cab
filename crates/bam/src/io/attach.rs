//! Attaching controllers to GPU-resident queues and buffers, without CUDA.
//!
//! Given brought-up-able controllers (their transports), the device addresses of the
//! queue memory and of the I/O buffer region, this makes both regions reachable by every
//! controller (`Transport::map_gpu`), brings each controller up, creates its I/O queue
//! pairs at the bus addresses the mapping returned, and computes everything the device
//! library reads: one `bam_qp_view` per queue pair, one `bam_ssd_view` per controller,
//! the buffer view with its IOVA table and PRP lists.
//!
//! It touches no GPU memory itself (the caller writes the tables), so the same code runs
//! on the GPU machine ([`super::IoArray`]) and in the QEMU test guest, where "GPU memory"
//! is the kernel module's test stand-in and the controller is QEMU's.

use super::config::IoConfig;
use crate::abi::{BufView, QpView, SsdView, BAM_QP_F_MMIO};
use crate::cuda::layout::{round_up, TableLayout};
use crate::error::{Error, Result};
use bam_nvme::transport::GpuMapping;
use bam_nvme::{Controller, ControllerOptions, RawQueuePair, Transport};
use std::sync::Arc;

/// GPU page size of nvidia_p2p mappings: queue and buffer regions start on one.
pub const GPU_PAGE: u64 = 64 << 10;

/// Controller memory page size used for queues and PRPs (CC.MPS = 0).
const PAGE: u64 = 4096;

/// How GPU threads reach one controller, and the controller itself.
pub struct ControllerLink {
    /// The controller's transport (registers, admin memory, mapping of GPU memory).
    pub transport: Arc<dyn Transport>,
    /// Device address at which GPU threads see the controller's BAR0: doorbell offsets
    /// are added to it.
    pub doorbells: u64,
    /// Bytes of BAR0 visible there.
    pub doorbells_len: usize,
    /// The doorbells are across PCIe (a real BAR, or a host page a CPU-side controller
    /// polls): GPU threads order them with system-scope fences (`BAM_QP_F_MMIO`).
    pub mmio: bool,
}

impl ControllerLink {
    /// Where one GPU's threads see this controller's doorbells.
    pub fn window(&self) -> DoorbellWindow {
        DoorbellWindow {
            addr: self.doorbells,
            len: self.doorbells_len,
            mmio: self.mmio,
        }
    }
}

/// Where one GPU's threads see one controller's doorbells (BAR0). Each GPU that shares a
/// controller has its own window: a BAR registered in its context, a host page, or a
/// page of another GPU's memory reached through peer access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorbellWindow {
    /// Device address (in this GPU's address space) of BAR0's first byte.
    pub addr: u64,
    /// Bytes of BAR0 visible there.
    pub len: usize,
    /// Stores cross PCIe or another GPU's link: system-scope fences (`BAM_QP_F_MMIO`).
    pub mmio: bool,
}

/// Offsets of one queue pair's pieces in the queue memory.
#[derive(Clone, Copy, Debug)]
pub struct QpLayout {
    /// Submission queue (`64 * depth` bytes, page aligned).
    pub sq: usize,
    /// Completion queue (`16 * depth` bytes, page aligned).
    pub cq: usize,
    /// The queue protocol's per-entry words.
    pub slots: usize,
    /// `bam_qp_state`.
    pub state: usize,
    /// The backend's scratch memory.
    pub scratch: usize,
    /// Bytes per queue pair (a multiple of 4 KiB).
    pub size: usize,
}

impl QpLayout {
    /// The layout for `depth` entries and `scratch` backend bytes.
    pub fn new(depth: usize, scratch: usize) -> Self {
        let page = PAGE as usize;
        let mut t = TableLayout::new();
        let sq = t.array(64, depth, page);
        let cq = t.array(16, depth, page);
        let slots = t.array(12, depth, 256);
        let state = t.array(128, 1, 256);
        let scratch_off = t.array(1, scratch, 256);
        let size = round_up(t.bytes(), page);
        QpLayout {
            sq,
            cq,
            slots,
            state,
            scratch: scratch_off,
            size,
        }
    }
}

/// Where the queue memory and the I/O buffer region are (device addresses).
#[derive(Clone, Copy, Debug)]
pub struct Regions {
    /// Queue memory: controller `c`'s queue pairs start at `queues + c * queue_stride`.
    pub queues: u64,
    /// Bytes per controller in the queue memory (a multiple of [`GPU_PAGE`]).
    pub queue_stride: u64,
    /// The I/O buffer region: slots, then PRP lists (starts on a [`GPU_PAGE`]).
    pub buf: u64,
}

/// Sizes of the regions [`attach`] needs for `nctrl` controllers.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Per-queue-pair layout.
    pub layout: QpLayout,
    /// Bytes of queue memory per controller (a multiple of [`GPU_PAGE`]).
    pub queue_stride: u64,
    /// Offset of the PRP lists in the buffer region.
    pub prp_off: u64,
    /// Bytes per slot's PRP list (0: slots of at most two pages need none).
    pub prp_stride: u64,
    /// Bytes of the buffer region.
    pub buf_len: u64,
}

impl Sizes {
    /// The sizes for `cfg`.
    pub fn of(cfg: &IoConfig) -> Self {
        let layout = QpLayout::new(cfg.depth as usize, cfg.queue_scratch_bytes);
        let queue_stride = (layout.size as u64 * cfg.queues as u64).next_multiple_of(GPU_PAGE);
        let slot_pages = cfg.slot_bytes.div_ceil(PAGE);
        let prp_stride = if cfg.slot_bytes > 2 * PAGE {
            (slot_pages * 8).next_power_of_two().max(8)
        } else {
            0
        };
        let prp_off = (cfg.slot_bytes * cfg.nslots as u64).next_multiple_of(PAGE);
        let buf_len = prp_off + prp_stride * cfg.nslots as u64;
        Sizes {
            layout,
            queue_stride,
            prp_off,
            prp_stride,
            buf_len,
        }
    }
}

/// The controllers attached to the regions, and the views the device library reads.
pub struct Attached {
    /// The controllers, brought up, with this attachment's I/O queue pairs created.
    pub controllers: Vec<Controller>,
    /// The DMA mappings of the regions (two per controller: queues, then buffer).
    pub mappings: Vec<GpuMapping>,
    /// The queue pairs created for this attachment: (controller index, pair).
    pub queue_pairs: Vec<(usize, RawQueuePair)>,
    /// Bus addresses (SQ, CQ) of each queue pair, for its recreation after a failure.
    pub queue_bus: Vec<(u64, u64)>,
    /// The controllers serve other attachments too (other GPUs): releasing deletes this
    /// attachment's queue pairs instead of relying on the controllers' shutdown.
    pub shared: bool,
    /// One view per queue pair, controller by controller.
    pub qps: Vec<QpView>,
    /// One view per controller.
    pub ssds: Vec<SsdView>,
    /// The buffer view (its `iova_table` is filled in by whoever writes [`Self::iova_table`]
    /// to GPU memory).
    pub buf: BufView,
    /// Bus address of every GPU page of the buffer region, when they are not the device
    /// addresses themselves.
    pub iova_table: Option<Vec<u64>>,
    /// The slots' PRP lists (`prp_stride / 8` entries per slot), to be written at
    /// `buf.prp_off` of the buffer region; empty when slots need none.
    pub prp_lists: Vec<u64>,
    /// Contiguous runs of every mapping, for a controller that translates bus addresses
    /// itself (the simulated one).
    pub regions: Vec<DmaRegion>,
    /// Logical block size shared by every controller.
    pub lba_size: u32,
    /// Smallest namespace, in blocks.
    pub ns_blocks: u64,
}

/// Bus address of device address `dev` inside `m`.
pub fn iova_of(m: &GpuMapping, dev: u64) -> u64 {
    let page = m.page_size as u64;
    let first = m.dev_ptr & !(page - 1);
    m.pages[((dev - first) / page) as usize] + (dev - first) % page
}

/// A contiguous run of GPU memory as a controller reaches it: `len` bytes at bus address
/// `iova`, which are device address `dev` for GPU threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRegion {
    /// Bus address of the first byte.
    pub iova: u64,
    /// Bytes.
    pub len: u64,
    /// Device address of the first byte.
    pub dev: u64,
}

/// Coalesced runs of a mapping.
fn regions_of(m: &GpuMapping) -> Vec<DmaRegion> {
    let page = m.page_size as u64;
    let first = m.dev_ptr & !(page - 1);
    let end = m.dev_ptr + m.len as u64;
    let mut out: Vec<DmaRegion> = Vec::new();
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
        out.push(DmaRegion {
            iova,
            len: hi - lo,
            dev: lo,
        });
    }
    out
}

/// Checks that a mapping covers the whole range with power-of-two pages.
fn check_mapping(m: &GpuMapping, what: &str, device: &str) -> Result<()> {
    let page = m.page_size as u64;
    let first = m.dev_ptr & !page.wrapping_sub(1);
    let need = (m.dev_ptr + m.len as u64 - first).div_ceil(page.max(1));
    if !m.page_size.is_power_of_two()
        || (m.page_size as u64) < PAGE
        || (m.pages.len() as u64) < need
    {
        return Err(Error::InvalidArgument(format!(
            "{device}: the mapping of the {what} has {} pages of {} B for {} B",
            m.pages.len(),
            m.page_size,
            m.len
        )));
    }
    if let Some(p) = m.pages.iter().find(|&&p| p % PAGE != 0) {
        return Err(Error::InvalidArgument(format!(
            "{device}: the {what} maps to bus address {p:#x}, which is not 4 KiB aligned"
        )));
    }
    Ok(())
}

/// Brings every controller up once, asking each for `queue_pairs` I/O queue pairs (the
/// sum over every GPU that will attach queues to it).
pub fn bring_up(transports: &[Arc<dyn Transport>], queue_pairs: u32) -> Result<Vec<Controller>> {
    let want = u16::try_from(queue_pairs)
        .ok()
        .filter(|n| (1..u16::MAX).contains(n))
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{queue_pairs} I/O queue pairs per controller (NVMe allows 1 to 65534)"
            ))
        })?;
    transports
        .iter()
        .map(|t| {
            let opts = ControllerOptions {
                io_queue_pairs: want,
                ..Default::default()
            };
            Ok(Controller::new(t.clone(), opts)?)
        })
        .collect()
}

/// Maps the regions for every controller, brings the controllers up and creates their
/// queue pairs. Nothing is left mapped or created when it fails.
///
/// ```
/// use bam::io::attach::{attach, Regions, Sizes, ControllerLink, GPU_PAGE};
/// use bam::io::IoConfig;
/// use bam_nvme::model::{ModelConfig, ModelTransport};
/// use std::sync::Arc;
/// // A controller model whose I/O queues live "elsewhere" (here: made-up addresses).
/// let mut mc = ModelConfig::ram(1 << 20);
/// mc.external_io_queues = true;
/// let link = ControllerLink {
///     transport: Arc::new(ModelTransport::new(mc.build()?)),
///     doorbells: 0x7000_0000_0000,
///     doorbells_len: 8192,
///     mmio: false,
/// };
/// let cfg = IoConfig { queues: 2, depth: 64, ..IoConfig::new() };
/// let sizes = Sizes::of(&cfg);
/// let regions = Regions { queues: 0x7100_0000_0000, queue_stride: sizes.queue_stride, buf: 0x7200_0000_0000 };
/// let a = attach(vec![link], regions, &cfg)?;
/// assert_eq!(a.qps.len(), 2);
/// assert_eq!(a.qps[1].sq_db, 0x7000_0000_0000 + 0x1000 + 2 * 2 * 4);
/// # Ok::<(), bam::Error>(())
/// ```
pub fn attach(links: Vec<ControllerLink>, regions: Regions, cfg: &IoConfig) -> Result<Attached> {
    cfg.validate()?;
    if links.is_empty() {
        return Err(Error::InvalidArgument("no controller to attach".into()));
    }
    let transports: Vec<_> = links.iter().map(|l| l.transport.clone()).collect();
    let windows: Vec<_> = links.iter().map(ControllerLink::window).collect();
    let controllers = bring_up(&transports, cfg.queues)?;
    attach_queues(&controllers, &windows, regions, cfg, false)
}

/// Attaches one GPU's regions to controllers that are already up (possibly serving
/// other GPUs): maps the regions for every controller, creates this GPU's queue pairs
/// (fresh queue ids: the controller hands them out) and computes the views. `windows[c]`
/// is where this GPU's threads see controller `c`'s doorbells. With `shared`, the
/// queue pairs are deleted again on release (the controllers stay up for the others).
/// Nothing is left mapped or created when it fails.
pub fn attach_queues(
    controllers: &[Controller],
    windows: &[DoorbellWindow],
    regions: Regions,
    cfg: &IoConfig,
    shared: bool,
) -> Result<Attached> {
    cfg.validate()?;
    if controllers.is_empty() || windows.len() != controllers.len() {
        return Err(Error::InvalidArgument(format!(
            "{} controllers with {} doorbell windows: need one window per controller",
            controllers.len(),
            windows.len()
        )));
    }
    let sizes = Sizes::of(cfg);
    if regions.queue_stride < sizes.queue_stride
        || !regions.queues.is_multiple_of(GPU_PAGE)
        || !regions.buf.is_multiple_of(GPU_PAGE)
    {
        return Err(Error::InvalidArgument(
            "queue and buffer regions must start on 64 KiB GPU pages, with room for every queue pair"
                .into(),
        ));
    }
    let layout = sizes.layout;
    let mut out = Attached {
        controllers: Vec::new(),
        mappings: Vec::new(),
        queue_pairs: Vec::new(),
        queue_bus: Vec::new(),
        shared,
        qps: Vec::new(),
        ssds: Vec::new(),
        buf: BufView::default(),
        iova_table: None,
        prp_lists: Vec::new(),
        regions: Vec::new(),
        lba_size: 0,
        ns_blocks: u64::MAX,
    };
    let mut buf_pages: Option<Vec<u64>> = None;
    for (s, (ctrl, link)) in controllers.iter().zip(windows).enumerate() {
        let transport = ctrl.transport();
        let device = transport.describe();
        let qbase = regions.queues + s as u64 * regions.queue_stride;
        let qlen = cfg.queues as usize * layout.size;
        let qmap = transport.map_gpu(qbase, qlen)?;
        check_mapping(&qmap, "queue memory", &device)?;
        let bmap = transport.map_gpu(regions.buf, sizes.buf_len as usize)?;
        check_mapping(&bmap, "I/O buffer", &device)?;
        // The device library has one IOVA table for the buffer: every controller must
        // see it at the same bus addresses (true without an IOMMU, in passthrough mode,
        // and for controllers in one IOMMU domain).
        match &buf_pages {
            None => {
                out.regions.extend(regions_of(&bmap));
                buf_pages = Some(bmap.pages.clone());
                (out.buf, out.iova_table, out.prp_lists) = buffer_view(&bmap, regions, &sizes, cfg);
            }
            Some(p) if *p != bmap.pages || bmap.page_size as u32 != 1 << out.buf.iova_shift => {
                return Err(Error::Platform {
                    what: format!("{device} sees the I/O buffer at other bus addresses than the first controller"),
                    fix: "put the controllers in one IOMMU domain, boot with iommu=pt, or use one controller".into(),
                });
            }
            Some(_) => {}
        }
        out.regions.extend(regions_of(&qmap));
        // The mappings and the controller go into `out` before anything can fail below,
        // so that they are released (queue pairs first: see Drop) on error too.
        out.mappings.push(qmap);
        out.mappings.push(bmap);
        out.controllers.push(ctrl.clone());
        let ns = ctrl.namespace(1)?;
        check_controller(ctrl, &ns, out.lba_size, cfg, &device)?;
        out.lba_size = ns.block_size;
        out.ns_blocks = out.ns_blocks.min(ns.blocks);
        let first_qp = out.qps.len() as u32;
        create_queue_pairs(&mut out, s, ctrl, link, qbase, &layout, cfg, &device)?;
        out.ssds.push(SsdView {
            nlb: ns.blocks,
            nsid: ns.nsid,
            lba_shift: ns.block_size.trailing_zeros(),
            mdts_bytes: u32::try_from(ctrl.max_transfer_bytes()).unwrap_or(u32::MAX),
            nqueues: cfg.queues,
            first_qp,
            reserved: 0,
        });
    }
    Ok(out)
}

/// The buffer view of the I/O buffer region as controller mapping `bmap` sees it, its
/// IOVA table (when bus addresses are not the device addresses) and the slots' PRP lists.
fn buffer_view(
    bmap: &GpuMapping,
    regions: Regions,
    sizes: &Sizes,
    cfg: &IoConfig,
) -> (BufView, Option<Vec<u64>>, Vec<u64>) {
    let first = bmap.dev_ptr & !(bmap.page_size as u64 - 1);
    let identity = bmap
        .pages
        .iter()
        .enumerate()
        .all(|(i, &p)| p == first + (i * bmap.page_size) as u64);
    let iova_table = (!identity).then(|| bmap.pages.clone());
    let buf = BufView {
        base: regions.buf,
        len: sizes.buf_len,
        iova_table: 0,
        slot_bytes: cfg.slot_bytes,
        prp_off: sizes.prp_off,
        iova_shift: bmap.page_size.trailing_zeros(),
        nslots: cfg.nslots,
        prp_stride: sizes.prp_stride as u32,
        page_shift: 12,
        reserved: 0,
    };
    let mut prp_lists = Vec::new();
    if sizes.prp_stride != 0 {
        let per = (sizes.prp_stride / 8) as usize;
        let slot_pages = cfg.slot_bytes.div_ceil(PAGE) as usize;
        prp_lists = vec![0u64; per * cfg.nslots as usize];
        for i in 0..cfg.nslots as usize {
            for j in 0..slot_pages {
                let dev = regions.buf + i as u64 * cfg.slot_bytes + (j as u64) * PAGE;
                prp_lists[i * per + j] = iova_of(bmap, dev);
            }
        }
    }
    (buf, iova_table, prp_lists)
}

/// Checks that controller `ctrl` (namespace `ns`) fits the I/O layer: the block size of
/// the controllers before it (`lba_size`, 0 for the first), blocks no larger than a
/// buffer slot and than its MDTS, the queue depth and the queue pairs it grants.
fn check_controller(
    ctrl: &Controller,
    ns: &bam_nvme::Namespace,
    lba_size: u32,
    cfg: &IoConfig,
    device: &str,
) -> Result<()> {
    if lba_size != 0 && ns.block_size != lba_size {
        return Err(Error::InvalidArgument(format!(
            "{device} has {} B blocks, the first controller {} B; an array needs one block size",
            ns.block_size, lba_size
        )));
    }
    if ns.block_size as u64 > cfg.slot_bytes {
        return Err(Error::InvalidArgument(format!(
            "{device} has {} B blocks, larger than the {} B buffer slots",
            ns.block_size, cfg.slot_bytes
        )));
    }
    let mdts = ctrl.max_transfer_bytes();
    if mdts != 0 && (mdts as u64) < ns.block_size as u64 {
        // Every command would carry 0 blocks (NLB - 1 = 0xFFFF on the wire).
        return Err(Error::InvalidArgument(format!(
            "{device} transfers at most {mdts} B a command (MDTS), less than one of its {} B blocks",
            ns.block_size
        )));
    }
    if cfg.depth > ctrl.max_queue_entries() {
        return Err(Error::InvalidArgument(format!(
            "queue depth {} exceeds the {} entries {device} allows",
            cfg.depth,
            ctrl.max_queue_entries()
        )));
    }
    if (ctrl.io_queue_pairs() as u32) < cfg.queues {
        return Err(Error::InvalidArgument(format!(
            "{} queue pairs per controller; {device} grants {}",
            cfg.queues,
            ctrl.io_queue_pairs()
        )));
    }
    Ok(())
}

/// Creates controller `s`'s queue pairs for this attachment in its queue region (at
/// `qbase`, mapped last into `out.mappings`), with their doorbells in `link`, and adds
/// them and their views to `out` (where they are released on error too).
#[allow(clippy::too_many_arguments)]
fn create_queue_pairs(
    out: &mut Attached,
    s: usize,
    ctrl: &Controller,
    link: &DoorbellWindow,
    qbase: u64,
    layout: &QpLayout,
    cfg: &IoConfig,
    device: &str,
) -> Result<()> {
    let qmap = &out.mappings[out.mappings.len() - 2];
    for q in 0..cfg.queues as usize {
        let base = qbase + (q * layout.size) as u64;
        let (sq, cq) = (base + layout.sq as u64, base + layout.cq as u64);
        let bus = (iova_of(qmap, sq), iova_of(qmap, cq));
        // SAFETY: sq and cq lie in the queue region mapped for this controller (qmap),
        // which outlives the queue pair: out releases controllers before mappings and
        // memory.
        let raw =
            unsafe { ctrl.create_raw_queue_pair(bus.0, bus.1, cfg.depth) }.map_err(
                |e| match e {
                    bam_nvme::Error::TooManyQueues { granted, .. } => {
                        Error::InvalidArgument(format!(
                    "{device} has no free I/O queue pair for this GPU ({granted} granted, all \
                     in use by the GPUs attached before): bring it up for more GPUs"
                ))
                    }
                    e => e.into(),
                },
            )?;
        out.queue_pairs.push((s, raw));
        out.queue_bus.push(bus);
        if raw.sq_doorbell + 4 > link.len || raw.cq_doorbell + 4 > link.len {
            return Err(Error::InvalidArgument(format!(
                "{device}: the doorbells of queue {} lie outside the {} B visible to the GPU",
                raw.qid, link.len
            )));
        }
        out.qps.push(QpView {
            sq,
            cq,
            sq_db: link.addr + raw.sq_doorbell as u64,
            cq_db: link.addr + raw.cq_doorbell as u64,
            state: base + layout.state as u64,
            slots: base + layout.slots as u64,
            depth: cfg.depth,
            qid: raw.qid,
            ssd: s as u16,
            flags: if link.mmio { BAM_QP_F_MMIO } else { 0 },
            reserved: 0,
        });
    }
    Ok(())
}

impl Attached {
    /// Releases everything in the right order: this attachment's queue pairs deleted
    /// (shared controllers) or the controllers shut down (the last holder), so no more
    /// DMA into the regions, then the mappings undone. False when a shared controller
    /// did not confirm the deletion of a queue pair: it may still write into the
    /// regions, whose memory the caller must then never free (the mappings stay too).
    pub fn release(mut self) -> bool {
        self.detach()
    }

    /// Deletes this attachment's queue pairs on shared controllers; when a deletion is
    /// not confirmed, the mappings are kept forever (their memory must stay too).
    /// Idempotent: a second call finds nothing left to delete.
    fn detach(&mut self) -> bool {
        let clean = self.delete_queue_pairs();
        if !clean {
            std::mem::forget(std::mem::take(&mut self.mappings));
        } else if self.shared {
            // This attachment's queue pairs are deleted, so none of its commands can reach
            // its memory any more, while the controllers keep running for the other GPUs:
            // say so, or the kernel module (no strict IOMMU) keeps the memory pinned until
            // the controllers stop, and freeing the GPU memory meanwhile revokes them.
            for m in self.mappings.drain(..) {
                m.release_quiesced();
            }
        }
        clean
    }

    fn delete_queue_pairs(&mut self) -> bool {
        if !self.shared {
            return true;
        }
        let mut clean = true;
        for (c, pair) in self.queue_pairs.drain(..) {
            if let Err(e) = self.controllers[c].delete_raw_queue_pair(pair) {
                tracing::error!(
                    device = %self.controllers[c].transport().describe(),
                    qid = pair.qid,
                    "deleting a queue pair of a shared controller failed: {e}; its memory is leaked"
                );
                clean = false;
            }
        }
        clean
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        // Error paths drop an attachment without release(): its queue pairs on shared
        // controllers go first all the same (fields drop after this: controllers, then
        // mappings).
        self.detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bam_nvme::model::{ModelConfig, ModelTransport};
    use std::time::Duration;

    fn link(bar: u64, lba: u32) -> ControllerLink {
        let mut mc = ModelConfig::ram(4 << 20);
        mc.external_io_queues = true;
        mc.lba_size = lba;
        ControllerLink {
            transport: Arc::new(ModelTransport::new(mc.build().unwrap())),
            doorbells: bar,
            doorbells_len: 8192,
            mmio: true,
        }
    }

    fn regions(cfg: &IoConfig) -> Regions {
        Regions {
            queues: 0x7100_0000_0000,
            queue_stride: Sizes::of(cfg).queue_stride,
            buf: 0x7200_0000_0000,
        }
    }

    #[test]
    fn two_controllers_views() {
        let cfg = IoConfig {
            queues: 3,
            depth: 128,
            slot_bytes: 65536,
            nslots: 16,
            ..IoConfig::new()
        };
        let a = attach(
            vec![link(0x6000_0000_0000, 512), link(0x6000_0001_0000, 512)],
            regions(&cfg),
            &cfg,
        )
        .unwrap();
        assert_eq!(a.controllers.len(), 2);
        assert_eq!(a.mappings.len(), 4);
        assert_eq!(a.qps.len(), 6);
        assert_eq!(a.ssds[1].first_qp, 3);
        assert_eq!(a.qps[4].ssd, 1);
        assert_eq!(a.qps[4].qid, 2);
        assert_eq!(a.qps[4].flags, BAM_QP_F_MMIO);
        assert_eq!(a.qps[4].sq_db, 0x6000_0001_0000 + 0x1000 + 4 * 4);
        let stride = Sizes::of(&cfg).queue_stride;
        assert_eq!(a.qps[3].sq, 0x7100_0000_0000 + stride);
        assert_eq!(a.qps[0].cq % 4096, 0);
        // Identity mapping (the model): no table; 64 KiB slots need PRP lists of 16 pages.
        assert!(a.iova_table.is_none());
        assert_eq!(a.buf.prp_stride, 128);
        assert_eq!(a.prp_lists.len(), 16 * 16);
        assert_eq!(a.prp_lists[16 + 2], 0x7200_0000_0000 + 65536 + 2 * 4096);
        assert_eq!(a.lba_size, 512);
        assert_eq!(a.ns_blocks, 8192);
        // The model saw the queues at the mapped addresses.
        a.release();
    }

    #[test]
    fn two_gpus_share_a_controller() {
        // One controller brought up once; two attachments (two GPUs' regions), each with
        // its own queue ids and doorbells; the second's queue pairs are deleted on
        // release while the first's stay.
        let cfg = IoConfig {
            queues: 2,
            depth: 64,
            ..IoConfig::new()
        };
        let l = link(0x6000_0000_0000, 512);
        let ctrls = bring_up(std::slice::from_ref(&l.transport), 2 * cfg.queues).unwrap();
        let w0 = l.window();
        let w1 = DoorbellWindow {
            addr: 0x6100_0000_0000,
            ..w0
        };
        let r1 = Regions {
            queues: 0x7300_0000_0000,
            buf: 0x7400_0000_0000,
            ..regions(&cfg)
        };
        let a0 = attach_queues(&ctrls, &[w0], regions(&cfg), &cfg, true).unwrap();
        let a1 = attach_queues(&ctrls, &[w1], r1, &cfg, true).unwrap();
        let qids = |a: &Attached| a.qps.iter().map(|q| q.qid).collect::<Vec<_>>();
        assert_eq!(qids(&a0), vec![1, 2]);
        assert_eq!(qids(&a1), vec![3, 4]);
        assert_eq!(a1.qps[0].sq_db, 0x6100_0000_0000 + 0x1000 + 2 * 3 * 4);
        assert_eq!(a1.qps[0].sq, 0x7300_0000_0000);
        // A third GPU finds no free queue pair: a clear error, nothing left behind.
        let r2 = Regions {
            queues: 0x7500_0000_0000,
            buf: 0x7600_0000_0000,
            ..r1
        };
        let e = attach_queues(&ctrls, &[w1], r2, &cfg, true).err().unwrap();
        assert!(e.to_string().contains("no free I/O queue pair"), "{e}");
        assert!(a1.release());
        // Its queue ids are free again for the next GPU.
        let a2 = attach_queues(&ctrls, &[w1], r1, &cfg, true).unwrap();
        assert_eq!(qids(&a2), vec![3, 4]);
        assert!(a2.release());
        assert!(a0.release());
        let e = attach_queues(&ctrls, &[], r1, &cfg, true).err().unwrap();
        assert!(e.to_string().contains("one window per controller"), "{e}");
    }

    #[test]
    fn refuses_mixed_block_sizes_and_bad_regions() {
        let cfg = IoConfig {
            depth: 64,
            ..IoConfig::new()
        };
        let e = attach(
            vec![link(0x6000_0000_0000, 512), link(0x6000_0001_0000, 4096)],
            regions(&cfg),
            &cfg,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("one block size"), "{e}");
        let mut r = regions(&cfg);
        r.buf += 4096;
        assert!(attach(vec![link(0x6000_0000_0000, 512)], r, &cfg).is_err());
        let e = attach(vec![], regions(&cfg), &cfg).err().unwrap();
        assert!(e.to_string().contains("no controller"), "{e}");
    }

    #[test]
    fn doorbells_must_be_visible() {
        let cfg = IoConfig {
            queues: 8,
            depth: 64,
            ..IoConfig::new()
        };
        let mut l = link(0x6000_0000_0000, 512);
        l.doorbells_len = 0x1000 + 8 * 4; // queues 1..=3 only
        let e = attach(vec![l], regions(&cfg), &cfg).err().unwrap();
        assert!(e.to_string().contains("outside"), "{e}");
    }

    /// A controller whose MDTS is smaller than its block size is refused: it would make
    /// every GPU command 65536 blocks long (NLB - 1 of 0) and warp_rw divide by zero.
    #[test]
    fn mdts_below_the_block_size_is_refused() {
        let cfg = IoConfig {
            queues: 2,
            depth: 64,
            slot_bytes: 65536,
            ..IoConfig::new()
        };
        let mut mc = ModelConfig::ram(4 << 20);
        mc.external_io_queues = true;
        mc.lba_size = 16384;
        mc.mdts = 1; // 8 KiB
        let l = ControllerLink {
            transport: Arc::new(ModelTransport::new(mc.build().unwrap())),
            doorbells: 0x6000_0000_0000,
            doorbells_len: 8192,
            mmio: true,
        };
        let e = attach(vec![l], regions(&cfg), &cfg).err().unwrap();
        assert!(e.to_string().contains("MDTS"), "{e}");
    }

    #[test]
    fn config_validation() {
        for c in [
            IoConfig {
                depth: 3,
                ..IoConfig::new()
            },
            IoConfig {
                queues: 0,
                ..IoConfig::new()
            },
            IoConfig {
                slot_bytes: 256,
                ..IoConfig::new()
            },
            IoConfig {
                nslots: 0,
                ..IoConfig::new()
            },
            // Its nanoseconds overflow u64: 18446744073710 ms would wrap to about 448 ns.
            IoConfig {
                timeout: Duration::from_millis(18_446_744_073_710),
                ..IoConfig::new()
            },
            IoConfig {
                timeout: Duration::ZERO,
                ..IoConfig::new()
            },
        ] {
            assert!(c.validate().is_err(), "{c:?}");
        }
        assert!(IoConfig::new().validate().is_ok());
    }

    #[test]
    fn layout_is_page_aligned() {
        let l = QpLayout::new(1024, 16 * 1024 + 8192);
        assert_eq!(l.cq % 4096, 0);
        assert_eq!(l.size % 4096, 0);
        assert!(l.scratch >= l.state + 128);
        let s = Sizes::of(&IoConfig::new());
        assert_eq!(s.queue_stride % GPU_PAGE, 0);
        assert_eq!(s.prp_stride, 0);
    }
}
