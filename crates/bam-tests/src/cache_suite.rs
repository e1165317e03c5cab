//! GPU tests of the cache (run by `bam-cache-tests` and `tests/cache_gpu.rs` when a GPU
//! is present): torture with eviction storms checked byte for byte against a host model
//! of the media, element types and line sizes with partial warps and divergent lanes,
//! a cache smaller than the demand (bounded wait, then an error), injected I/O errors.

use crate::backend::fail;
pub use crate::backend::{Outcome, TestBackend};
use crate::cache_kernels::{check_all, counts, launch_test, sim};
use bam::cache::{Array, ArrayView, Cache, CacheConfig, Element, Layout};
use bam::gpu::{DeviceBuffer, Gpu};
use bam::sim::{Fault, SimArray};
use bam::{Error, IoErrorKind, KernelArgs, KernelParam, Result, Storage};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use bam::pattern::{mix32, pattern_word};

fn rng_seed(seed: u64, tid: u64) -> u64 {
    let mut s = (seed ^ tid.wrapping_mul(0x9e3779b97f4a7c15)) | 1;
    rng_next(&mut s);
    s
}

fn rng_next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545f4914f6cdd1d)
}

/// Element `e`'s value after operation `op` of the torture (0xffff: the initial load).
pub(crate) fn torture_value(e: u64, op: u32) -> u32 {
    (mix32((e as u32) ^ 0x5bd1e995) & 0xffff_0000) | (op & 0xffff)
}

/// Replays the torture kernel's operations (`threads` threads, `ops` each, over the
/// `vals.len()` elements) on the host model `vals`; returns the element accesses they
/// make (a store, or 4 reads through array_ref / 1 through a[i]).
pub(crate) fn torture_replay(
    vals: &mut [u32],
    threads: u64,
    ops: u64,
    seed: u64,
    use_ref: bool,
) -> u64 {
    let n = vals.len() as u64;
    let t = threads;
    let mut accesses = 0u64;
    for tid in 0..t {
        let mut rng = rng_seed(seed, tid);
        let owned = if tid < n { (n - tid).div_ceil(t) } else { 0 };
        for k in 0..ops {
            let r = rng_next(&mut rng);
            if (r & 3) < 2 {
                if owned > 0 {
                    let e = tid + ((r >> 8) % owned) * t;
                    vals[e as usize] = torture_value(e, k as u32);
                    accesses += 1;
                }
            } else {
                accesses += if use_ref { 4 } else { 1 };
            }
        }
    }
    accesses
}

/// The media as the host model expects them: the fresh pattern, with `arrays` bytes
/// (stripe or replicate layout) laid over it.
struct MediaModel {
    ssds: Vec<Vec<u8>>,
}

impl MediaModel {
    fn fresh(arr: &dyn Storage) -> Self {
        let geo = arr.io().geometry();
        let cap = geo.capacity_bytes() as usize;
        let ssds = (0..geo.ssds)
            .map(|s| {
                let mut v = vec![0u8; cap];
                for (w, c) in v.chunks_exact_mut(4).enumerate() {
                    c.copy_from_slice(&pattern_word(s, w as u64, 0).to_le_bytes());
                }
                v
            })
            .collect();
        MediaModel { ssds }
    }

    /// Puts an array's bytes (`bytes` of the whole array) on the model media.
    fn lay<T: Element>(
        &mut self,
        a: &Array<T>,
        layout: Layout,
        lba: u64,
        line: usize,
        bytes: &[u8],
    ) {
        let n = self.ssds.len();
        let start = (a.start_lba() * lba) as usize;
        for (l, chunk) in bytes.chunks(line).enumerate() {
            match layout {
                Layout::Stripe => {
                    let off = start + (l / n) * line;
                    self.ssds[l % n][off..off + chunk.len()].copy_from_slice(chunk);
                }
                Layout::Replicate => {
                    for s in &mut self.ssds {
                        s[start + l * line..start + l * line + chunk.len()].copy_from_slice(chunk);
                    }
                }
            }
        }
    }

    fn compare(&self, arr: &dyn Storage) -> Result<()> {
        for (s, want) in self.ssds.iter().enumerate() {
            let mut got = vec![0u8; want.len()];
            arr.read_medium(s, 0, &mut got)?;
            if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
                let diff = got.iter().zip(want).filter(|(a, b)| a != b).count();
                return fail(format!(
                    "SSD {s}: {diff} byte(s) differ from the model, first at byte {i}"
                ));
            }
        }
        Ok(())
    }
}

fn bytes_of<T: Element>(v: &[T]) -> &[u8] {
    bam::abi::as_bytes(v)
}

/// One block of 32 threads: thread t < elems.len() reads element elems[t] of `view`
/// (`bam_cache_read_at_u32`, the pattern of SSD 0 from word 0); returns (failed reads,
/// wrong values). `idx` holds at least elems.len() indices, `res` two counters.
fn read_at(
    cache: &Cache<'_>,
    view: ArrayView,
    elems: &[u64],
    idx: &DeviceBuffer,
    res: &DeviceBuffer,
) -> Result<[u64; 2]> {
    res.write(0, &[0u64, 0])?;
    idx.write(0, elems)?;
    let args: (ArrayView, u64, u32, u32, u64, u64) =
        (view, idx.ptr(), elems.len() as u32, 0, 0, res.ptr());
    // SAFETY: matches bam_cache_read_at_u32(bam_array_view, const uint64_t*, uint32_t,
    // uint32_t, uint64_t, unsigned long long*); the buffers outlive cache.sync().
    unsafe { launch_test(cache, "bam_cache_read_at_u32", 1, 32, &args)? };
    cache.sync()?;
    counts(res)
}

/// One block of 32 threads: thread t < elems.len() stores elems[t] ^ x to element
/// elems[t] of `view` and reads it back (`bam_cache_store_at_u32`); returns (failed
/// stores, failed or wrong read-backs).
fn store_at(
    cache: &Cache<'_>,
    view: ArrayView,
    elems: &[u64],
    x: u32,
    idx: &DeviceBuffer,
    res: &DeviceBuffer,
) -> Result<[u64; 2]> {
    res.write(0, &[0u64, 0])?;
    idx.write(0, elems)?;
    let args: (ArrayView, u64, u32, u32, u64) = (view, idx.ptr(), elems.len() as u32, x, res.ptr());
    // SAFETY: matches bam_cache_store_at_u32(bam_array_view, const uint64_t*, uint32_t,
    // uint32_t, unsigned long long*); the buffers outlive cache.sync().
    unsafe { launch_test(cache, "bam_cache_store_at_u32", 1, 32, &args)? };
    cache.sync()?;
    counts(res)
}

/// Shape of a torture run.
#[derive(Clone, Copy, Debug)]
pub struct TortureShape {
    /// Grid.
    pub blocks: u32,
    /// Threads per block.
    pub block: u32,
    /// Cache lines (4 KiB).
    pub slots: u32,
    /// Bytes of the u32 array.
    pub data_bytes: u64,
    /// Operations per thread.
    pub ops: u64,
    /// Bound of every cache wait (and of each coalesced access).
    pub timeout: Duration,
    /// Seed of the operations (0: a fixed one per SSD count).
    pub seed: u64,
}

impl TortureShape {
    /// Eviction storm: 64 MiB of data through 2560 lines (10 MiB, 16 % of the data) with
    /// 2048 threads. Reads through `array_ref` keep one line pinned per thread between
    /// operations, so the cache needs more slots than there are threads (docs/cache.md).
    pub fn storm() -> Self {
        TortureShape {
            blocks: 16,
            block: 128,
            slots: 2560,
            data_bytes: 64 << 20,
            ops: 128,
            timeout: Duration::from_secs(5),
            seed: 0,
        }
    }

    /// The same data and cache with 8192 threads doing coalesced accesses only: up to
    /// 8192 lines wanted at once by 256 warps through 2560 slots (no hold-and-wait).
    pub fn storm_coalesced() -> Self {
        TortureShape {
            blocks: 64,
            ops: 64,
            ..Self::storm()
        }
    }

    /// The coalesced storm through a cache large enough for the fill service's spare
    /// slots (CacheConfig::spare_slots: 8192 lines, 128 spares): every miss's fill may
    /// take its warp's spare, and spares are taken again by evicting, dirty lines
    /// included, while 8192 threads read and write 128 MiB.
    pub fn storm_spares() -> Self {
        TortureShape {
            slots: 8192,
            data_bytes: 128 << 20,
            ..Self::storm_coalesced()
        }
    }

    /// The configuration of issue 5's first run: 32768 threads on 192 slots over 12 MiB;
    /// up to 32 lines per warp, 1024 warps. Only the coalesced accesses (which never hold
    /// lines while they wait) can run it; array_ref cannot (one pinned line per thread).
    pub fn oversubscribed() -> Self {
        TortureShape {
            blocks: 128,
            block: 256,
            slots: 192,
            data_bytes: 12 << 20,
            ops: 4,
            timeout: Duration::from_secs(10),
            seed: 0,
        }
    }
}

/// Launches a test kernel on the cache's stream and waits for it, bounded by `limit`.
/// A kernel still running after that cannot be stopped from here (and the drops would
/// queue their flushes behind it): print what the cache counted and end the process.
///
/// # Safety
/// `args` must have the kernel's parameter types and what they point to must outlive
/// the call.
pub(crate) unsafe fn launch_bounded(
    cache: &Cache<'_>,
    name: &str,
    grid: (u32, u32),
    args: &(impl KernelArgs + ?Sized),
    limit: Duration,
    diag: &dyn Fn() -> String,
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { crate::kernels(cache.gpu())?.launch(cache.stream(), name, grid.0, grid.1, 0, args)? };
    if let Err(e) = cache.gpu().sync_timeout(cache.stream(), limit) {
        let stats = cache.stats();
        let state = cache.state().map(|s| s.to_string());
        let errs = cache.take_errors();
        eprintln!("FATAL: {name} did not finish within {limit:?}: {e}; cache stats now {stats:?}; error log {errs:?}");
        println!(
            "FATAL: {name} did not finish within {limit:?}; cache stats {stats:?}; cache state {state:?}; {}",
            diag()
        );
        std::process::exit(3);
    }
    // A finished kernel holds nothing: a reference, busy bit or slot lock left behind is
    // a leak that shrinks the cache for good.
    let state = cache.state()?;
    if !state.is_idle() {
        return fail(format!("{name} left the cache holding lines: {state}"));
    }
    Ok(())
}

