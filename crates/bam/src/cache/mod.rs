//! The software cache in GPU memory and `Array<T>` (the BaM dissertation, §5.3 and §6.2).
//!
//! ```no_run
//! # fn main() -> bam::Result<()> {
//! use bam::cache::{io_config, Cache, CacheConfig};
//! use bam::storage::GpuDevice;
//! let gpu = bam::Gpu::new(0)?;
//! let cfg = CacheConfig::new(4096, 65536);
//! // The simulated array; "hostctl:ssds=2" or "kmod:/dev/bam-nvme0,/dev/bam-nvme1" for
//! // the host-side controller or real SSDs: nothing else changes.
//! let device: GpuDevice = "sim:ideal,ssds=4".parse()?;
//! // the queue pairs and buffer slots the cache needs
//! let storage = device.open(&gpu, &io_config(&cfg))?;
//! let cache = Cache::new(storage.io(), cfg)?;
//! let data = cache.alloc::<f32>(1 << 20)?; // placed at the first free LBAs
//! data.load(&vec![1.0f32; 1 << 20], 0)?;
//! // pass data.view() to a kernel taking bam::array<float> ...
//! drop(data); // arrays borrow the cache
//! cache.close()?; // flushes dirty lines, reports errors
//! # Ok(()) }
//! ```
//!
//! The line slots of the cache are the I/O buffer slots of the I/O layer (`io.buf`), the
//! memory the SSDs may DMA into: [`io_config`] sizes them for a cache.
//! Device side: `crates/bam/cuda/include/bam/cache.cuh` and `array.cuh`; design notes in
//! docs/cache.md.

pub mod abi;
mod array;
mod catalog;
mod config;
mod flush;
mod recover;
mod resident;
mod state;

pub use abi::ArrayView;
use array::Placement;
pub use array::{Array, Element};
pub use bam_nvme::catalog::{Dataset, CATALOG_BYTES, MAX_DATASETS, RESERVED_BYTES};
pub use config::{io_config, CacheConfig, CacheStats, FlushReport, Layout};
pub(crate) use flush::{flush_outcome, FlushBook};
pub use recover::CacheRecovery;
pub use resident::Resident;
pub use state::CacheState;

use crate::abi::BAM_CACHE_ERR_RANGE;
use crate::cuda::{DeviceBuffer, Gpu, PersistentKernel, TableLayout};
use crate::error::{Error, IoError, Result};
use crate::io::Access;
use crate::io::{ErrorLog, FillQueueLease, IoArray, PendingErrors, SlotLease};
use abi::*;
use cudarc::driver::CudaStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Statistics shards (one per SM id modulo this).
const NSHARDS: u32 = abi::BAM_CACHE_STAT_SHARDS;

pub(crate) struct Inner {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) mem: DeviceBuffer,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) cfg: CacheConfig,
    pub(crate) slot_bytes: u64,
    /// Every slot: `cfg.slots` lines and the fill service's spares (the descriptor's
    /// nslots).
    pub(crate) nslots: u32,
    pub(crate) data: u64,
    off_arrays: usize,
    pub(crate) off_clock: usize,
    pub(crate) off_stats: usize,
    pub(crate) off_tags: usize,
    off_fill_ctl: usize,
    /// Bound of every cache wait (the descriptor's timeout_ns).
    timeout_ns: u64,
    /// The fill service's kernel (locked: [`Cache::recover`] stops and restarts it).
    service: Mutex<PersistentKernel>,
    /// Live arrays: (id, first LBA, LBAs per SSD, ssd range) for overlap checks.
    pub(crate) live: Mutex<Vec<Option<(u64, u64)>>>,
    /// Held while a dataset is created or removed (read, place, write the catalog).
    pub(crate) catalog: Mutex<()>,
    /// Line words of arrays whose handle is gone but whose lines slots may still name
    /// (write-backs that failed at teardown, lines still pinned): their ids stay reserved
    /// and their descriptors live, and the words are freed with the cache.
    pub(crate) retained: Mutex<Vec<DeviceBuffer>>,
    /// When the SSDs owe an NVMe Flush (see [`FlushBook`]).
    flush_book: Mutex<FlushBook>,
    /// LBA claims of arrays whose lines stay cached after a failed close.
    pub(crate) retained_claims: Mutex<Vec<crate::io::LbaClaim>>,
    /// What resident views hold (`Array::make_resident`).
    pub(crate) resident: Mutex<resident::ResidentBook>,
    /// The cache's own error log (its io view's `errlog`): fills, write-backs, flushes
    /// and the range errors of its arrays log here.
    log: ErrorLog,
    /// Errors drained from `log` that no array has taken yet (errors.rs).
    pending: Mutex<PendingErrors>,
}

