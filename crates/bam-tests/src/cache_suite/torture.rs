//! The torture: eviction storms on many threads checked byte for byte against a host
//! model of the media ([`MediaModel`]), its shapes, and the soak built from it.

use super::errors::injected_errors;
use super::stalls::{stalled_device, stalled_writeback};
use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::{counts, sim};
use bam::cache::{Array, ArrayView, Cache, CacheConfig, Element, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::{Error, KernelArgs, Result, Storage};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cache_kernels::protocol_config;
use bam::pattern::{mix32, pattern_word};

pub(super) fn rng_seed(seed: u64, tid: u64) -> u64 {
    let mut s = (seed ^ tid.wrapping_mul(0x9e3779b97f4a7c15)) | 1;
    rng_next(&mut s);
    s
}

pub(super) fn rng_next(s: &mut u64) -> u64 {
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
pub(super) struct MediaModel {
    ssds: Vec<Vec<u8>>,
}

impl MediaModel {
    pub(super) fn fresh(arr: &dyn Storage) -> Self {
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
    pub(super) fn lay<T: Element>(
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

    pub(super) fn compare(&self, arr: &dyn Storage) -> Result<()> {
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

pub(super) fn bytes_of<T: Element>(v: &[T]) -> &[u8] {
    bam::abi::as_bytes(v)
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

    /// Oversubscribed: 32768 threads on 192 slots over 12 MiB; up to 32 lines per warp,
    /// 1024 warps. Only the coalesced accesses (which never hold lines while they wait)
    /// can run it; array_ref cannot (one pinned line per thread).
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
        ..protocol_config(line as u32, shape.slots)
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
        // array's 32x a torture run there outlasted its 40 s bound.
        shape.ops *= match backend {
            TestBackend::Sim => 32,
            TestBackend::HostCtl => 2,
            TestBackend::File | TestBackend::FileDirect => 4,
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
        crate::backend::remove_test_files(&case.device);
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
        TestBackend::File | TestBackend::FileDirect => {
            let dir = crate::backend::file_dir();
            let paths: Vec<String> = (0..ssds)
                .map(|s| {
                    let p = dir.join(format!("bam-soak-{}-{s}.ssd", std::process::id()));
                    p.display().to_string()
                })
                .collect();
            let direct = if backend == TestBackend::FileDirect {
                ",direct"
            } else {
                ""
            };
            (
                format!("file:{}{direct},size=64M", paths.join(",")),
                32_000_000,
            )
        }
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
pub(super) fn error_summary(e: &Error) -> String {
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