/// Torture: `shape.blocks * shape.block` threads, `shape.ops` operations each, over a
/// cache far smaller than the data; a second array shares the cache. Afterwards the
/// array is read back through the cache, flushed, and every SSD's whole medium is
/// compared byte for byte with a host model.
pub fn torture(
    gpu: &Arc<Gpu>,
    backend: TestBackend,
    ssds: u32,
    layout: Layout,
    use_ref: bool,
    shape: TortureShape,
) -> Result<String> {
    torture_run(gpu, backend, ssds, layout, use_ref, shape).map(|(s, _)| s)
}

/// What one torture run did (all verified).
#[derive(Clone, Copy, Debug, Default)]
pub struct TortureCounts {
    /// Element operations (reads and writes) of the kernel.
    pub ops: u64,
    /// Cache statistics of the kernel.
    pub stats: bam::cache::CacheStats,
    /// Seconds of the kernel.
    pub kernel_s: f64,
}

/// [`torture`], with the counts.
pub fn torture_run(
    gpu: &Arc<Gpu>,
    backend: TestBackend,
    ssds: u32,
    layout: Layout,
    use_ref: bool,
    shape: TortureShape,
) -> Result<(String, TortureCounts)> {
    let line = 4096usize;
    let threads = (shape.blocks * shape.block) as u64;
    if use_ref && threads >= shape.slots as u64 {
        return fail(format!(
            "array_ref pins one line per thread: {threads} threads need more than {} slots",
            shape.slots
        ));
    }
    // Hits counted: the check below compares the counted accesses with the replay's (the
    // other cache tests run with counting off, the default).
    let cfg = CacheConfig {
        timeout: Some(shape.timeout),
        count_hits: true,
        ..CacheConfig::new(line as u32, shape.slots)
    };
    let a_bytes_per_ssd = match layout {
        Layout::Stripe => shape.data_bytes.div_ceil(ssds as u64),
        Layout::Replicate => shape.data_bytes,
    };
    // a at LBA 24 (not line aligned on the medium: offsets are LBAs), b 1 MiB after it.
    let capacity = (a_bytes_per_ssd + (4 << 20)).next_multiple_of(1 << 20);
    let arr = backend.build(gpu, sim(ssds, &cfg, capacity, shape.timeout))?;
    let lba = arr.io().geometry().lba_size as u64;
    if a_bytes_per_ssd % lba != 0 {
        return fail(format!(
            "{a_bytes_per_ssd} bytes per SSD is not a whole number of LBAs"
        ));
    }
    let cache = Cache::new(arr.io(), cfg)?;
    let mut model = MediaModel::fresh(&*arr);
    let n: u64 = shape.data_bytes / 4 / ssds as u64 * ssds as u64;
    let start = 24u64;
    let a = cache.array::<u32>(n, start, layout)?;
    let mut vals: Vec<u32> = (0..n).map(|e| torture_value(e, 0xffff)).collect();
    let t0 = Instant::now();
    a.load(&vals, 0)?;
    // The second array, elsewhere, of another type.
    let b_start = start + (a_bytes_per_ssd + (1 << 20)) / lba;
    let nb = 300_001u64;
    let b = cache.array::<u64>(nb, b_start, Layout::Stripe)?;
    let bvals: Vec<u64> = (0..nb)
        .map(|i| i.wrapping_mul(0x9e3779b97f4a7c15) ^ 0xabcdef)
        .collect();
    b.load(&bvals, 0)?;
    let load_stats = cache.stats()?;
    eprintln!(
        "  torture: loaded {} + {} lines in {:.2} s: {} misses, {} evictions, {} write-backs",
        a.lines(),
        b.lines(),
        t0.elapsed().as_secs_f64(),
        load_stats.misses,
        load_stats.evictions,
        load_stats.writebacks
    );
    cache.reset_stats()?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let seed = if shape.seed == 0 {
        0xfeed_u64 + ssds as u64
    } else {
        shape.seed
    };
    let ops = shape.ops;
    let args: (ArrayView, u64, u64, u32, u64) = (a.view(), ops, seed, use_ref as u32, res.ptr());
    let t1 = Instant::now();
    // SAFETY: matches bam_cache_torture(bam_array_view, uint64_t, uint64_t, uint32_t,
    // unsigned long long*); everything outlives the sync.
    unsafe {
        launch_bounded(
            &cache,
            "bam_cache_torture",
            (shape.blocks, shape.block),
            &args,
            shape.timeout * 2 + Duration::from_secs(30),
            &String::new,
        )?
    };
    let kernel_s = t1.elapsed().as_secs_f64();
    cache.check_errors()?;
    let [bad, failed] = counts(&res)?;
    if bad != 0 || failed != 0 {
        return fail(format!(
            "{bad} reads returned another element's data, {failed} operations failed"
        ));
    }
    let stats = cache.stats()?;
    // Host model: replay every thread's operations.
    let t = threads;
    let accesses = torture_replay(&mut vals, t, ops, seed, use_ref);
    // The statistics count every access (added up per warp on the device), and this
    // cache, far smaller than the data, both hits and misses.
    if stats.accesses != accesses || stats.misses == 0 || stats.hits == 0 {
        return fail(format!(
            "statistics: {} accesses counted for the {accesses} made, {} hits + {} misses",
            stats.accesses, stats.hits, stats.misses
        ));
    }
    // Through the cache first (reads see the dirty lines), then flush and check the media.
    let mut back = vec![0u32; n as usize];
    a.read(0, &mut back)?;
    if let Some(i) = back.iter().zip(&vals).position(|(x, y)| x != y) {
        return fail(format!(
            "element {i} reads {:#x} through the cache, model says {:#x}",
            back[i], vals[i]
        ));
    }
    let flushed = cache.flush()?;
    model.lay(&a, layout, lba, line, bytes_of(&vals));
    model.lay(&b, Layout::Stripe, lba, line, bytes_of(&bvals));
    model.compare(&*arr)?;
    let mut bb = vec![0u64; nb as usize];
    b.read(0, &mut bb)?;
    if bb != bvals {
        return fail("the second array changed".into());
    }
    if stats.evictions == 0 || stats.writebacks == 0 {
        return fail(format!("no eviction storm: {stats:?}"));
    }
    let a_lines = a.lines();
    a.close()?;
    b.close()?;
    cache.close()?;
    let msg = format!(
        "{} ops by {t} threads on {} slots ({a_lines} lines of data) in {kernel_s:.3} s; {} accesses, {} hits, {} misses, {} evictions, {} write-backs, {} waits; flush wrote {} lines; {} MiB x {ssds} of media match the model",
        t * ops, shape.slots, stats.accesses, stats.hits, stats.misses, stats.evictions, stats.writebacks, stats.waits, flushed.written, capacity >> 20
    );
    Ok((
        msg,
        TortureCounts {
            ops: t * ops,
            stats,
            kernel_s,
        },
    ))
}

/// The soak: torture runs (every SSD count, both layouts, array_ref and coalesced reads,
/// a fresh seed each) until `target_ops` element operations are done, each followed by a
/// write-heavy phase ([`soak_write_phase`]: users' loads and GPU stores with write-back,
/// read back and verified), with the injected-media-error and stalled-device tests between
/// every `every` runs. Every run verifies every value through the cache and every byte of
/// the media; the first failure ends the soak with its error.
pub fn soak(
    gpu: &Arc<Gpu>,
    backend: TestBackend,
    target_ops: u64,
    every: u32,
    progress: &mut dyn FnMut(&SoakReport),
) -> Result<SoakReport> {
    crate::kernels(gpu).and_then(|_| bam_bench::kernels(gpu))?;
    let mut r = SoakReport::default();
    let t0 = Instant::now();
    while r.ops < target_ops {
        let k = r.runs;
        let ssds = [1u32, 2, 4][(k % 3) as usize];
        let (layout, use_ref, mut shape) = match k % 4 {
            0 | 2 => (Layout::Stripe, true, TortureShape::storm()),
            1 => (Layout::Replicate, false, TortureShape::storm_coalesced()),
            _ => (Layout::Stripe, false, TortureShape::storm_coalesced()),
        };
        // The host-side controller serves a miss in tens of microseconds: at the simulated
        // array's 32x a torture run there outlasted its 40 s bound (call 29 of
        // benches/results/issue41-integrity).
        shape.ops *= match backend {
            TestBackend::Sim => 32,
            TestBackend::HostCtl => 2,
        };
        shape.seed = 0x50a1_u64.wrapping_mul(k as u64 + 1) | 1;
        let (_, c) = torture_run(gpu, backend, ssds, layout, use_ref, shape)?;
        r.runs += 1;
        r.ops += c.ops;
        r.misses += c.stats.misses;
        r.writebacks += c.stats.writebacks;
        r.evictions += c.stats.evictions;
        r.kernel_s += c.kernel_s;
        let case = soak_write_phase(backend, k);
        let o = crate::bulk::run(gpu, &case, shape.seed);
        if let Some(e) = o.error {
            return fail(format!("write-heavy phase {}: {e}", case.label()));
        }
        r.write_phases += 1;
        r.write_phase_elements += o.checked;
        if every > 0 && r.runs % every == 0 {
            injected_errors(gpu, backend)?;
            stalled_device(gpu, backend)?;
            stalled_writeback(gpu, backend)?;
            r.fault_rounds += 1;
        }
        r.seconds = t0.elapsed().as_secs_f64();
        progress(&r);
    }
    Ok(r)
}

/// The soak's write-heavy phase after torture run `k`: a users' load
/// (`Array::load` + flush + read back) or GPU stores through a quarter cache (write-back
/// at eviction, flush, read back), alternating, over 1, 2 or 4 SSDs, 8 or 32 queues per
/// SSD, 512 B, 4 KiB or 64 KiB lines, both layouts; 256 MB on the simulated array (HBM and
/// host media alternating), 32 MB on the host-side controller.
pub fn soak_write_phase(backend: TestBackend, k: u32) -> crate::bulk::BulkCase {
    use crate::bulk::{BulkCase, Mode};
    let ssds = [1u32, 2, 4][(k % 3) as usize];
    let (device, bytes) = match backend {
        TestBackend::Sim => (
            format!(
                "sim:ideal,ssds={ssds},media={}",
                ["hbm", "host"][(k / 2 % 2) as usize]
            ),
            256_000_000,
        ),
        TestBackend::HostCtl => (format!("hostctl:ssds={ssds}"), 32_000_000),
    };
    BulkCase {
        device,
        queues: [8u32, 32][(k / 3 % 2) as usize],
        depth: 1024,
        line: [512u32, 4096, 65536][(k / 2 % 3) as usize],
        bytes,
        arrays: 1,
        layout: if ssds > 1 && k.is_multiple_of(5) {
            Layout::Replicate
        } else {
            Layout::Stripe
        },
        mode: if k.is_multiple_of(2) {
            Mode::Stores
        } else {
            Mode::Load
        },
        timeout: Duration::from_secs(2),
    }
}

