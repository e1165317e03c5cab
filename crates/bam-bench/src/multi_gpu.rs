//! Benchmarks across GPUs that share SSDs (`bam bench --gpus 0,1`), each measured against
//! one GPU doing the same work in the same run:
//!
//! * [`raw_scaling`]: a raw job ([`crate::raw`]) on the first GPU alone, then on every GPU
//!   at once (the same job each, started together): per-GPU and total IOPS.
//! * [`gather_scaling`]: the suite's gather kernel ported with `bam::array<u64>`
//!   (`suite_gather_bam`, cuda/suite.cu), data-parallel: each GPU has its own cache over
//!   the same SSDs and a read-only array of the same data, and reads its share of the
//!   random elements. One GPU reads them all first; every value read is checked and the
//!   GPUs' sums must add up to the one-GPU sum.

use crate::raw::{run_job, Job, JobResult};
use bam::cache::{Cache, CacheConfig, Layout};
use bam::cuda::DeviceBuffer;
use bam::storage::sim::DriveProfile;
use bam::{Error, IoArray, Result};
use serde::Serialize;
use std::sync::Barrier;
use std::time::Instant;

/// Runs `f(g)` for every GPU index `0..n` on its own thread, all released together by a
/// barrier; results in GPU order (a panicking thread is an error).
pub fn together<T: Send>(n: usize, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    let start = Barrier::new(n);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|g| {
                let (f, start) = (&f, &start);
                s.spawn(move || {
                    start.wait();
                    f(g)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::InvalidArgument("a GPU thread panicked".into())))
            })
            .collect()
    })
}

/// A raw job on one GPU and on all of them at once.
#[derive(Clone, Debug, Serialize)]
pub struct RawScaling {
    /// The first GPU alone.
    pub one: JobResult,
    /// Every GPU at once, in GPU order.
    pub each: Vec<JobResult>,
    /// All GPUs' I/Os over the longest GPU's run time.
    pub total_iops: f64,
    /// All GPUs' bytes over the longest GPU's run time (decimal GB/s).
    pub total_gbps: f64,
    /// `total_iops / one.iops`.
    pub ratio: f64,
}