impl Inner {
    /// Launches the fill service and waits until every block of it runs: a kernel that
    /// misses before would wait for fills nobody serves (or, on a full GPU, keep the
    /// service from ever becoming resident).
    fn start_service(&self) -> Result<()> {
        let args: (u64,) = (self.mem.ptr(),);
        let (gpu, blocks) = (&self.gpu, self.cfg.fill_blocks);
        let (mem, off_fill_ctl) = (&self.mem, self.off_fill_ctl);
        let mut service = self.service.lock().unwrap_or_else(|e| e.into_inner());
        // A service started again (Cache::recover) begins with no stop asked and no block
        // counted; the ring's tickets go on from where the last one left them.
        mem.write(
            off_fill_ctl + std::mem::offset_of!(FillCtl, stop),
            &[0u32, 0u32],
        )?;
        let r = service.start(
            "the cache's fill service",
            blocks,
            |stream| {
                // SAFETY: matches bam_cache_fill_service(const bam_cache_dev*); the
                // descriptor and everything it points to live until stop_service has seen
                // the kernel finish (Drop stops it, and leaks the memory if it does not
                // stop).
                unsafe {
                    gpu.module(crate::runtime::CACHE)?.launch(
                        stream,
                        "bam_cache_fill_service",
                        blocks,
                        BAM_FILL_SERVICE_THREADS,
                        0,
                        &args,
                    )
                }
            },
            || {
                let mut ctl = [FillCtl::default()];
                mem.read(off_fill_ctl, &mut ctl)?;
                Ok(ctl[0].started)
            },
        );
        drop(service);
        if r.is_err() {
            // Blocks that did start may still run: a service that does not stop counts as
            // running, and its owner leaks what it may touch (Cache::new, Cache's Drop).
            let _ = self.stop_service();
        }
        r
    }

    /// Whether the fill service counts as running (started, and not seen to finish).
    fn service_running(&self) -> bool {
        self.service
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .running()
    }

    /// Asks the fill service to stop and waits (bounded) until it has. No kernel may be
    /// using the cache. The service counts as running until it has been seen to finish.
    fn stop_service(&self) -> Result<()> {
        let (mem, off_stop) = (
            &self.mem,
            self.off_fill_ctl + std::mem::offset_of!(FillCtl, stop),
        );
        // A thread finishing a fill when asked takes up to the I/O timeout.
        let t = Duration::from_nanos(self.timeout_ns) + Duration::from_secs(10);
        self.service
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .stop(|| mem.write(off_stop, &[1u32]), t)
    }
}

/// A cache in GPU memory over the SSDs of an I/O layer (any backend).
pub struct Cache<'a> {
    arr: &'a IoArray,
    pub(crate) inner: Inner,
    closed: bool,
    /// The buffer slots 0..slots that hold the lines (dropped after `inner`).
    _slots: SlotLease<'a>,
    /// The fill service's queue pairs, if the I/O layer had them to spare (dropped after
    /// `inner`, whose drop stops the service).
    _fill_queues: Option<FillQueueLease<'a>>,
}