/// Totals of a [`soak`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SoakReport {
    /// Torture runs, each verified.
    pub runs: u32,
    /// Element operations (reads and writes through the cache).
    pub ops: u64,
    /// Line misses: reads from the SSDs.
    pub misses: u64,
    /// Dirty lines written back: writes to the SSDs.
    pub writebacks: u64,
    /// Lines evicted.
    pub evictions: u64,
    /// Rounds of the injected-media-error and stalled-device tests, each passed.
    pub fault_rounds: u32,
    /// Write-heavy phases (users' loads and GPU stores with write-back), each verified.
    pub write_phases: u32,
    /// Elements the write-heavy phases read back and verified.
    pub write_phase_elements: u64,
    /// Seconds in torture kernels.
    pub kernel_s: f64,
    /// Seconds in all.
    pub seconds: f64,
}

/// What kinds of errors a failed kernel logged: cache waits (CID 0xffff) and I/O
/// errors (a queue's CID), by kind, and how many distinct LBAs and queues they name.
fn error_summary(e: &Error) -> String {
    let Error::Io { count, errors } = e else {
        return String::new();
    };
    let mut kinds = std::collections::BTreeMap::<String, u64>::new();
    let mut lbas = std::collections::BTreeSet::new();
    let mut queues = std::collections::BTreeSet::new();
    for x in errors {
        let who = if x.cid == 0xffff { "cache" } else { "io" };
        *kinds
            .entry(format!("{who} {:?} {:#x}", x.kind, x.detail))
            .or_default() += 1;
        lbas.insert(x.lba);
        if x.cid != 0xffff {
            queues.insert(x.qid);
        }
    }
    let t: Vec<u64> = errors.iter().map(|x| x.time_ns).collect();
    let span = t
        .iter()
        .max()
        .zip(t.iter().min())
        .map(|(a, b)| a - b)
        .unwrap_or(0);
    format!(
        "{count} logged, {} kept: {kinds:?}, {} distinct LBAs, I/O queues {queues:?}, logged within {:.3} ms",
        errors.len(),
        lbas.len(),
        span as f64 / 1e6
    )
}

/// make_elem<T> of cache_kernels.cu, as bytes.
fn make_elem(size: usize, i: u64, gen: u32) -> Vec<u8> {
    let words = size.div_ceil(4);
    let mut v = Vec::with_capacity(words * 4);
    for k in 0..words {
        v.extend_from_slice(
            &mix32(
                (i.wrapping_mul(7).wrapping_add(k as u64) as u32) ^ gen.wrapping_mul(0x9e3779b9),
            )
            .to_le_bytes(),
        );
    }
    v.truncate(size);
    v
}

/// Element types, line sizes, partial warps and divergent lanes. `slots_per_warp` slots
/// for each resident warp: 3 runs the array_ref pass too (it pins up to two lines per
/// warp); 1 gives the cache exactly as many slots as resident warps, which only the
/// accesses that never hold a line while they wait can use (coalesced and line-wise).
fn types_case<T: Element + Default>(
    gpu: &Arc<Gpu>,
    backend: TestBackend,
    line: u32,
    slots_per_warp: u32,
) -> Result<String> {
    let size = std::mem::size_of::<T>();
    // 100 threads per block: every block ends with a partial warp (4 lanes). 48 blocks
    // (192 warps) are resident at once next to the simulator's SMs.
    let (blocks, block) = (48u32, 100u32);
    let warps = blocks * block.div_ceil(32);
    let use_ref = slots_per_warp >= 3;
    let slots = slots_per_warp * warps;
    let cfg = CacheConfig::new(line, slots);
    // The data is twice the cache (less for 64 KiB lines).
    let data_bytes = (line as u64 * slots as u64 * 2).min(48 << 20);
    let n = data_bytes / size as u64 - 3; // a partial last line
    let arr = backend.build(
        gpu,
        sim(1, &cfg, data_bytes + (1 << 20), Duration::from_secs(5)),
    )?;
    let lba = arr.io().geometry().lba_size as u64;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<T>(n, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 8 * 16)?;
    let gen = 0x51u32 + size as u32;
    // write and check with partial warps; check again with full warps, which adds the
    // cache-line-aware passes (for_each_element with groups of 4, 16 and 32 lanes, one
    // after the other in the same kernel).
    for (kind, bs) in [("write", block), ("check", block), ("check", 128)] {
        let name = format!("bam_cache_types_{kind}_{size}");
        let t0 = Instant::now();
        // What the threads had finished when a kernel does not end (types_check counts
        // the threads past each pass in res[10..15]).
        let progress = || {
            let mut r = [0u64; 16];
            match res.read(0, &mut r) {
                Ok(()) => format!(
                    "threads past array_ref / a[i] / lines4 / lines16 / lines32: {:?} (of {} per launch)",
                    &r[10..15],
                    blocks * bs
                ),
                Err(e) => format!("progress unreadable: {e}"),
            }
        };
        launch_types(
            &cache,
            size,
            kind == "check",
            a.view(),
            gen,
            use_ref,
            &res,
            (blocks, bs),
            &progress,
        )?;
        eprintln!(
            "  {name} ({blocks} x {bs}): {:.3} s, {:?}",
            t0.elapsed().as_secs_f64(),
            cache.stats()?
        );
        if let Err(e) = cache.check_errors() {
            return fail(format!(
                "{name} ({blocks} x {bs} threads) failed after {:.2} s: {e}; {}",
                t0.elapsed().as_secs_f64(),
                error_summary(&e)
            ));
        }
    }
    let mut r = [0u64; 10];
    res.read(0, &mut r)?;
    let (bad_ref, failed, bad_coal) = (r[0], r[1], r[2]);
    let bad_lines = [r[3], r[8], r[9]];
    if bad_ref + bad_coal + bad_lines.iter().sum::<u64>() != 0 || failed != 0 {
        let pass = [
            "array_ref",
            "a[i]/try_read",
            "lines/4 lanes",
            "lines/16 lanes",
            "lines/32 lanes",
        ]
        .get(r[5] as usize)
        .copied()
        .unwrap_or("?");
        let kind = [
            "not a value this test wrote",
            "the element's overwritten value",
            "a nearby element's value",
        ]
        .get(r[7] as usize)
        .copied()
        .unwrap_or("?");
        // What the element holds now, read through the cache by the host.
        let first = r[4].wrapping_sub(1);
        let mut now = vec![T::default(); 1];
        let now_ok = first < n && a.read(first, &mut now).is_ok();
        let now_bytes = bam::abi::as_bytes(&now).to_vec();
        return fail(format!(
            "wrong values: {bad_ref} via array_ref, {bad_coal} via a[i]/try_read, {} / {} / {} via for_each_element with 4 / 16 / 32 lanes; {failed} failed accesses; first wrong: element {first} ({pass}) read {:#018x} = {kind}; it now reads {} ({})",
            bad_lines[0], bad_lines[1], bad_lines[2], r[6],
            if now_ok { format!("{:02x?}", &now_bytes[..now_bytes.len().min(8)]) } else { "?".into() },
            if now_ok && now_bytes == make_elem(size, first, gen) { "right" } else { "wrong" }
        ));
    }
    cache.flush()?;
    let mut model = MediaModel::fresh(&*arr);
    let mut bytes = Vec::with_capacity(n as usize * size);
    for i in 0..n {
        bytes.extend_from_slice(&make_elem(size, i, gen));
    }
    model.lay(&a, Layout::Stripe, lba, line as usize, &bytes);
    model.compare(&*arr)?;
    let st = cache.stats()?;
    a.close()?;
    cache.close()?;
    Ok(format!("{n} elements of {size} B, {line} B lines, {slots} slots for {warps} resident warps{}; {} misses, {} evictions", if use_ref { " (array_ref pass too)" } else { "" }, st.misses, st.evictions))
}

/// Launches the type matrix's write kernel for `size`-byte elements
/// (bam_cache_types_write_<size>) or, if `check`, its check kernel
/// (bam_cache_types_check_<size>, with the array_ref pass if `use_ref`) over `view` on
/// `grid` (blocks, threads), results in `res` (16 counters), and waits (bounded; `diag`
/// says what the threads had done if it does not end).
#[allow(clippy::too_many_arguments)]
fn launch_types(
    cache: &Cache<'_>,
    size: usize,
    check: bool,
    view: ArrayView,
    gen: u32,
    use_ref: bool,
    res: &DeviceBuffer,
    grid: (u32, u32),
    diag: &dyn Fn() -> String,
) -> Result<()> {
    let name = format!(
        "bam_cache_types_{}_{size}",
        if check { "check" } else { "write" }
    );
    let (v, g, u, r) = (view, gen, use_ref as u32, res.ptr());
    let check_params = [
        KernelParam::new(&v),
        KernelParam::new(&g),
        KernelParam::new(&u),
        KernelParam::new(&r),
    ];
    let write_params = [check_params[0], check_params[1], check_params[3]];
    let params: &[KernelParam] = if check { &check_params } else { &write_params };
    // SAFETY: matches bam_cache_types_write_*(bam_array_view, uint32_t, unsigned long
    // long*) and bam_cache_types_check_*(bam_array_view, uint32_t, uint32_t, unsigned long
    // long*); `v`, `g`, `u`, `r` and `res` live until launch_bounded has synchronised.
    unsafe { launch_bounded(cache, &name, grid, params, Duration::from_secs(60), diag) }
}

/// Runs the type matrix's kernels for 4-byte elements (write, or check with the array_ref
/// pass if `use_ref`) over `view` on 48 blocks of 100 threads (a partial warp in every
/// block); returns (wrong values, failed accesses).
fn types_u32_pass(
    cache: &Cache<'_>,
    view: ArrayView,
    gen: u32,
    check: bool,
    use_ref: bool,
) -> Result<(u64, u64)> {
    let res = DeviceBuffer::zeroed(cache.gpu(), 8 * 16)?;
    launch_types(
        cache,
        4,
        check,
        view,
        gen,
        use_ref,
        &res,
        (48, 100),
        &String::new,
    )?;
    cache.check_errors()?;
    let mut c = [0u64; 10];
    res.read(0, &mut c)?;
    Ok((c[0] + c[2] + c[3] + c[8] + c[9], c[1]))
}