/// Runs `job` on `ios[0]` alone, then on every I/O layer of `ios` at once (each GPU its
/// own seed). Errors of any run are errors here (with the GPU named).
pub fn raw_scaling(
    ios: &[&IoArray],
    job: &Job,
    model: Option<&DriveProfile>,
) -> Result<RawScaling> {
    let first = ios
        .first()
        .ok_or_else(|| Error::InvalidArgument("no GPU".into()))?;
    let one = run_job(first, job, model)?;
    let each = together(ios.len(), |g| {
        let j = Job {
            seed: job.seed ^ (g as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ..job.clone()
        };
        run_job(ios[g], &j, model)
    })?;
    for (g, r) in each.iter().enumerate() {
        if r.errors > 0 || r.verify_failures > 0 {
            return Err(Error::InvalidArgument(format!(
                "GPU {}: {} I/O errors, {} verification failures{}",
                ios[g].gpu().ordinal(),
                r.errors,
                r.verify_failures,
                r.error_log
                    .first()
                    .map(|e| format!(" (first: {e})"))
                    .unwrap_or_default()
            )));
        }
    }
    let secs = each.iter().map(|r| r.seconds).fold(0.0, f64::max);
    let ios_sum: u64 = each.iter().map(|r| r.ios).sum();
    let bytes: u64 = each.iter().map(|r| r.bytes).sum();
    let total_iops = ios_sum as f64 / secs.max(1e-9);
    Ok(RawScaling {
        ratio: total_iops / one.iops.max(1e-9),
        total_gbps: bytes as f64 / secs.max(1e-9) / 1e9,
        one,
        each,
        total_iops,
    })
}

/// What the gather runs read.
#[derive(Clone, Debug, Serialize)]
pub struct GatherOptions {
    /// u64 elements of the array (on the SSDs from LBA 0, striped).
    pub elements: u64,
    /// Random reads in all (split evenly over the GPUs in the data-parallel run).
    pub reads: u64,
    /// Read every element once before each timed run (hit study) or not (cold caches).
    pub warm: bool,
    /// Seed of the data and of the read sequence.
    pub seed: u64,
}

/// One timed gather run on one GPU.
#[derive(Clone, Debug, Serialize)]
pub struct GatherRun {
    /// GPU ordinal.
    pub gpu: usize,
    /// Reads done.
    pub reads: u64,
    /// Seconds from launch to completion (host clock).
    pub seconds: f64,
    /// Reads per second.
    pub reads_per_s: f64,
    /// Cache hit rate during the run.
    pub hit_rate: Option<f64>,
    /// Values that did not match the data.
    pub wrong: u64,
}

/// The ported gather on one GPU and data-parallel on all.
#[derive(Clone, Debug, Serialize)]
pub struct GatherScaling {
    /// The options.
    pub options: GatherOptions,
    /// Cache line bytes and lines per GPU.
    pub line_bytes: u32,
    /// Lines of each GPU's cache.
    pub cache_lines: u32,
    /// The first GPU reading everything.
    pub one: GatherRun,
    /// Every GPU reading its share at once.
    pub each: Vec<GatherRun>,
    /// All reads over the longest GPU's time.
    pub total_reads_per_s: f64,
    /// `total_reads_per_s / one.reads_per_s`.
    pub ratio: f64,
}

/// Threads per block of the suite's kernels, and blocks of them resident per SM
/// (`SUITE_BOUNDS` in cuda/suite.cu): grids fill the SMs the cache leaves, once.
const BLOCK: u32 = 256;
const BLOCKS_PER_SM: u32 = 6;

/// Launches `suite_gather_bam` over reads `first .. first + count` and waits: (sum, wrong,
/// seconds).
fn gather_once(
    cache: &Cache<'_>,
    view: bam::cache::abi::ArrayView,
    o: &GatherOptions,
    first: u64,
    count: u64,
) -> Result<(u64, u64, f64)> {
    let gpu = cache.gpu();
    gpu.bind()?;
    let m = crate::suite_kernels(gpu)?;
    let out = DeviceBuffer::zeroed(gpu, 16)?;
    let rseed = o.seed.rotate_left(29) ^ 0x9e37_79b9;
    let grid = cache.free_sms() * BLOCKS_PER_SM;
    let args = (view, o.elements, first, count, o.seed, rseed, out.ptr());
    let stream = cache.stream();
    let t0 = Instant::now();
    // SAFETY: suite_gather_bam(bam::array<uint64_t>, uint64_t n, uint64_t first, uint64_t
    // count, uint64_t seed, uint64_t rseed, unsigned long long* out): the view is a live
    // array of `elements` u64 of this cache; `out` holds 2 counters and outlives the wait.
    unsafe { m.launch(stream, "suite_gather_bam", grid, BLOCK, 0, &args)? };
    gpu.sync_timeout(stream, std::time::Duration::from_secs(600))?;
    let secs = t0.elapsed().as_secs_f64();
    cache.check_errors()?;
    let mut r = [0u64; 2];
    out.read(0, &mut r)?;
    Ok((r[0], r[1], secs))
}

/// Writes the gather's data (element i = mix64(i ^ seed), the suite's generator) through
/// a writable array on the first GPU's cache and closes it: the hand-over of the sharing
/// rule, after which every GPU may make read-only arrays of it.
fn write_data(cache: &Cache<'_>, o: &GatherOptions) -> Result<()> {
    let gpu = cache.gpu();
    let m = crate::suite_kernels(gpu)?;
    let src = DeviceBuffer::zeroed(gpu, (o.elements * 8) as usize)?;
    let args = (src.ptr(), o.elements, o.seed);
    // SAFETY: suite_fill_u64(uint64_t* p, uint64_t n, uint64_t seed) over `src`, which
    // holds n u64 and outlives the wait.
    unsafe {
        m.launch(
            cache.stream(),
            "suite_fill_u64",
            o.elements.div_ceil(BLOCK as u64).min(1 << 20) as u32,
            BLOCK,
            0,
            &args,
        )?
    };
    gpu.sync_timeout(cache.stream(), std::time::Duration::from_secs(120))?;
    let a = cache.array::<u64>(o.elements, 0, Layout::Stripe)?;
    a.store_device(&src, 0, o.elements)?;
    a.close()?;
    Ok(())
}

/// The ported gather on `ios[0]` alone, then data-parallel on every GPU (see the module
/// docs). Each GPU's cache takes all of its I/O layer's buffer slots (one line per slot).
pub fn gather_scaling(ios: &[&IoArray], o: &GatherOptions) -> Result<GatherScaling> {
    if ios.is_empty() || o.elements == 0 || o.reads == 0 {
        return Err(Error::InvalidArgument(
            "gather: needs a GPU, elements and reads".into(),
        ));
    }
    let geo = ios[0].geometry().clone();
    let line = geo.slot_bytes as u32;
    let caches = ios
        .iter()
        // Hits counted: the study reports them (every GPU's runs pay the same for it).
        .map(|io| {
            Cache::new(
                io,
                CacheConfig {
                    count_hits: true,
                    // The protocol on every GPU alike (arrays shared with other GPUs
                    // are never resident; one GPU's alone would be).
                    auto_resident_percent: 0,
                    ..CacheConfig::new(line, io.geometry().nslots)
                },
            )
        })
        .collect::<Result<Vec<_>>>()?;
    write_data(&caches[0], o)?;
    // One timed run of `count` reads from `first` on GPU g, on a fresh read-only array
    // (cold: a new array has no line cached), warmed first when asked.
    let run = |g: usize, first: u64, count: u64| -> Result<(GatherRun, u64)> {
        let c = &caches[g];
        let a = c.array_read_only::<u64>(o.elements, 0, Layout::Stripe)?;
        if o.warm {
            // Every line once, a warp per line (the array should fit in the cache).
            touch_all(c, a.view())?;
        }
        c.reset_stats()?;
        let (sum, wrong, seconds) = gather_once(c, a.view(), o, first, count)?;
        let st = c.stats()?;
        a.close()?;
        Ok((
            GatherRun {
                gpu: ios[g].gpu().ordinal(),
                reads: count,
                seconds,
                reads_per_s: count as f64 / seconds.max(1e-9),
                hit_rate: st.hit_rate(),
                wrong,
            },
            sum,
        ))
    };
    let (one, sum_one) = run(0, 0, o.reads)?;
    let n = ios.len() as u64;
    let share = |g: u64| (o.reads * g / n, o.reads * (g + 1) / n - o.reads * g / n);
    let parts = together(ios.len(), |g| {
        let (first, count) = share(g as u64);
        run(g, first, count)
    })?;
    let sum_all = parts.iter().fold(0u64, |s, (_, x)| s.wrapping_add(*x));
    let wrong: u64 = one.wrong + parts.iter().map(|(r, _)| r.wrong).sum::<u64>();
    if wrong > 0 || sum_all != sum_one {
        return Err(Error::InvalidArgument(format!(
            "gather across GPUs: {wrong} wrong values; sum of the GPUs' shares {sum_all:#x}, \
             one GPU's sum {sum_one:#x}"
        )));
    }
    let each: Vec<GatherRun> = parts.into_iter().map(|(r, _)| r).collect();
    let secs = each.iter().map(|r| r.seconds).fold(0.0, f64::max);
    let total = o.reads as f64 / secs.max(1e-9);
    drop(caches);
    Ok(GatherScaling {
        options: o.clone(),
        line_bytes: line,
        cache_lines: geo.nslots,
        ratio: total / one.reads_per_s.max(1e-9),
        one,
        each,
        total_reads_per_s: total,
    })
}

/// Loads every line of the array into the cache (the suite's warm-up kernel: a warp per
/// line), so that a following run hits.
fn touch_all(cache: &Cache<'_>, view: bam::cache::abi::ArrayView) -> Result<()> {
    let gpu = cache.gpu();
    let m = crate::suite_kernels(gpu)?;
    let failed = DeviceBuffer::zeroed(gpu, 8)?;
    let args = (view, failed.ptr());
    let grid = cache.free_sms() * BLOCKS_PER_SM;
    // SAFETY: suite_touch_8(bam::array<uint64_t>, unsigned long long* failed) over a live
    // array; `failed` outlives the wait.
    unsafe { m.launch(cache.stream(), "suite_touch_8", grid, BLOCK, 0, &args)? };
    gpu.sync_timeout(cache.stream(), std::time::Duration::from_secs(600))?;
    cache.check_errors()?;
    let mut f = [0u64];
    failed.read(0, &mut f)?;
    if f[0] > 0 {
        return Err(Error::InvalidArgument(format!(
            "warm-up: {} lines could not be loaded",
            f[0]
        )));
    }
    Ok(())
}