/// Offsets of the cache's table in GPU memory: its descriptor, the arrays' views right
/// after it (the device finds array `id`'s view at `cache + BAM_CACHE_VIEWS_OFFSET + id *
/// 96` without a load first), the clock hand, the arrays' state, the shards' statistics,
/// the slots' tags, the fill service's spare table right after the tags (one u32 per warp
/// with a spare: its slot, or none; found there without a pointer), its control block,
/// and its request ring.
struct CacheLayout {
    dev: usize,
    clock: usize,
    arrays: usize,
    stats: usize,
    tags: usize,
    spares: usize,
    fill_ctl: usize,
    ring: usize,
    ring_entries: usize,
    bytes: usize,
}

impl CacheLayout {
    /// The layout for `cfg` with `nslots` slots (lines and spares) and `spare` spares, on
    /// a GPU of `sms` SMs.
    fn new(cfg: &CacheConfig, nslots: u32, spare: u32, sms: u32) -> CacheLayout {
        let mut t = TableLayout::new();
        let dev = t.array(1, BAM_CACHE_VIEWS_OFFSET as usize, 1);
        let views = t.of::<ArrayView>(cfg.max_arrays as usize, 1);
        debug_assert_eq!(views, BAM_CACHE_VIEWS_OFFSET as usize);
        let clock = t.array(128, 1, 128);
        let arrays = t.array(64, cfg.max_arrays as usize, 1);
        let stats = t.array(128, NSHARDS as usize, 128);
        let tags = t.array(8, nslots as usize, 128);
        let spares = t.array(4, spare as usize, 1);
        let fill_ctl = t.of::<FillCtl>(1, 128);
        // Twice as many ring entries as threads the GPU can run at once (2,048 threads per
        // SM on every GPU since Volta): a thread has at most one miss posted, and a lane
        // posts at most one read-ahead per miss of its warp, which waits for that miss;
        // so a requester always finds its entry free. Behind each entry's 8 bytes, a u32:
        // the mark of a ticket its requester gave up (a service that stopped taking
        // requests), which the service skips (0: none).
        let ring_entries = (sms as usize * 2048 * 2).next_power_of_two();
        let ring = t.array(8 + 4, ring_entries, 1);
        CacheLayout {
            dev,
            clock,
            arrays,
            stats,
            tags,
            spares,
            fill_ctl,
            ring,
            ring_entries,
            bytes: t.bytes(),
        }
    }
}