/// Resident views (`Array::make_resident`): stores and reads through the view with
/// partial warps and divergent lanes (the type matrix's kernels, 4-byte elements), the
/// lines staying in their slots while another array larger than the rest of the cache is
/// written and read through it, the dirty lines reaching the SSD at flush, an array larger
/// than the free slots refused with a clear error, and the slots given back at release.
fn resident(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let line = 4096u32;
    let slots = 1024u32;
    let cfg = CacheConfig::new(line, slots);
    let epl = line as u64 / 4;
    // A: 400 lines, the last one partial; B: 1600 lines, more than the 624 slots A leaves.
    let (na, nb) = (400 * epl - 5, 1600 * epl);
    let arr = backend.build(
        gpu,
        sim(1, &cfg, 2800 * line as u64, Duration::from_secs(5)),
    )?;
    let lba = arr.io().geometry().lba_size as u64;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(na, 0, Layout::Stripe)?;
    let b = cache.array::<u32>(nb, 400 * line as u64 / lba, Layout::Stripe)?;
    let (gen_a, gen_b) = (0x7a, 0x7b);
    let r = a.make_resident()?;
    let held = cache.state()?;
    if held.resident != 400 || !held.is_idle() || !r.contiguous() {
        return fail(format!(
            "after make_resident in an empty cache: expected 400 resident slots in one run and nothing else held, got {held} (contiguous: {})",
            r.contiguous()
        ));
    }
    // Stores through the resident view, then reads (a[i], try_read, array_ref, lines).
    let (bad_w, failed_w) = types_u32_pass(&cache, r.view(), gen_a, false, false)?;
    let (bad_r, failed_r) = types_u32_pass(&cache, r.view(), gen_a, true, true)?;
    if bad_w + failed_w + bad_r + failed_r != 0 {
        return fail(format!(
            "resident view: write pass {failed_w} failed; check pass {bad_r} wrong, {failed_r} failed"
        ));
    }
    // B streams through the other slots: misses and evictions, none of A's lines.
    let s0 = cache.stats()?;
    let (bad_b, failed_b) = types_u32_pass(&cache, b.view(), gen_b, false, false)?;
    let (bad_b2, failed_b2) = types_u32_pass(&cache, b.view(), gen_b, true, false)?;
    let s1 = cache.stats()?;
    if bad_b + failed_b + bad_b2 + failed_b2 != 0 || s1.evictions == s0.evictions {
        return fail(format!(
            "array B beside the resident A: {bad_b2} wrong, {} failed, {} evictions (expected some)",
            failed_b + failed_b2,
            s1.evictions - s0.evictions
        ));
    }
    // A is still all there: its resident view reads right, its ordinary view never misses.
    let (bad_a, failed_a) = types_u32_pass(&cache, r.view(), gen_a, true, false)?;
    let (bad_o, failed_o) = types_u32_pass(&cache, a.view(), gen_a, true, false)?;
    let s2 = cache.stats()?;
    if bad_a + failed_a + bad_o + failed_o != 0 || s2.misses != s1.misses {
        return fail(format!(
            "A after B: resident view {bad_a} wrong / {failed_a} failed, ordinary view {bad_o} wrong / {failed_o} failed, {} misses (expected none)",
            s2.misses - s1.misses
        ));
    }
    // An array that needs more slots than are free is refused, holding nothing.
    let c = cache.array::<u32>(700 * epl, 2000 * line as u64 / lba, Layout::Stripe)?;
    let refused = match c.make_resident() {
        Err(Error::InvalidArgument(m)) if m.contains("700 lines") && m.contains("hold 400") => m,
        other => {
            return fail(format!(
                "make_resident of 700 lines beside 400 resident in 1024 slots: expected a refusal, got {:?}",
                other.map(|g| g.view())
            ))
        }
    };
    // Released: the slots come back (the 700 lines fit now), the data reaches the SSD.
    r.release()?;
    let after = cache.state()?;
    // C into a full cache: no run of empty slots, so through the slot table. Its data is
    // the media's pattern (never written).
    let c_res = c.make_resident()?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let word0 = 2000 * line as u64 / 4;
    let args: (ArrayView, u32, u64, u64) = (c_res.view(), 0, word0, res.ptr());
    // SAFETY: matches bam_cache_check_u32(bam_array_view, uint32_t, uint64_t, unsigned long
    // long*); `res` outlives launch_bounded's synchronisation.
    unsafe {
        launch_bounded(
            &cache,
            "bam_cache_check_u32",
            (48, 128),
            &args,
            Duration::from_secs(60),
            &String::new,
        )?
    };
    cache.check_errors()?;
    let [c_failed, c_wrong] = counts(&res)?;
    if c_res.contiguous() || c_failed + c_wrong != 0 {
        return fail(format!(
            "C resident in a full cache: contiguous {} (expected a slot table), {c_failed} failed, {c_wrong} wrong reads",
            c_res.contiguous()
        ));
    }
    c_res.release()?;
    cache.flush()?;
    let mut model = MediaModel::fresh(&*arr);
    for (x, n, gen) in [(&a, na, gen_a), (&b, nb, gen_b)] {
        let mut bytes = Vec::with_capacity(n as usize * 4);
        for i in 0..n {
            bytes.extend_from_slice(&make_elem(4, i, gen));
        }
        model.lay(x, Layout::Stripe, lba, line as usize, &bytes);
    }
    model.compare(&*arr)?;
    if after.resident != 0 || !after.is_idle() {
        return fail(format!(
            "after release: expected nothing resident or held, got {after}"
        ));
    }
    c.close()?;
    b.close()?;
    a.close()?;
    cache.close()?;
    Ok(format!(
        "400 resident lines in one run of slots, written and read through the resident view (partial warps), kept through {} evictions of a 1600-line array, written back at flush; 700 lines resident through a slot table in a full cache, read right; refused: {refused}",
        s1.evictions - s0.evictions
    ))
}

fn pin_hog(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(100)),
        ..CacheConfig::new(4096, 4)
    };
    let arr = backend.build(gpu, sim(1, &cfg, 8 << 20, Duration::from_secs(2)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(1 << 20, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let args: (ArrayView, u64) = (a.view(), res.ptr());
    let t0 = Instant::now();
    // SAFETY: matches bam_cache_pin_hog(bam_array_view, unsigned long long*).
    unsafe { launch_test(&cache, "bam_cache_pin_hog", 8, 128, &args)? };
    cache.sync()?;
    let secs = t0.elapsed().as_secs_f64();
    let [okw, failw] = counts(&res)?;
    let (count, log) = cache.take_errors()?;
    let timeouts = log
        .iter()
        .filter(|e| e.kind == IoErrorKind::Timeout)
        .count();
    if failw == 0 || timeouts == 0 {
        return fail(format!("expected failed acquisitions with timeout errors: {okw} ok, {failw} failed, log {log:?}"));
    }
    a.close()?;
    cache.close()?;
    Ok(format!("{okw} warps got both lines, {failw} failed after a bounded wait; {count} errors logged ({timeouts} timeouts, first: {}); kernel returned in {secs:.2} s", log[0]))
}

fn injected_errors(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig::new(4096, 64);
    let mut c = sim(1, &cfg, 4 << 20, Duration::from_secs(2));
    c.fault = Some(Fault {
        lba: 1003,
        nlb: 2,
        status: 0x281,
        lie: None,
    });
    let arr = backend.build(gpu, c)?;
    let cache = Cache::new(arr.io(), cfg)?;
    let n = (2u64 << 20) / 4;
    let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let [failed, bad] = check_all(&cache, a.view(), 0, 32, &res)?;
    let err = cache.check_errors();
    let Err(Error::Io { count, errors }) = err else {
        return fail(format!("expected a typed I/O error, got {err:?}"));
    };
    // Line 125 (LBAs 1000..1008) holds the faulty LBAs.
    let ok = errors.iter().all(|e| {
        matches!(e.kind, IoErrorKind::Nvme(s) if s.to_field() & 0x7ff == 0x281)
            && e.lba == 1000
            && e.nlb == 8
    });
    if !ok || failed == 0 || bad != 0 {
        return fail(format!(
            "{failed} failed reads, {bad} wrong values, log {errors:?}"
        ));
    }
    if failed != 1024 {
        return fail(format!(
            "{failed} failed reads; the faulty line has 1024 elements"
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "{failed} reads of the faulty line failed, {count} typed errors, first: {}",
        errors[0]
    ))
}

/// Element indices out of range, the bad input a kernel can give `bam::array`: `a[i]` /
/// `try_read` and `store` fail for exactly the lanes whose index is past the end, the
/// other lanes of the same call read and write their elements (partial warps: half a
/// warp, every other lane), each call leaves one log entry (invalid request, "element
/// index out of range", the index of its lowest lane out of range, the opcode), no line
/// stays pinned, and no other element changed. Through each path a view can take: an ordinary view (the lean
/// read), one that counts hits (the general path), one whose lines are found by division
/// (384 elements a line), and a resident view. The arrays end in a partial line.
fn out_of_range(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let mut summary = Vec::new();
    for (what, line, count_hits, resident) in [
        ("ordinary view", 4096u32, false, false),
        ("counting view", 4096, true, false),
        ("384 elements a line", 1536, false, false),
        ("resident view", 4096, false, true),
    ] {
        let cfg = CacheConfig {
            count_hits,
            ..CacheConfig::new(line, 256)
        };
        let epl = line as u64 / 4;
        let n = 100 * epl - 5;
        let arr = backend.build(gpu, sim(1, &cfg, 128 * line as u64, Duration::from_secs(2)))?;
        let cache = Cache::new(arr.io(), cfg)?;
        let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
        let guard = if resident {
            Some(a.make_resident()?)
        } else {
            None
        };
        let view = guard.as_ref().map_or_else(|| a.view(), |g| g.view());
        // One warp each; lane t's index.
        let calls: [(&str, Vec<u64>); 3] = [
            (
                "half a warp past the end",
                (0..32)
                    .map(|t| if t < 16 { n - 16 + t } else { n + t - 16 })
                    .collect(),
            ),
            (
                "a whole warp far out",
                (0..32).map(|t| u64::MAX - 31 + t).collect(),
            ),
            (
                "every other lane out",
                (0..32)
                    .map(|t| if t % 2 == 0 { t * 1000 } else { n + 7 * t })
                    .collect(),
            ),
        ];
        let idx = DeviceBuffer::zeroed(gpu, 8 * 32)?;
        let res = DeviceBuffer::zeroed(gpu, 16)?;
        for (call, lanes) in &calls {
            let out = lanes.iter().filter(|&&i| i >= n).count() as u64;
            let first_out = lanes.iter().copied().find(|&i| i >= n).unwrap_or(0);
            for store in [false, true] {
                let [failed, wrong] = if store {
                    store_at(&cache, view, lanes, 0x5a5a_5a5a, &idx, &res)?
                } else {
                    read_at(&cache, view, lanes, &idx, &res)?
                };
                let (logged, entries) = cache.take_errors()?;
                let op = if store { "store" } else { "read" };
                let entry_ok = entries.len() == 1
                    && matches!(entries[0].kind, IoErrorKind::Invalid)
                    && entries[0].detail == bam::cache::abi::BAM_CACHE_ERR_RANGE
                    && entries[0].cid == 0xffff
                    && entries[0].lba == first_out
                    && entries[0].opcode == if store { 0x01 } else { 0x02 };
                if failed != out || wrong != 0 || logged != 1 || !entry_ok {
                    return fail(format!(
                        "{what}, {call}, {op}: {failed} lanes failed (expected {out}), {wrong} in-range lanes wrong; \
                         {logged} log entries (expected 1: invalid, element index out of range, index {first_out}): {entries:?}"
                    ));
                }
            }
        }
        // (Consumed whole, so that nothing of it outlives the array's close below.)
        guard.map(|g| g.release()).transpose()?;
        let held = cache.state()?;
        if !held.is_idle() {
            return fail(format!(
                "{what}: after the calls, lines are still held: {held}"
            ));
        }
        // Nothing else touched: every element holds the medium's pattern but the 32 that
        // the in-range lanes stored (n - 16 .. n - 1, and 0, 2000, .. 30000).
        let [failed, differ] = check_all(&cache, a.view(), 0, 32, &res)?;
        let (logged, _) = cache.take_errors()?;
        if failed != 0 || differ != 32 || logged != 0 {
            return fail(format!(
                "{what}: reading the whole array afterwards, {failed} reads failed, {differ} elements differ from the medium (expected the 32 stored), {logged} log entries"
            ));
        }
        a.close()?;
        cache.close()?;
        summary.push(what);
    }
    Ok(format!(
        "{}: 3 calls each (half a warp past the end, a whole warp far out, every other lane out), reads and stores",
        summary.join(", ")
    ))
}

/// Read-ahead (issue 14; docs/cache.md, "Read-ahead"). Line FAULTY of the medium fails
/// every read. Lines 390..398 except 398 are read first by lanes that each read another
/// line (such warps never read ahead). Then one full warp reads line 398, misses, finds
/// both neighbours cached and reads lines 399..406 ahead (one grid stride is one line
/// here): 399 is cached already, the read of FAULTY fails on the device (the simulated
/// SSD counts one error status) and must leave no log entry, and 401..406 must be filled.
/// A read of those lines afterwards finds them (no new miss) with the right values; a
/// read of FAULTY itself reads it again and reports the error with its LBA; the array
/// closes cleanly (its read-aheads are all accounted for).
fn readahead(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    const FAULTY: u64 = 400;
    let cfg = CacheConfig {
        readahead: 8,
        ..CacheConfig::new(4096, 256)
    };
    let lba_size = 512u64;
    let line_lbas = cfg.line_bytes as u64 / lba_size;
    let mut c = sim(1, &cfg, 4 << 20, Duration::from_secs(2));
    c.fault = Some(Fault {
        lba: FAULTY * line_lbas + 3,
        nlb: 2,
        status: 0x281,
        lie: None,
    });
    let arr = backend.build(gpu, c)?;
    let Some(simarr) = SimArray::of(&*arr) else {
        return fail("needs the simulated array (fault injection, command counters)".into());
    };
    if arr.io().geometry().lba_size as u64 != lba_size {
        return fail(format!(
            "expected {lba_size}-byte LBAs, the simulated SSD has {}",
            arr.io().geometry().lba_size
        ));
    }
    let cache = Cache::new(arr.io(), cfg.clone())?;
    let epl = cfg.line_bytes as u64 / 4;
    let a = cache.array::<u32>(512 * epl, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let idx = DeviceBuffer::zeroed(gpu, 8 * 32)?;
    // One warp reads the listed elements; returns (failed, wrong).
    let read = |elems: &[u64]| read_at(&cache, a.view(), elems, &idx, &res);
    let line = |l: u64| (0..32).map(|k| l * epl + k * 31).collect::<Vec<u64>>();
    // 1. Neighbours in, one lane per line.
    let warm: Vec<u64> = (390..398).chain([399]).map(|l| l * epl).collect();
    let [f, w] = read(&warm)?;
    cache.check_errors()?;
    let before = cache.stats()?;
    let dev_before = simarr.counters()?[0].errors;
    // 2. A full warp misses line 398 and reads ahead. The read-aheads outlive the kernel:
    // wait (bounded) until the service has done all seven before looking at the log.
    let [f2, w2] = read(&line(398))?;
    let t0 = Instant::now();
    let (mut mid, mut dev_errors) = (cache.stats()?, 0);
    while t0.elapsed() < Duration::from_secs(2) {
        mid = cache.stats()?;
        dev_errors = simarr.counters()?[0].errors - dev_before;
        if mid.readaheads - before.readaheads >= 6 && dev_errors >= 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let quiet = cache.check_errors();
    let ahead = mid.readaheads - before.readaheads;
    if f + w + f2 + w2 != 0 || quiet.is_err() || dev_errors != 1 || ahead != 6 {
        return fail(format!(
            "warm-up {f} failed / {w} wrong, line 398 {f2} failed / {w2} wrong; log after the read-ahead: {quiet:?} (must be empty); device error statuses {dev_errors} (expected 1: the read-ahead of line {FAULTY}); lines read ahead {ahead} (expected 6: 401..406)"
        ));
    }
    // 3. The lines read ahead are there, with the right values: no new miss.
    let [f3, w3] = read(&(401..407).map(|l| l * epl + 7).collect::<Vec<u64>>())?;
    let after = cache.stats()?;
    if f3 + w3 != 0 || after.misses != mid.misses {
        return fail(format!(
            "lines 401..406: {f3} failed, {w3} wrong, {} new misses (expected none)",
            after.misses - mid.misses
        ));
    }
    // 4. The faulty line read by somebody: its own error, with its LBA.
    let [f4, _] = read(&line(FAULTY))?;
    let err = cache.check_errors();
    let Err(Error::Io { errors, .. }) = &err else {
        return fail(format!(
            "reading line {FAULTY}: expected a typed I/O error, got {err:?}"
        ));
    };
    let lba_ok = errors.iter().all(|e| e.lba == FAULTY * line_lbas);
    if f4 != 32 || !lba_ok {
        return fail(format!(
            "reading line {FAULTY}: {f4} of 32 reads failed; log {errors:?}"
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "6 lines read ahead, 1 read-ahead failed on the device without a log entry, the lines read ahead hit with the right values, a read of line {FAULTY} failed with its own error ({})",
        errors[0]
    ))
}

/// An array's teardown whose write-back fails must not lose the line (issue 16): the
/// failed line stays valid and dirty in the cache, `close` says so, `Cache::flush` retries
/// it (and still fails while the fault lasts), and once the fault is gone a flush writes
/// exactly the stored data. Needs the simulated array's run-time fault injection.
fn failed_writeback_at_close(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    const LINES: u64 = 8;
    const FAULTY: u64 = 5;
    const STATUS: u16 = 0x280; // Write Fault (SCT 2h, SC 80h)
    let cfg = CacheConfig::new(4096, 64);
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_secs(2)))?;
    let Some(simarr) = SimArray::of(&*arr) else {
        return fail("needs the simulated array (SimArray::set_fault)".into());
    };
    let lba = arr.io().geometry().lba_size as u64;
    let line = cfg.line_bytes as u64;
    let line_lbas = line / lba;
    let start_lba = 3 * line_lbas; // not at LBA 0, so that offsets are checked too
    let epl = line / 4;
    let n = LINES * epl;
    // The medium as created (pattern generation 0) and the data to store, which differs
    // from it in every word.
    let fresh = |byte: u64| pattern_word(0, byte / 4, 0);
    let base = start_lba * lba;
    let data: Vec<u32> = (0..n)
        .map(|i| fresh(base + 4 * i) ^ (mix32(i as u32 ^ 0x16_0016) | 1))
        .collect();
    // `words` u32 words of the medium from byte `from_byte`.
    let medium = |from_byte: u64, words: u64| -> Result<Vec<u32>> {
        let mut b = vec![0u8; (4 * words) as usize];
        simarr.read_medium(0, from_byte, &mut b)?;
        Ok(b.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    // Which lines of the array hold the stored data / the fresh pattern on the medium.
    let line_states = || -> Result<Vec<&'static str>> {
        let got = medium(base, n)?;
        Ok((0..LINES)
            .map(|l| {
                let r = (l * epl) as usize..((l + 1) * epl) as usize;
                if got[r.clone()] == data[r.clone()] {
                    "stored"
                } else if r.clone().all(|i| got[i] == fresh(base + 4 * i as u64)) {
                    "fresh"
                } else {
                    "other"
                }
            })
            .collect())
    };
    let expect = |what: &str, want: &[&str]| -> Result<()> {
        let got = line_states()?;
        if got != want {
            return fail(format!(
                "{what}: the medium's lines are {got:?}, expected {want:?}"
            ));
        }
        Ok(())
    };
    let fault = Fault {
        lba: start_lba + FAULTY * line_lbas,
        nlb: line_lbas,
        status: STATUS,
        lie: None,
    };
    // The log's entries for the faulty line: its write failed with the injected status.
    let check_log = |what: &str, count: u32, errors: &[bam::IoError]| -> Result<()> {
        let ok = !errors.is_empty()
            && errors.iter().all(|e| {
                matches!(e.kind, IoErrorKind::Nvme(s) if s.to_field() & 0x7ff == STATUS)
                    && e.lba == fault.lba
                    && e.nlb as u64 == line_lbas
                    && e.opcode == 0x01
            });
        if !ok || count as usize != errors.len() {
            return fail(format!(
                "{what}: expected write errors with status {STATUS:#x} at LBA {} only, got {count}: {errors:?}",
                fault.lba
            ));
        }
        Ok(())
    };
    let all = |s: &'static str| vec![s; LINES as usize];
    let mut after_close = all("stored");
    after_close[FAULTY as usize] = "fresh";

    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(n, start_lba, Layout::Stripe)?;
    a.load(&data, 0)?;
    // 64 slots for 8 lines: nothing was evicted, every line is dirty in the cache.
    expect("after the stores", &all("fresh"))?;
    simarr.set_fault(Some(fault))?;
    let (failed, count, errors) = match a.close() {
        Err(Error::WriteBack {
            failed,
            pinned: 0,
            count,
            errors,
            ..
        }) => (failed, count, errors),
        other => {
            return fail(format!(
                "close with a faulty line: expected a write-back error, got {other:?}"
            ))
        }
    };
    if failed != 1 {
        return fail(format!(
            "close: {failed} failed write-backs reported, expected 1"
        ));
    }
    check_log("close", count, &errors)?;
    expect("after close", &after_close)?;
    // The line is still in the cache, alone, valid and unpinned; the array's id and LBAs
    // stay reserved.
    let st = cache.state()?;
    if st.slots - st.empty - st.reserved != 1 || st.evictable != 1 || !st.is_idle() {
        return fail(format!(
            "after close, expected exactly the faulty line in the cache: {st}"
        ));
    }
    if cache.array::<u32>(n, start_lba, Layout::Stripe).is_ok() {
        return fail(
            "the closed array's LBAs were given to a new array while its line is dirty".into(),
        );
    }
    // A flush retries it and still fails while the fault lasts.
    match cache.flush() {
        Err(Error::WriteBack {
            failed: 1,
            pinned: 0,
            count,
            errors,
            ..
        }) => check_log("flush with the fault", count, &errors)?,
        other => {
            return fail(format!(
                "flush with the fault: expected 1 failed write-back, got {other:?}"
            ))
        }
    }
    expect("after the failed flush", &after_close)?;
    // Without the fault the next flush writes it back, and only it.
    simarr.set_fault(None)?;
    let r = cache.flush()?;
    if r.written != 1 || r.dropped != 0 {
        return fail(format!(
            "flush without the fault: {r:?}, expected 1 line written"
        ));
    }
    expect("after the retry", &all("stored"))?;
    // The neighbours of the array are untouched.
    let before = medium(base - line, epl)?;
    let after = medium(base + LINES * line, epl)?;
    let untouched = |from: u64, got: &[u32]| {
        got.iter()
            .enumerate()
            .all(|(i, &w)| w == fresh(from + 4 * i as u64))
    };
    if !untouched(base - line, &before) || !untouched(base + LINES * line, &after) {
        return fail("the lines next to the array changed".into());
    }
    // Now clean: nothing left to write.
    let again = cache.flush()?;
    if again.written != 0 {
        return fail(format!(
            "a second flush wrote {} line(s), expected none",
            again.written
        ));
    }
    let first = errors.first().map(|e| e.to_string()).unwrap_or_default();
    cache.close()?;
    Ok(format!(
        "line {FAULTY} of {LINES}: close reported 1 failed write-back ({first}), the other {} lines written; the line stayed dirty in the cache and a flush failed again; after set_fault(None) a flush wrote it ({} lines now equal the stored data)",
        LINES - 1,
        LINES
    ))
}

/// Flush and close send an NVMe Flush to every SSD once lines were written back (so no
/// written data stays in a volatile write cache), and none when nothing was written.
fn flush_reaches_ssds(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig::new(4096, 256);
    let arr = backend.build(gpu, sim(2, &cfg, 16 << 20, Duration::from_secs(5)))?;
    let flushes =
        |arr: &dyn Storage| -> Result<u64> { Ok(arr.counters()?.iter().map(|c| c.others).sum()) };
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(64 << 10, 0, Layout::Stripe)?;
    let f0 = flushes(&*arr)?;
    let mut back = vec![0u32; 1024];
    a.read(0, &mut back)?;
    cache.flush()?;
    // The simulated array publishes its counters every ~1000 service loops: wait a bit.
    let settle = |want: u64| -> Result<u64> {
        let t0 = Instant::now();
        loop {
            let f = flushes(&*arr)?;
            if f >= want || t0.elapsed() > Duration::from_secs(2) {
                return Ok(f);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let f1 = settle(f0)?;
    if f1 != f0 {
        return fail(format!(
            "a flush after reads only sent {} NVMe Flush(es)",
            f1 - f0
        ));
    }
    a.load(&vec![7u32; 64 << 10], 0)?;
    let r = cache.flush()?;
    let f2 = settle(f1 + 2)?;
    if r.written == 0 || f2 != f1 + 2 {
        return fail(format!(
            "a flush that wrote {} lines sent {} NVMe Flush(es) to 2 SSDs",
            r.written,
            f2 - f1
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "reads only: no Flush; {} lines written back: one Flush per SSD",
        r.written
    ))
}

/// Runs every test once on `backend`. The host-side controller serves a command in tens
/// of microseconds, so on it the torture runs shorter shapes and the type matrix a
/// sample of its cases; every kind of test still runs.
pub fn run_suite(gpu: &Arc<Gpu>, backend: TestBackend) -> Vec<Outcome> {
    let mut out = Vec::new();
    if let Err(e) = crate::kernels(gpu).and_then(|_| bam_bench::kernels(gpu)) {
        out.push(Outcome {
            name: "load the cache kernels".into(),
            result: Err(e),
            seconds: 0.0,
        });
        return out;
    }
    // BAM_CACHE_TEST=substring runs only the tests whose name contains it.
    let filter = std::env::var("BAM_CACHE_TEST").unwrap_or_default();
    let b = backend;
    let full = b == TestBackend::Sim;
    let mut t = |name: &str, f: &dyn Fn() -> Result<String>| {
        let name = format!("[{}] {name}", b.name());
        if !name.contains(filter.as_str()) {
            return;
        }
        let t0 = Instant::now();
        eprintln!("cache test: {name} ...");
        let result = f();
        eprintln!("cache test: {name}: {:?}", result.as_ref().map(|_| "ok"));
        out.push(Outcome {
            name,
            result,
            seconds: t0.elapsed().as_secs_f64(),
        });
    };
    // Shorter storms on the host-side controller: a quarter of the operations.
    let shorter = |mut s: TortureShape| {
        if !full {
            s.ops = (s.ops / 4).max(1);
        }
        s
    };
    let ssd_counts: &[u32] = if full { &[1, 2, 4] } else { &[1, 2] };
    for &ssds in ssd_counts {
        let shape = shorter(TortureShape::storm());
        t(
            &format!(
                "torture, {ssds} SSD(s), stripe, array_ref reads, 2048 threads, 2560 slots, 64 MiB, {} ops/thread",
                shape.ops
            ),
            &|| torture(gpu, b, ssds, Layout::Stripe, true, shape),
        );
    }
    let shape = shorter(TortureShape::storm_coalesced());
    t(
        &format!(
            "torture, 2 SSDs, replicate, coalesced reads, 8192 threads, 2560 slots, 64 MiB, {} ops/thread",
            shape.ops
        ),
        &|| torture(gpu, b, 2, Layout::Replicate, false, shape),
    );
    let shape = shorter(TortureShape::storm_spares());
    t(
        &format!(
            "torture, 2 SSDs, stripe, coalesced reads, 8192 threads, 8192 slots + 128 spare, 128 MiB, {} ops/thread",
            shape.ops
        ),
        &|| torture(gpu, b, 2, Layout::Stripe, false, shape),
    );
    t(
        "torture, 1 SSD, stripe, coalesced reads, 32768 threads, 192 slots, 12 MiB (oversubscribed)",
        &|| torture(gpu, b, 1, Layout::Stripe, false, TortureShape::oversubscribed()),
    );
    let spw: &[u32] = if full { &[3, 1] } else { &[3] };
    for &slots_per_warp in spw {
        let tag = if slots_per_warp == 1 {
            ", slots = resident warps"
        } else {
            ""
        };
        if full {
            t(&format!("types: 1 B, 512 B lines{tag}"), &|| {
                types_case::<u8>(gpu, b, 512, slots_per_warp)
            });
        }
        t(&format!("types: 4 B, 512 B lines{tag}"), &|| {
            types_case::<u32>(gpu, b, 512, slots_per_warp)
        });
        t(&format!("types: 8 B, 64 KiB lines{tag}"), &|| {
            types_case::<u64>(gpu, b, 65536, slots_per_warp)
        });
        if full {
            t(&format!("types: 16 B, 512 B lines{tag}"), &|| {
                types_case::<[u32; 4]>(gpu, b, 512, slots_per_warp)
            });
            t(&format!("types: 16 B, 64 KiB lines{tag}"), &|| {
                types_case::<[u32; 4]>(gpu, b, 65536, slots_per_warp)
            });
            t(&format!("types: 1 B, 64 KiB lines{tag}"), &|| {
                types_case::<u8>(gpu, b, 65536, slots_per_warp)
            });
            t(&format!("types: 24 B, 48 KiB lines{tag}"), &|| {
                types_case::<[u64; 3]>(gpu, b, 49152, slots_per_warp)
            });
        }
        t(&format!("types: 24 B, 1536 B lines{tag}"), &|| {
            types_case::<[u64; 3]>(gpu, b, 1536, slots_per_warp)
        });
        // 384 elements a line, not a power of two: lines are found by division
        // (div_u64_u32 in util.cuh), not by a shift.
        t(&format!("types: 4 B, 1536 B lines{tag}"), &|| {
            types_case::<u32>(gpu, b, 1536, slots_per_warp)
        });
    }
    t(
        "cache smaller than the demand: bounded wait, then an error",
        &|| pin_hog(gpu, b),
    );
    t(
        "resident view: plain reads and stores, lines kept through evictions, written back",
        &|| resident(gpu, b),
    );
    t(
        "spare slots: held by the fill service, no capacity lost, skipped by flushes",
        &|| spare_slots(gpu, b),
    );
    t(
        "injected media error reaches the host as a typed error with its LBA",
        &|| injected_errors(gpu, b),
    );
    t(
        "indices out of range: those lanes fail, one log entry a call, the others read and write, nothing held",
        &|| out_of_range(gpu, b),
    );
    // Tests that need the simulated array's fault switches: SKIPPED on other backends.
    let skipped = |name: &str, needs: &str| {
        if b != TestBackend::Sim && format!("[{}] {name}", b.name()).contains(filter.as_str()) {
            println!("SKIPPED [{}] {name}: needs {needs}", b.name());
        }
        b != TestBackend::Sim
    };
    let name = "read-ahead: lines a scan will read are filled ahead; a failed read-ahead is quiet";
    if !skipped(
        name,
        "the simulated array's fault injection and command counters",
    ) {
        t(name, &|| readahead(gpu, b));
    }
    t(
        "stalled device: a miss ends in a timeout error, not a hang",
        &|| stalled_device(gpu, b),
    );
    t(
        "fill queues: a lone miss's read timed out on a stalled device, later misses and the next cache still read",
        &|| fill_queue_stall(gpu, b),
    );
    t(
        "stalled device at write-back: the lines stay quarantined, reported, never torn",
        &|| stalled_writeback(gpu, b),
    );
    t(
        "flush sends an NVMe Flush to every SSD after write-backs",
        &|| flush_reaches_ssds(gpu, b),
    );
    let name = "failed write-back at array close keeps the dirty line";
    if !skipped(
        name,
        "the simulated array's run-time fault injection (SimArray::set_fault)",
    ) {
        t(name, &|| failed_writeback_at_close(gpu, b));
    }
    t(
        "acquire_line of a line whose first element wraps past 2^64: an empty span, nothing held",
        &|| far_line(gpu, b),
    );
    let name =
        "replicated flush: a replica that failed outright does not hide one the device still holds";
    if !skipped(
        name,
        "the simulated array's per-SSD fault injection (SimArray::set_fault_on)",
    ) {
        t(name, &|| replicated_flush_mixed_failures(gpu, b));
    }
    t(
        "error logs per owner: each array, the cache, a raw job take their own errors",
        &|| crate::error_logs::owners(gpu, b),
    );
    let name = "an array dropped with failed write-backs leaves its errors to Cache::check_errors";
    if !skipped(
        name,
        "the simulated array's run-time fault injection (SimArray::set_fault)",
    ) {
        t(name, &|| crate::error_logs::array_drop_keeps_errors(gpu, b));
    }
    t(
        "Cache::recover: quarantined write-backs written again, quarantined fills emptied",
        &|| crate::recovery::cache_recovers(gpu, b),
    );
    t(
        "slots of a cache dropped while a queue pair is failed wait for the recovery",
        &|| crate::recovery::dropped_cache_slots_wait_for_recovery(gpu, b),
    );
    t(
        "a host wait that ends at its bound leaves the still-running kernel's memory alone",
        &|| crate::cache_races::sync_timeout_keeps_kernel_memory(gpu, b),
    );
    t(
        "a fill-ring ticket its requester gave up is skipped, misses behind it are served",
        &|| crate::cache_races::fill_ticket_given_up(gpu, b),
    );
    t(
        "an unpinned read across a long pause (512 refills into the slot played) is dropped",
        &|| crate::cache_races::unpinned_read_generation_wrap(gpu, b),
    );
    t(
        "resident stores during flushes: every line's last store reaches the SSD",
        &|| crate::cache_races::resident_stores_during_flush(gpu, b),
    );
    for (lie, l) in crate::lies::lies() {
        let name = format!("lying controller ({lie}): reads end in typed errors, no wrong value");
        if !skipped(&name, "the simulated array's lying controller (bam::Lie)") {
            t(&name, &|| crate::lies::cache_case(gpu, b, l));
        }
    }
    out
}

/// The fill service's spare slots (`CacheConfig::spare_slots`): in a cache large enough
/// each service warp holds one (the host sees them as `reserved`, not locked); they cost
/// no capacity (an array exactly the cache's size, read three times, is held whole from
/// the second pass on, the spares beside it); data read through fills that took spares
/// is right; flushes and invalidations pass the spares by; a resident view still gets one
/// run of slots (make_resident recalls the spares).
fn spare_slots(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let (line, slots) = (4096u32, 8192u32);
    let cfg = CacheConfig::new(line, slots);
    let spare = cfg.spare_slots() as u64;
    if spare == 0 {
        return fail(format!("a cache of {slots} lines should get spare slots"));
    }
    let n = slots as u64 * line as u64 / 8;
    let capacity = (n * 8 + (4 << 20)).next_multiple_of(1 << 20);
    let arr = backend.build(gpu, sim(1, &cfg, capacity, Duration::from_secs(5)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    // A new cache: every service warp holds its first spare (the slots after the lines).
    let st = cache.state()?;
    if st.reserved != spare
        || st.slots != slots as u64 + spare
        || st.empty != slots as u64
        || !st.is_idle()
    {
        return fail(format!(
            "a new cache: expected {spare} spares held and {slots} empty slots, got {st}"
        ));
    }
    let a = cache.array::<u64>(n, 0, Layout::Stripe)?;
    let data: Vec<u64> = (0..n).map(|i| rng_next(&mut rng_seed(0x5a5a, i))).collect();
    a.load(&data, 0)?;
    // Written back and dropped: the reads below fill every line from the SSD.
    let inv = a.invalidate()?;
    if inv.written != slots as u64 {
        return fail(format!(
            "invalidate after the load wrote {} lines back, expected {slots}",
            inv.written
        ));
    }
    // Three passes. The first fills every line; on the way a few lines may be evicted
    // (at most one per spare): a warp's first spare (a slot after the lines) gets a line
    // ahead of the clock hand, which later finds that slot occupied and may evict it
    // while a slot it skipped is still empty. The second pass reads those few again
    // (into spares; the next spares are the empty slots, no eviction), and from then on
    // the cache holds every line and every pass hits.
    let mut passes = Vec::new();
    let mut wrong = 0;
    for _ in 0..3 {
        let mut out = vec![0u64; n as usize];
        cache.reset_stats()?;
        a.read(0, &mut out)?;
        passes.push(cache.stats()?);
        wrong += out.iter().zip(&data).filter(|(x, y)| x != y).count();
    }
    let (first, second, third) = (&passes[0], &passes[1], &passes[2]);
    let st = cache.state()?;
    if wrong != 0
        || first.misses != slots as u64
        || first.evictions > spare
        || second.misses > spare
        || second.evictions != 0
        || third.misses != 0
        || third.evictions != 0
        || st.evictable != slots as u64
        || st.reserved == 0
        || st.reserved > spare
        || st.empty + st.reserved != spare
        || !st.is_idle()
    {
        return fail(format!(
            "an array the cache's size read three times: {wrong} wrong values; misses {} / {} / {} (expected {slots}, at most {spare}, 0), evictions {} / {} / {} (expected at most {spare}, 0, 0); state {st} (expected {slots} evictable lines, 1 to {spare} spares held and the other spare slots empty)",
            first.misses, second.misses, third.misses, first.evictions, second.evictions, third.evictions
        ));
    }
    // Make every line dirty again: the flush writes each back once and skips the spares.
    a.load(&data, 0)?;
    let fl = cache.flush()?;
    let st = cache.state()?;
    if fl.written != slots as u64
        || st.reserved == 0
        || st.evictable != slots as u64
        || !st.is_idle()
    {
        return fail(format!(
            "flush: {} lines written (expected {slots}); state after it {st}",
            fl.written
        ));
    }
    // The spares have moved about the cache by now; a resident view of the whole array
    // still gets one run of slots (make_resident recalls the spares first) and reads right.
    let held_before = st.reserved;
    let r = a.make_resident()?;
    let contiguous = r.contiguous();
    let st = cache.state()?;
    r.release()?;
    let mut out = vec![0u64; n as usize];
    a.read(0, &mut out)?;
    let wrong = out.iter().zip(&data).filter(|(x, y)| x != y).count();
    if !contiguous || wrong != 0 {
        return fail(format!(
            "make_resident with {held_before} spares held: contiguous view {contiguous} (expected true), {wrong} wrong values after it; state while resident {st}"
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "{spare} spares on {slots} lines; misses {} / {} / 0 in three passes ({} evictions in the first); flush wrote {}; a resident view of the whole array got one run of slots",
        first.misses, second.misses, first.evictions, fl.written
    ))
}

/// A device that stops answering: misses end in timeout errors within the bound and the
/// kernel returns.
fn stalled_device(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(200)),
        ..CacheConfig::new(4096, 256)
    };
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_millis(200)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    // 16 lines, 64 reads per thread: each miss waits at most the 200 ms bound.
    let n = (64u64 << 10) / 4;
    let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let check = |seed_word: u64| check_all(&cache, a.view(), seed_word, 1, &res);
    arr.set_stall(true)?;
    let t0 = Instant::now();
    let [failed, bad] = check(0)?;
    let secs = t0.elapsed().as_secs_f64();
    let (count, log) = cache.take_errors()?;
    let timeouts = log
        .iter()
        .filter(|e| e.kind == IoErrorKind::Timeout)
        .count();
    arr.set_stall(false)?;
    if failed == 0 || timeouts == 0 || bad != 0 {
        return fail(format!(
            "stalled: {failed} failed reads, {bad} wrong values, {timeouts} timeouts in {count} errors"
        ));
    }
    // The fill service's reads that timed out end a little after the kernel: wait until
    // no line is busy, then every slot such a read went to must be quarantined (its data
    // may still arrive), and nothing else held.
    let t1 = Instant::now();
    let st = loop {
        let st = cache.state()?;
        if st.lines_busy == 0 || t1.elapsed() > Duration::from_secs(5) {
            break st;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if st.quarantined == 0 || !st.is_idle() {
        return fail(format!(
            "stalled: after the timeouts the cache should hold nothing and have quarantined the \
             slots of the timed-out reads: {st}"
        ));
    }
    Ok(format!(
        "stalled device: {failed} reads failed with {timeouts} timeout errors (of {count}), kernel returned in {secs:.2} s; {} slot(s) quarantined",
        st.quarantined
    ))
}

/// The fill queues (a warp's lone request reads on its service block's own queue pair):
/// lone misses read right; one whose read times out on a stalled device fails with a
/// timeout (its slot quarantined), the block's fill queue is left broken, and the lone
/// misses after it still read right (on another block's fill queue or the shared
/// queues). The first cache's slots stay held after its drop (the broken queue pair, now
/// marked failed, may still deliver the late read into one of them) until
/// `IoArray::recover`; then a second cache over the same I/O layer, whose service takes
/// the queue pairs over from the first, reads right too.
fn fill_queue_stall(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(200)),
        ..CacheConfig::new(4096, 256)
    };
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_millis(200)))?;
    let epl = cfg.line_bytes as u64 / 4;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let idx = DeviceBuffer::zeroed(gpu, 8)?;
    // One thread reads element `i` (a lone miss if its line is not cached): (failed, wrong).
    let read_one =
        |cache: &Cache<'_>, a: &Array<'_, u32>, i: u64| read_at(cache, a.view(), &[i], &idx, &res);
    // Lone misses of lines `lines`, one after the other, element `off` of each: summed
    // (failed, wrong).
    let read_lines =
        |cache: &Cache<'_>, a: &Array<'_, u32>, lines: std::ops::Range<u64>, off: u64| {
            let mut sum = [0u64; 2];
            for l in lines {
                let [f, w] = read_one(cache, a, l * epl + off)?;
                sum[0] += f;
                sum[1] += w;
            }
            Ok::<_, Error>(sum)
        };
    let first_pass = {
        let cache = Cache::new(arr.io(), cfg.clone())?;
        if cache.fill_queues() == 0 {
            return fail("a cache over 32 queue pairs per SSD should own fill queues".into());
        }
        let a = cache.array::<u32>(64 * epl, 0, Layout::Stripe)?;
        let ok = read_lines(&cache, &a, 0..4, 5)?;
        cache.check_errors()?;
        arr.set_stall(true)?;
        let [sf, sw] = read_one(&cache, &a, 10 * epl)?;
        let (_, log) = cache.take_errors()?;
        arr.set_stall(false)?;
        let timeouts = log
            .iter()
            .filter(|e| e.kind == IoErrorKind::Timeout)
            .count();
        // The timed-out read ends in the service a little after the kernel.
        let t1 = Instant::now();
        while cache.state()?.lines_busy != 0 && t1.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let after = read_lines(&cache, &a, 20..36, 1)?;
        let late = cache.take_errors()?.1;
        if ok != [0, 0] || sf != 1 || sw != 0 || timeouts == 0 || after != [0, 0] {
            return fail(format!(
                "lone misses before the stall {ok:?} (failed, wrong; expected none), the stalled one {sf} failed / {sw} wrong with {timeouts} timeouts logged (expected 1 failed, a timeout), 16 after it {after:?} (expected none; errors {late:?})"
            ));
        }
        a.close()?;
        cache.close()?;
        ok
    };
    // The first cache's slots wait for the recovery of the queue pair that broke.
    let held = arr.io().held_slots();
    if held.is_empty() || Cache::new(arr.io(), cfg.clone()).is_ok() {
        return fail(format!(
            "the first cache's slots went back with a queue pair failed (held {held:?})"
        ));
    }
    let r = arr.io().recover()?;
    // A second cache takes the queue pairs over from the first.
    let cache = Cache::new(arr.io(), cfg.clone())?;
    let a = cache.array::<u32>(64 * epl, 0, Layout::Stripe)?;
    let second = read_lines(&cache, &a, 40..56, 2)?;
    let errs = cache.take_errors()?.1;
    if second != [0, 0] {
        return fail(format!(
            "a second cache over the same queue pairs: {second:?} (failed, wrong; expected none); errors {errs:?}"
        ));
    }
    let fq = cache.fill_queues();
    a.close()?;
    cache.close()?;
    Ok(format!(
        "{fq} fill queues per SSD; lone misses {first_pass:?} failed/wrong, the stalled one timed out, 16 after it read right; slots held until {} queue pair(s) were recovered, then 16 through a second cache read right",
        r.queue_pairs.len()
    ))
}

/// A device that stops answering while dirty lines are written back. The write-backs time
/// out, and the device may still read their slots for those writes later, so each slot is
/// quarantined with its line (cache_service.cuh, quarantine_writeback): the flush reports
/// every line as failed, the lines can no longer be written (a store that changed a slot
/// under a late write would put torn data on the SSD; before the quarantine such stores
/// succeeded), and once the device runs again each line on the medium is either the
/// stored data (its late write landed) or the old data (never sent), nothing else. Later
/// flushes keep reporting the lines as not settled.
fn stalled_writeback(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    const LINES: u64 = 8;
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(200)),
        ..CacheConfig::new(4096, 64)
    };
    let line = cfg.line_bytes as u64;
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_millis(200)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let epl = line / 4;
    let n = LINES * epl;
    // The medium as created (pattern generation 0) and the data to store, which differs
    // from it in every word.
    let fresh = |byte: u64| pattern_word(0, byte / 4, 0);
    let data: Vec<u32> = (0..n)
        .map(|i| fresh(4 * i) ^ (mix32(i as u32 ^ 0x7b_0016) | 1))
        .collect();
    let line_states = || -> Result<Vec<&'static str>> {
        let mut b = vec![0u8; (4 * n) as usize];
        arr.read_medium(0, 0, &mut b)?;
        let got: Vec<u32> = b
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok((0..LINES)
            .map(|l| {
                let r = (l * epl) as usize..((l + 1) * epl) as usize;
                if got[r.clone()] == data[r.clone()] {
                    "stored"
                } else if r.clone().all(|i| got[i] == fresh(4 * i as u64)) {
                    "fresh"
                } else {
                    "other"
                }
            })
            .collect())
    };
    let line_lbas = line / arr.io().geometry().lba_size as u64;
    let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
    a.load(&data, 0)?;
    arr.set_stall(true)?;
    // The controllers poll the stall switch: give them time to see it. A write-back the
    // device still took completes and leaves its line clean (checked below).
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    let (failed, count, first) = match cache.flush() {
        Err(Error::WriteBack {
            failed,
            count,
            errors,
            ..
        }) => {
            // A line whose write did not settle: the first one named by a write error.
            let first = errors
                .iter()
                .find(|e| e.opcode == 0x01 && e.kind != IoErrorKind::Invalid)
                .map(|e| e.lba / line_lbas);
            (failed, count, first)
        }
        other => {
            arr.set_stall(false)?;
            return fail(format!(
                "flush on a stalled device: expected a write-back error, got {other:?}"
            ));
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let st = cache.state()?;
    let Some(q) = first.filter(|&l| l < LINES) else {
        arr.set_stall(false)?;
        return fail(format!(
            "stalled write-backs: no write error names a line of the array ({failed} failed)"
        ));
    };
    if failed == 0 || st.quarantined_lines != failed || !st.is_idle() {
        arr.set_stall(false)?;
        return fail(format!(
            "stalled write-backs: {failed} failed; every one should be quarantined with its \
             slot and nothing else held: {st}"
        ));
    }
    // Stores into a quarantined line must fail (bounded by the cache timeout), not change
    // the slot the device may still read.
    cache.take_errors()?;
    let range = (q * epl) as usize..((q + 1) * epl) as usize;
    let other: Vec<u32> = data[range].iter().map(|w| !w).collect();
    let store = a.load(&other, q * epl);
    arr.set_stall(false)?;
    match store {
        Err(Error::Io { errors, .. })
            if !errors.is_empty() && errors.iter().all(|e| e.kind == IoErrorKind::Timeout) => {}
        Ok(()) => {
            return fail(
                "stores into lines whose write-back may still be in the device's hands succeeded"
                    .into(),
            )
        }
        Err(e) => {
            return fail(format!(
                "stores into quarantined lines: expected cache timeouts only, got {e:?}"
            ))
        }
    }
    // The device runs again: late writes land. Wait for them, then check the medium.
    std::thread::sleep(Duration::from_millis(500));
    let states = line_states()?;
    if states.contains(&"other") {
        return fail(format!(
            "after the stall the medium's lines are {states:?}: a late write carried changed data"
        ));
    }
    // Every later flush reports the lines as not settled (the data is in the cache): one
    // entry per line. The NVMe Flush owed since the failed flush is sent again and may
    // fail too (the stalled queue failed for good); nothing else may be in the log.
    let quarantined = |errors: &[bam::IoError]| {
        errors
            .iter()
            .filter(|e| e.detail == bam::cache::abi::BAM_CACHE_ERR_QUARANTINED)
            .count() as u64
    };
    let lines = failed;
    match cache.flush() {
        Err(Error::WriteBack { failed, errors, .. })
            if failed == lines
                && quarantined(&errors) == lines
                && errors.iter().all(|e| {
                    e.detail == bam::cache::abi::BAM_CACHE_ERR_QUARANTINED || e.opcode == 0x00
                }) => {}
        other => {
            return fail(format!(
                "flush after the stall: expected {lines} quarantined lines reported, got {other:?}"
            ))
        }
    }
    let landed = states.iter().filter(|s| **s == "stored").count();
    Ok(format!(
        "{lines} of {LINES} write-backs did not settle ({count} errors, flush returned in {secs:.2} s): {lines} lines quarantined with their slots, stores into line {q} failed with timeouts, {landed} line(s) of the medium hold the stored data (late or settled writes) and the rest kept the old data; a later flush reports the {lines} lines as not settled"
    ))
}

/// A replicated line's write-back fails on SSD 0 with a media error (settled) and times
/// out on SSD 1 (the device may still read the slot): the flush must keep the slot
/// quarantined, as eviction does, not unlock it as an ordinary failed write-back (the
/// review's F4). A second flush then reports the line quarantined (not written again).
fn replicated_flush_mixed_failures(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    const LINE: u64 = 5;
    let cfg = CacheConfig::new(4096, 64);
    let timeout = Duration::from_millis(300);
    let arr = backend.build(gpu, sim(2, &cfg, 4 << 20, timeout))?;
    let Some(simarr) = SimArray::of(&*arr) else {
        return fail("needs the simulated array".into());
    };
    let cache = Cache::new(arr.io(), cfg)?;
    let epl = 1024u64;
    let a = cache.array::<u32>(64 * epl, 0, Layout::Replicate)?;
    a.load(&vec![0xfeed_beefu32; epl as usize], LINE * epl)?;
    let lbas = Fault {
        lba: LINE * 8,
        nlb: 8,
        status: 0x281,
        lie: None,
    };
    simarr.set_fault_on(0, Some(lbas))?;
    simarr.set_fault_on(
        1,
        Some(Fault {
            status: 0,
            lie: Some(bam::sim::Lie::Withhold(4 * timeout)),
            ..lbas
        }),
    )?;
    let first = cache.flush();
    let second = cache.flush();
    simarr.set_fault(None)?;
    let quarantined = |r: &Result<bam::cache::FlushReport>| match r {
        Err(Error::WriteBack { errors, .. }) => errors.iter().any(|e| {
            e.kind == IoErrorKind::Timeout && e.detail == bam::cache::abi::BAM_CACHE_ERR_QUARANTINED
        }),
        _ => false,
    };
    let timed_out = match &first {
        Err(Error::WriteBack { errors, .. }) => errors
            .iter()
            .any(|e| e.ssd == 1 && matches!(e.kind, IoErrorKind::Timeout | IoErrorKind::Aborted)),
        _ => false,
    };
    if !timed_out || !quarantined(&second) {
        return fail(format!(
            "first flush: {first:?}; second flush: {second:?} (the second must report the line quarantined)"
        ));
    }
    Ok(format!(
        "first flush: {}; second: the line quarantined",
        first.err().map(|e| error_summary(&e)).unwrap_or_default()
    ))
}

/// `acquire_line` with a line whose first element index (line * elements a line) wraps
/// past 2^64: the span is empty, no line word is touched (the review's F14: the product
/// wrapped to a small index and the line word of the huge line was read out of bounds).
fn far_line(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig::new(4096, 64);
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_secs(2)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(64 * 1024, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let args: (ArrayView, u64) = (a.view(), res.ptr());
    // SAFETY: matches bam_cache_acquire_far_line(bam_array_view, unsigned long long*);
    // `res` outlives cache.sync().
    unsafe { launch_test(&cache, "bam_cache_acquire_far_line", 1, 32, &args)? };
    cache.sync()?;
    let [count, held] = counts(&res)?;
    cache.check_errors()?;
    if count != 0 || held != 0 {
        return fail(format!("span of {count} elements, holding data: {held}"));
    }
    a.close()?;
    cache.close()?;
    Ok("empty span, nothing acquired, no error".into())
}