impl<'a> Cache<'a> {
    /// Builds a cache of `cfg.slots` lines over `arr`. The I/O buffer must have at
    /// least `slots` slots of at least `line_bytes` (see [`io_config`]);
    /// with [`CacheConfig::io_slots`] of them the fill service also gets its spare slots
    /// ([`CacheConfig::spare_slots`]), with fewer it has as many as there is room for.
    pub fn new(arr: &'a IoArray, cfg: CacheConfig) -> Result<Self> {
        let gpu = arr.gpu().clone();
        let io = arr.io_view();
        let lba = arr.geometry().lba_size;
        cfg.check(io.buf.nslots, io.buf.slot_bytes, lba, gpu.sms)?;
        // The fill service's spares, where the I/O buffer has room for them.
        let spare = cfg.spare_slots().min(io.buf.nslots - cfg.slots);
        let nslots = cfg.slots + spare;
        // Line i lives in slot i: the cache needs the slots from 0.
        let slots = arr.lease_slots(nslots, Some(0))?;
        let at = CacheLayout::new(&cfg, nslots, spare, gpu.sms);
        let mem = DeviceBuffer::zeroed(&gpu, at.bytes)?;
        // The fill service's own queue pairs, one per block and SSD (docs/cache.md, "Fill
        // queues"), if that leaves at least three quarters of each SSD's queue pairs
        // shared: the batches of misses, and every other user, keep most of them (with 16
        // a SSD, as the examples configure, the cache takes none). The view the cache
        // keeps, read after the reservation, leaves them out of default_qp for its other
        // I/O (flushes, write-backs).
        let k = arr.geometry().queues;
        let fill_queues = if cfg.fill_blocks <= k / 4 {
            arr.reserve_fill_queues(cfg.fill_blocks)
        } else {
            None
        };
        // The cache's own error log: its kernels' errors are its (and its arrays').
        let log = arr.new_error_log()?;
        let io = log.view_of(arr.io_view());
        let timeout = cfg
            .timeout
            .map(crate::io::timeout_ns)
            .unwrap_or(io.timeout_ns);
        let dev = CacheDev {
            io,
            data: io.buf.base,
            slot_bytes: io.buf.slot_bytes,
            tags: mem.ptr() + at.tags as u64,
            arrays: mem.ptr() + at.arrays as u64,
            stats: mem.ptr() + at.stats as u64,
            clock: mem.ptr() + at.clock as u64,
            timeout_ns: timeout,
            nslots,
            line_bytes: cfg.line_bytes,
            max_arrays: cfg.max_arrays,
            nshards: NSHARDS,
            slot_shift: io.buf.slot_bytes.trailing_zeros(),
            ring_shift: at.ring_entries.trailing_zeros(),
            ring: mem.ptr() + at.ring as u64,
            fill_ctl: mem.ptr() + at.fill_ctl as u64,
            readahead: cfg.readahead,
            spare_warps: spare,
            fill_qp0: fill_queues.as_ref().map_or(0, |l| l.first),
            fill_qps: fill_queues.as_ref().map_or(0, |l| l.count),
        };
        mem.write(at.dev, &[dev])?;
        // The spares start as the slots after the lines (service warp w holds slot
        // cfg.slots + w), held (LOCK | RESERVED) before the service runs; from then on the
        // service takes each next one itself (cache_service.cuh, take_spare).
        let held = vec![abi::BAM_TAG_LOCK | abi::BAM_TAG_RESERVED; spare as usize];
        mem.write(at.tags + 8 * cfg.slots as usize, &held)?;
        let table: Vec<u32> = (cfg.slots..nslots).collect();
        mem.write(at.spares, &table)?;
        let service = PersistentKernel::new(&gpu)?;
        let inner = Inner {
            stream: gpu.stream()?,
            slot_bytes: io.buf.slot_bytes,
            nslots,
            data: io.buf.base,
            live: Mutex::new(vec![None; cfg.max_arrays as usize]),
            catalog: Mutex::new(()),
            retained: Mutex::new(Vec::new()),
            flush_book: Mutex::new(FlushBook::default()),
            retained_claims: Mutex::new(Vec::new()),
            resident: Mutex::new(resident::ResidentBook::default()),
            log,
            pending: Mutex::new(PendingErrors::default()),
            gpu,
            mem,
            cfg,
            off_arrays: at.arrays,
            off_clock: at.clock,
            off_stats: at.stats,
            off_tags: at.tags,
            off_fill_ctl: at.fill_ctl,
            timeout_ns: timeout,
            service: Mutex::new(service),
        };
        if let Err(e) = inner.start_service() {
            if inner.service_running() {
                let mut inner = inner;
                inner.mem.leak(); // the service may still touch it
                inner.log.leak();
            }
            return Err(e);
        }
        // While the cache lives its service uses the queue pairs: IoArray::recover is
        // refused (Cache::recover stops the service first).
        arr.caches.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(Cache {
            arr,
            inner,
            closed: false,
            _slots: slots,
            _fill_queues: fill_queues,
        })
    }

    /// Queue pairs of each SSD the fill service owns (its fill queues, one per block;
    /// docs/cache.md, "Fill queues"), 0 when the I/O layer had none to spare (fewer than
    /// four times `fill_blocks` queue pairs per SSD, or another cache holds them): then every
    /// fill goes through the shared queues.
    pub fn fill_queues(&self) -> u32 {
        self._fill_queues.as_ref().map_or(0, |l| l.count)
    }

    /// The I/O layer under the cache.
    pub fn io(&self) -> &'a IoArray {
        self.arr
    }

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.inner.gpu
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.inner.cfg
    }

    /// Device address of the `bam_cache_dev`.
    pub fn device_ptr(&self) -> u64 {
        self.inner.mem.ptr()
    }

    /// SMs left for kernels that use the cache: the GPU's, less those the I/O backend
    /// keeps (the simulated controllers) and those of the fill service (one per block).
    /// A kernel that sizes its grid to be resident at once (a grid-stride loop over
    /// `free_sms() * blocks_per_sm` blocks) should count these: blocks beyond them wait
    /// for a second wave.
    pub fn free_sms(&self) -> u32 {
        let reserved = self.arr.geometry().reserved_sms + self.inner.cfg.fill_blocks;
        self.inner.gpu.sms.saturating_sub(reserved).max(1)
    }

    /// A stream for launches that run beside the simulated controllers.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// An array of `n` elements of `T` starting at `start_lba` on each SSD it uses.
    /// When other GPUs share the SSDs, its LBAs are this GPU's alone while it lives
    /// (`io::shared`: the write rule).
    pub fn array<T: Element>(
        &self,
        n: u64,
        start_lba: u64,
        layout: Layout,
    ) -> Result<Array<'_, T>> {
        Array::new(self, n, Placement::At(start_lba), layout, Access::ReadWrite)
    }

    /// An array of `n` elements of `T`, striped over the SSDs, placed for you: at the
    /// lowest LBA (a whole number of lines) where it overlaps none of this cache's arrays
    /// and none of the storage's named datasets ([`Cache::create`]) or their catalog.
    /// Arrays are placed in the order they are made, so a program that makes the same
    /// arrays in the same order over the same storage (a second cache after the first is
    /// closed, the next run) finds the same data at the same places.
    ///
    /// ```no_run
    /// # fn main() -> bam::Result<()> {
    /// use bam::cache::{io_config, Cache, CacheConfig};
    /// let gpu = bam::Gpu::new(0)?;
    /// let cfg = CacheConfig::new(4096, 4096);
    /// let storage = "sim:ideal".parse::<bam::storage::GpuDevice>()?.open(&gpu, &io_config(&cfg))?;
    /// let cache = Cache::new(storage.io(), cfg)?;
    /// let rows = cache.alloc::<u64>(1 << 20)?; // LBAs from 0
    /// let vals = cache.alloc::<f32>(1 << 22)?; // the next free ones
    /// assert!(vals.start_lba() > rows.start_lba());
    /// # Ok(()) }
    /// ```
    pub fn alloc<T: Element>(&self, n: u64) -> Result<Array<'_, T>> {
        self.alloc_as(n, Access::ReadWrite)
    }

    /// [`Cache::alloc`] for a read-only array (see [`Cache::array_read_only`]).
    pub fn alloc_read_only<T: Element>(&self, n: u64) -> Result<Array<'_, T>> {
        self.alloc_as(n, Access::ReadOnly)
    }

    fn alloc_as<T: Element>(&self, n: u64, access: Access) -> Result<Array<'_, T>> {
        let datasets = self.catalog_extents()?;
        Array::new(
            self,
            n,
            Placement::FirstFree(datasets),
            Layout::Stripe,
            access,
        )
    }

    /// A read-only array: its lines are never written back (a kernel's write is reported
    /// as an error at flush or close), and other GPUs sharing the SSDs may hold
    /// read-only arrays over the same LBAs at the same time.
    pub fn array_read_only<T: Element>(
        &self,
        n: u64,
        start_lba: u64,
        layout: Layout,
    ) -> Result<Array<'_, T>> {
        Array::new(self, n, Placement::At(start_lba), layout, Access::ReadOnly)
    }

    pub(crate) fn write_arr(&self, id: u32, d: &CacheArr) -> Result<()> {
        self.inner
            .mem
            .write(self.inner.off_arrays + 64 * id as usize, &[*d])
    }

    /// Sets how many references every line of array `id` holds for resident views (the
    /// descriptor's `resident`: a flush treats a line with exactly these as unpinned).
    pub(crate) fn write_resident_refs(&self, id: u32, refs: u32) -> Result<()> {
        let off =
            self.inner.off_arrays + 64 * id as usize + std::mem::offset_of!(CacheArr, resident);
        self.inner.mem.write(off, &[refs])
    }

    /// Sets array `id`'s placement hint in the table of views (`bam_array_view::place`: 0,
    /// or 1 + the slot line 0 should take), which the fill service reads at every fill.
    pub(crate) fn write_view_place(&self, id: u32, place: u32) -> Result<()> {
        let off = BAM_CACHE_VIEWS_OFFSET as usize
            + std::mem::size_of::<ArrayView>() * id as usize
            + std::mem::offset_of!(ArrayView, place);
        self.inner.mem.write(off, &[place])
    }

    /// Takes the fill service's spare slots back (they become empty; the service's warps
    /// take new ones during their next fills), so that a run of empty slots for a resident
    /// array is not broken by them. Best effort: a spare a warp is using right now stays.
    pub(crate) fn recall_spares(&self) -> Result<()> {
        if self.inner.nslots == self.inner.cfg.slots {
            return Ok(()); // no spares
        }
        let args: (u64,) = (self.device_ptr(),);
        // SAFETY: matches bam_cache_recall_spares(const bam_cache_dev*); the descriptor
        // lives as long as the cache, and the call synchronises.
        unsafe {
            self.inner.gpu.module(crate::runtime::CACHE)?.launch(
                &self.inner.stream,
                "bam_cache_recall_spares",
                1,
                128,
                0,
                &args,
            )?
        };
        self.sync()
    }

    /// The slot tags (`BAM_TAG_*`), as they are now.
    pub(crate) fn read_tags(&self) -> Result<Vec<u64>> {
        let mut tags = vec![0u64; self.inner.nslots as usize];
        self.inner.mem.read(self.inner.off_tags, &mut tags)?;
        Ok(tags)
    }

    /// Publishes array `id`'s view for the device's out-of-line paths, which take (cache,
    /// id) rather than a view (`bam::detail::view_of`).
    pub(crate) fn write_view(&self, id: u32, v: &ArrayView) -> Result<()> {
        self.inner.mem.write(
            BAM_CACHE_VIEWS_OFFSET as usize + std::mem::size_of::<ArrayView>() * id as usize,
            &[*v],
        )
    }

    pub(crate) fn read_arrs(&self) -> Result<Vec<CacheArr>> {
        let mut v = vec![CacheArr::default(); self.inner.cfg.max_arrays as usize];
        self.inner.mem.read(self.inner.off_arrays, &mut v)?;
        Ok(v)
    }

    /// Statistics since creation or the last reset.
    pub fn stats(&self) -> Result<CacheStats> {
        let mut raw = vec![CacheStatsRaw::default(); NSHARDS as usize];
        self.inner.mem.read(self.inner.off_stats, &mut raw)?;
        let mut s = CacheStats {
            hits_counted: self.inner.cfg.count_hits,
            ..CacheStats::default()
        };
        for r in &raw {
            s.accesses += r.accesses;
            s.hits += r.hits;
            s.misses += r.misses;
            s.evictions += r.evictions;
            s.writebacks += r.writebacks;
            s.reads += r.reads;
            s.writes += r.writes;
            s.errors += r.errors;
            s.waits += r.waits;
            s.readaheads += r.readaheads;
        }
        Ok(s)
    }

    /// Device address of the statistics: an [`ArrayView`] whose `stats` is this counts its
    /// accesses and hits whatever [`CacheConfig::count_hits`] says (benchmarks that
    /// compare the two; [`CacheStats::hits_counted`] then still follows the config).
    pub fn stats_device_ptr(&self) -> u64 {
        self.inner.mem.ptr() + self.inner.off_stats as u64
    }

    /// Zeroes the statistics (no kernel may be running on the cache).
    pub fn reset_stats(&self) -> Result<()> {
        self.inner.mem.write(
            self.inner.off_stats,
            &vec![CacheStatsRaw::default(); NSHARDS as usize],
        )
    }

    /// Turns the errors the cache's kernels logged (fills, write-backs, flushes, the
    /// range errors of its arrays) and that no array has taken
    /// ([`Array::check_errors`]) into a typed error; `Ok` when there were none.
    pub fn check_errors(&self) -> Result<()> {
        let (count, errors) = self.take_errors()?;
        if count > 0 {
            return Err(Error::Io { count, errors });
        }
        Ok(())
    }

    /// Takes every error of the cache not yet taken (by it or one of its arrays): how many
    /// there were and the entries still held. Errors logged while it reads stay for the
    /// next call; other logs (the I/O layer's raw jobs, scans) are not touched.
    pub fn take_errors(&self) -> Result<(u32, Vec<IoError>)> {
        let mut p = self.pending_errors()?;
        Ok(p.take_all())
    }

    /// The errors no owner has taken yet, with the log drained into them first.
    pub(crate) fn pending_errors(&self) -> Result<std::sync::MutexGuard<'_, PendingErrors>> {
        let mut p = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.add(self.inner.log.drain()?);
        Ok(p)
    }

    /// Takes the errors of array `id` not yet taken (what its lines' I/O logged, its range
    /// errors): the owner's share of the cache's log ([`Array::take_errors`]).
    pub(crate) fn take_array_errors(&self, id: u32) -> Result<(u32, Vec<IoError>)> {
        let arrs = self.read_arrs()?;
        let Some(a) = arrs.get(id as usize) else {
            return Ok((0, Vec::new()));
        };
        let mut p = self.pending_errors()?;
        Ok(p.take_where(|e| array_owns(id, a, e)))
    }

    /// Gives errors an owner could not return (an array's teardown in its Drop) back to
    /// the cache, where [`Cache::check_errors`] reports them.
    pub(crate) fn keep_errors(&self, e: &Error) {
        if let Error::Io { count, errors } | Error::WriteBack { count, errors, .. } = e {
            self.inner
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .add((*count, errors.clone()));
        }
    }
}

impl Drop for Cache<'_> {
    fn drop(&mut self) {
        if !self.closed {
            // Dirty data must not be lost silently: flush, and report a failure loudly (a
            // destructor cannot return it; call close() to get it as a Result).
            if let Err(e) = self.final_flush() {
                tracing::error!("bam cache dropped: flushing dirty lines failed: {e}");
                eprintln!("bam cache dropped: flushing dirty lines failed: {e}");
            }
        }
        if let Err(e) = self.inner.stop_service() {
            tracing::error!("bam cache: the fill service did not stop: {e}");
            eprintln!("bam cache: the fill service did not stop: {e}");
            // The service may still touch the cache's memory: leak it rather than free
            // it under the kernel.
            self.inner.mem.leak();
            self.inner.log.leak();
            for b in self
                .inner
                .retained
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter_mut()
            {
                b.leak();
            }
            return; // the service may still use the queue pairs: recovery stays refused
        }
        self.arr
            .caches
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Whether error `e` of a cache's log belongs to array `id` (descriptor `a`): a range
/// error that names it, or an I/O error on one of its SSDs inside its LBAs. Protocol
/// violations are the queue's, not an array's.
fn array_owns(id: u32, a: &CacheArr, e: &IoError) -> bool {
    use crate::error::IoErrorKind;
    if e.cid == 0xffff && e.kind == IoErrorKind::Invalid && e.detail == BAM_CACHE_ERR_RANGE {
        return e.qid as u32 == id;
    }
    if e.kind == IoErrorKind::Protocol {
        return false;
    }
    let ssd = e.ssd as u32;
    if ssd < a.first_ssd || ssd - a.first_ssd >= a.nssd {
        return false;
    }
    let per_ssd = if a.layout == BAM_LAYOUT_REPLICATE {
        a.nlines
    } else {
        a.nlines.div_ceil(a.nssd.max(1) as u64)
    };
    let end = a
        .start_lba
        .saturating_add(per_ssd.saturating_mul(a.line_lbas as u64));
    (a.start_lba..end).contains(&e.lba)
}

#[cfg(test)]
mod owner_tests {
    use super::*;
    use crate::error::IoErrorKind;

    fn err(kind: IoErrorKind, ssd: u16, qid: u16, cid: u16, lba: u64, detail: u32) -> IoError {
        IoError {
            kind,
            ssd,
            qid,
            cid,
            opcode: 2,
            lba,
            nlb: 8,
            time_ns: 0,
            detail,
        }
    }

    /// An array's share of its cache's log: its SSDs and LBAs, its range errors.
    #[test]
    fn an_array_owns_its_lbas_and_its_range_errors() {
        let stripe = CacheArr {
            nlines: 10,
            start_lba: 100,
            line_lbas: 8,
            layout: BAM_LAYOUT_STRIPE,
            first_ssd: 1,
            nssd: 2,
            ..Default::default()
        };
        let nvme = IoErrorKind::Timeout;
        // Five lines a SSD: LBAs 100..140 on SSDs 1 and 2.
        assert!(array_owns(3, &stripe, &err(nvme.clone(), 1, 4, 7, 100, 0)));
        assert!(array_owns(3, &stripe, &err(nvme.clone(), 2, 4, 7, 139, 0)));
        assert!(!array_owns(3, &stripe, &err(nvme.clone(), 2, 4, 7, 140, 0)));
        assert!(!array_owns(3, &stripe, &err(nvme.clone(), 0, 4, 7, 100, 0)));
        assert!(!array_owns(3, &stripe, &err(nvme.clone(), 3, 4, 7, 100, 0)));
        assert!(!array_owns(3, &stripe, &err(nvme.clone(), 1, 4, 7, 99, 0)));
        // Every SSD holds every line of a replicated array.
        let rep = CacheArr {
            layout: BAM_LAYOUT_REPLICATE,
            ..stripe
        };
        assert!(array_owns(3, &rep, &err(nvme.clone(), 2, 4, 7, 179, 0)));
        assert!(!array_owns(3, &rep, &err(nvme, 2, 4, 7, 180, 0)));
        // Range errors name the array in their qid; protocol violations are the queue's.
        let range = |qid| err(IoErrorKind::Invalid, 0, qid, 0xffff, 5, BAM_CACHE_ERR_RANGE);
        assert!(array_owns(3, &stripe, &range(3)));
        assert!(!array_owns(4, &stripe, &range(3)));
        assert!(!array_owns(
            3,
            &stripe,
            &err(IoErrorKind::Protocol, 1, 4, 7, 100, 0)
        ));
    }

    /// Pending errors: an owner takes its own, the rest (and the lost count) stay.
    #[test]
    fn pending_errors_are_taken_by_their_owner_once() {
        let mut p = PendingErrors::default();
        let e = |lba| err(IoErrorKind::Timeout, 0, 1, 1, lba, 0);
        p.add((5, vec![e(1), e(2), e(3)]));
        assert_eq!(p.take_where(|x| x.lba == 2), (1, vec![e(2)]));
        assert_eq!(p.take_where(|x| x.lba == 2), (0, vec![]));
        // Two lost (counted, no entry) stay with the cache's share.
        assert_eq!(p.take_all(), (4, vec![e(1), e(3)]));
        assert_eq!(p.take_all(), (0, vec![]));
    }
}
