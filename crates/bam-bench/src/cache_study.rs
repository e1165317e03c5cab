//! The cache study of the dissertation (§5.5, §6.2) on any backend: hit and miss
//! bandwidth of linear, random and cache-line-aware reads of 8-byte elements over
//! thread counts, and the latency of a single-line miss for one warp. Every run also
//! measures, in the same process and with the same pattern and data, raw reads: of a
//! plain array in HBM for hits; for misses, of the simulated SSDs' host media directly
//! (zero-copy) on the simulated array, and of the same SSDs through raw GPU-initiated
//! I/O (`bench::run_job`, whole lines, sequential) on other backends.
//!
//! Element i holds mix64(i ^ seed); every kernel checks every value it reads, so the
//! figures come with a verification count (which must be 0).

use crate::raw::{run_job, Job, Rw};
use bam::cache::{Array, ArrayView, Cache, CacheConfig, CacheStats, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::io::IoConfig;
use bam::storage::sim::Media;
use bam::storage::GpuDevice;
use bam::{Error, IoArray, KernelParam, Result, Storage};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// Options of the cache benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct CacheBenchOptions {
    /// Bytes of data in the hit study (all of it cached).
    pub hit_bytes: u64,
    /// Bytes of data in the miss study (host media; read once, cold).
    pub miss_bytes: u64,
    /// Cache lines in the miss study.
    pub miss_slots: u32,
    /// Line size.
    pub line_bytes: u32,
    /// Thread counts.
    pub threads: Vec<u32>,
    /// Random reads per thread (hit study).
    pub random_per_thread: u64,
    /// Passes over the data per hit measurement (linear / cache-line-aware).
    pub reps: u32,
    /// Lines for the latency measurement.
    pub latency_samples: u32,
    /// I/O queues per SSD.
    pub queues: u32,
    /// SMs for the simulated controllers.
    pub sim_sms: u32,
}

impl CacheBenchOptions {
    /// Threads per block of the benchmark kernels: thread counts are whole blocks.
    pub const BLOCK_THREADS: u32 = 256;

    /// Checks the options before any GPU work: every rule [`run_cache_bench`] relies on
    /// (line geometry, data sizes in whole lines, thread counts in whole blocks, at least
    /// one of everything). The error names the quantity and the rule, in one sentence.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        let line = self.line_bytes as u64;
        if !(512..=65536).contains(&self.line_bytes) || !self.line_bytes.is_multiple_of(512) {
            return bad(format!(
                "line size {} B: must be a multiple of 512 B from 512 B to 64 KiB (e.g. 4096)",
                self.line_bytes
            ));
        }
        for (what, bytes) in [("hit", self.hit_bytes), ("miss", self.miss_bytes)] {
            if bytes == 0 || !bytes.is_multiple_of(line) {
                return bad(format!(
                    "{what} data size {bytes} B: must be a non-zero multiple of the line size {line} B"
                ));
            }
            if bytes / line > u32::MAX as u64 {
                return bad(format!(
                    "{what} data size {bytes} B: more than 2^32 - 1 lines of {line} B"
                ));
            }
        }
        if self.miss_slots == 0 {
            return bad("miss-study cache slots: must be at least 1".into());
        }
        if self.threads.is_empty() {
            return bad("thread counts: the list is empty".into());
        }
        if let Some(t) = self
            .threads
            .iter()
            .find(|&&t| t == 0 || !t.is_multiple_of(Self::BLOCK_THREADS))
        {
            return bad(format!(
                "thread count {t}: must be a non-zero multiple of {} (the kernels' block size)",
                Self::BLOCK_THREADS
            ));
        }
        if self.random_per_thread == 0 {
            return bad("random reads per thread: must be at least 1".into());
        }
        if self.reps == 0 {
            return bad("passes over the data (reps): must be at least 1".into());
        }
        let hit_lines = self.hit_bytes / line;
        if self.latency_samples == 0 || self.latency_samples as u64 > hit_lines {
            return bad(format!(
                "latency samples {}: must be from 1 to the {hit_lines} lines of the hit data",
                self.latency_samples
            ));
        }
        if self.queues == 0 {
            return bad("I/O queues per SSD: must be at least 1".into());
        }
        if self.sim_sms == 0 {
            return bad("SMs for the simulated controllers: must be at least 1".into());
        }
        Ok(())
    }
}

impl Default for CacheBenchOptions {
    fn default() -> Self {
        CacheBenchOptions {
            hit_bytes: 1 << 30,
            miss_bytes: 2 << 30,
            miss_slots: 65536,
            line_bytes: 4096,
            threads: vec![4096, 16384, 65536, 131072, 262144],
            random_per_thread: 256,
            reps: 4,
            latency_samples: 200,
            queues: 64,
            sim_sms: 16,
        }
    }
}

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// hit | miss
    pub study: String,
    /// linear | random | cla
    pub pattern: String,
    /// GPU threads.
    pub threads: u32,
    /// Through the cache: decimal GB/s of 8-byte elements delivered to threads.
    pub cache_gbps: f64,
    /// Raw reads of a plain array with the same pattern, same run.
    pub raw_gbps: f64,
    /// cache / raw.
    pub ratio: f64,
    /// Values that did not match (must be 0), cache and raw together.
    pub wrong_values: u64,
    /// Cache statistics of the measured kernel.
    pub stats: CacheStats,
}

impl Point {
    fn new(
        study: &str,
        pattern: &str,
        threads: u32,
        (cache_gbps, raw_gbps): (f64, f64),
        wrong_values: u64,
        stats: CacheStats,
    ) -> Self {
        Point {
            study: study.into(),
            pattern: pattern.into(),
            threads,
            cache_gbps,
            raw_gbps,
            ratio: if raw_gbps > 0.0 {
                cache_gbps / raw_gbps
            } else {
                0.0
            },
            wrong_values,
            stats,
        }
    }
}

/// Latency of a single-line miss for one warp.
#[derive(Clone, Debug, Serialize)]
pub struct MissLatency {
    /// Line bytes.
    pub line_bytes: u32,
    /// Samples.
    pub samples: u32,
    /// Median, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Minimum.
    pub min_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Where a miss's time goes: medians (µs) of the steps of a lone read of one line,
    /// taken one by one by a single thread over the same number of lines (names and
    /// meaning: bam_cb_miss_phases in crates/bam-bench/cuda/bench.cu). `push_to_cqe_visible`
    /// overlaps `push_tail` (the controller starts at the doorbell, inside it).
    pub phases_p50_us: Vec<(String, f64)>,
}

/// The whole report (what `bam bench cache --json` prints and `--output` writes).
#[derive(Clone, Debug, Serialize)]
pub struct CacheBenchReport {
    /// GPU name.
    pub device: String,
    /// SMs.
    pub sms: u32,
    /// The backend the study ran on.
    pub backend: String,
    /// Options.
    pub options: CacheBenchOptions,
    /// Measurements.
    pub points: Vec<Point>,
    /// Miss latency (ideal SSD, media in HBM).
    pub miss_latency: MissLatency,
}

fn res_buf(gpu: &Arc<Gpu>) -> Result<DeviceBuffer> {
    let b = DeviceBuffer::zeroed(gpu, 32)?;
    b.write(0, &[0u64, 0, u64::MAX, 0])?;
    Ok(b)
}

/// (GB/s, wrong values) of a finished bench kernel's result.
fn res_read(b: &DeviceBuffer) -> Result<(f64, u64)> {
    let mut r = [0u64; 4];
    b.read(0, &mut r)?;
    let s = r[3].saturating_sub(r[2]) as f64 * 1e-9;
    Ok((
        if s > 0.0 {
            r[0] as f64 * 8.0 / s / 1e9
        } else {
            0.0
        },
        r[1],
    ))
}

fn fill(cache: &Cache, ptr: u64, n: u64, seed: u64) -> Result<()> {
    let args: (u64, u64, u64, u64) = (ptr, n, 0, seed);
    // SAFETY: matches bam_cache_fill_u64(uint64_t*, uint64_t, uint64_t, uint64_t); the
    // memory holds n elements and outlives the sync.
    unsafe {
        crate::kernels(cache.gpu())?.launch(
            cache.stream(),
            "bam_cache_fill_u64",
            cache.gpu().sms * 8,
            256,
            0,
            &args,
        )?
    };
    cache.sync()
}

#[allow(clippy::too_many_arguments)]
/// Runs `pattern` through the cache (`raw` = None) or over the plain array at `raw`.
fn run_pattern(
    cache: &Cache,
    view: ArrayView,
    raw: Option<u64>,
    pattern: &str,
    threads: u32,
    reps: u32,
    per_thread: u64,
    seed: u64,
) -> Result<(f64, u64)> {
    let block = 256u32;
    let grid = threads.div_ceil(block);
    let res = res_buf(cache.gpu())?;
    // The kernels' parameters: bam_array_view (or const uint64_t* p, uint64_t n), uint32_t
    // reps / uint64_t per_thread, uint64_t seed (and uint64_t rseed), unsigned long long*.
    let (v, n, epl): (ArrayView, u64, u32) = (view, view.n, view.epl);
    let (rseed, r): (u64, u64) = (0x5eed_u64 + threads as u64, res.ptr());
    let p: u64 = raw.unwrap_or(0);
    use KernelParam as P;
    let (name, args): (&str, Vec<KernelParam>) = match (pattern, raw.is_some()) {
        ("linear", false) => (
            "bam_cb_linear",
            vec![P::new(&v), P::new(&reps), P::new(&seed), P::new(&r)],
        ),
        ("random", false) => (
            "bam_cb_random",
            vec![
                P::new(&v),
                P::new(&per_thread),
                P::new(&seed),
                P::new(&rseed),
                P::new(&r),
            ],
        ),
        ("cla", false) => (
            "bam_cb_cla",
            vec![P::new(&v), P::new(&reps), P::new(&seed), P::new(&r)],
        ),
        ("linear", true) => (
            "bam_cb_raw_linear",
            vec![
                P::new(&p),
                P::new(&n),
                P::new(&reps),
                P::new(&seed),
                P::new(&r),
            ],
        ),
        ("random", true) => (
            "bam_cb_raw_random",
            vec![
                P::new(&p),
                P::new(&n),
                P::new(&per_thread),
                P::new(&seed),
                P::new(&rseed),
                P::new(&r),
            ],
        ),
        ("cla", true) => (
            "bam_cb_raw_cla",
            vec![
                P::new(&p),
                P::new(&n),
                P::new(&epl),
                P::new(&reps),
                P::new(&seed),
                P::new(&r),
            ],
        ),
        _ => return Err(Error::InvalidArgument(format!("unknown pattern {pattern}"))),
    };
    if std::env::var_os("BAM_CACHE_DEBUG").is_some() {
        eprintln!("bench: {name} threads {threads}");
    }
    // SAFETY: each parameter list matches the kernel's signature in bench.cu; the
    // array, the raw buffer and the result outlive the synchronisation below.
    unsafe { crate::kernels(cache.gpu())?.launch(cache.stream(), name, grid, block, 0, &args)? };
    cache.sync()?;
    cache.check_errors()?;
    res_read(&res)
}

#[allow(clippy::too_many_arguments)]
fn point(
    cache: &Cache,
    view: ArrayView,
    raw: u64,
    study: &str,
    pattern: &str,
    threads: u32,
    reps: u32,
    per: u64,
    seed: u64,
    before_cache: &dyn Fn() -> Result<()>,
) -> Result<Point> {
    let (raw_gbps, bad_raw) =
        run_pattern(cache, view, Some(raw), pattern, threads, reps, per, seed)?;
    before_cache()?;
    cache.reset_stats()?;
    let (cache_gbps, bad) = run_pattern(cache, view, None, pattern, threads, reps, per, seed)?;
    Ok(Point::new(
        study,
        pattern,
        threads,
        (cache_gbps, raw_gbps),
        bad + bad_raw,
        cache.stats()?,
    ))
}

/// Names of the phases that bam_cb_miss_phases times, in its output order (see the
/// kernel in crates/bam-bench/cuda/bench.cu).
const MISS_PHASES: [&str; 8] = [
    "load_target",
    "reserve_ticket",
    "wait_slot",
    "write_and_publish",
    "push_tail",
    "push_to_cqe_visible",
    "reap",
    "pin",
];

/// Names of the steps bam_cb_miss_anatomy times (the cache layer's share of a miss).
const MISS_ANATOMY: [&str; 5] = [
    "cache_pin_miss",
    "cache_miss_path",
    "element_read",
    "cache_release",
    "one_lane_access",
];

/// Runs a one-thread step-timing kernel, `kernel(bam_array_view, uint64_t first,
/// uint64_t stride, uint32_t nlines, uint64_t* out)` over the lines first, first + stride,
/// ... (out[names.len() * k + i]: ns of step i for line k; u64::MAX in step 0: the line
/// failed), and returns each step's median in µs.
fn step_medians(
    cache: &Cache<'_>,
    a: &Array<'_, u64>,
    kernel: &str,
    names: &[&str],
    first: u64,
    stride: u64,
    samples: u32,
) -> Result<Vec<(String, f64)>> {
    let n = names.len();
    let out = DeviceBuffer::zeroed(cache.gpu(), 8 * n * samples as usize)?;
    let args: (ArrayView, u64, u64, u32, u64) = (a.view(), first, stride, samples, out.ptr());
    // SAFETY: both kernels passed here take (bam_array_view, uint64_t, uint64_t, uint32_t,
    // uint64_t*) and write n * samples values to `out`, which outlives the sync.
    unsafe { crate::kernels(cache.gpu())?.launch(cache.stream(), kernel, 1, 32, 0, &args)? };
    cache.sync()?;
    cache.check_errors()?;
    let mut raw = vec![0u64; n * samples as usize];
    out.read(0, &mut raw)?;
    if raw.iter().step_by(n).any(|&x| x == u64::MAX) {
        return Err(Error::InvalidArgument(format!(
            "{kernel}: a line could not be read"
        )));
    }
    Ok(names
        .iter()
        .enumerate()
        .map(|(p, name)| {
            let mut v: Vec<u64> = raw.iter().skip(p).step_by(n).copied().collect();
            v.sort_unstable();
            (name.to_string(), v[v.len() / 2] as f64 / 1000.0)
        })
        .collect())
}

/// The device for one half of the study: the simulated array keeps its hit data in HBM
/// and its miss data in pinned host memory, sized for the study, with `sms` controller
/// SMs; modelled controllers and files get the capacity the study needs; real SSDs are
/// what they are. Fresh media hold zeros: the study writes its own data.
pub(crate) fn study_device(device: &GpuDevice, media: Media, capacity: u64, sms: u32) -> GpuDevice {
    let mut d = device.clone();
    d.set_fill_pattern(false);
    d.set_sim_sms(sms);
    match &mut d {
        GpuDevice::Sim {
            media: m,
            capacity: c,
            ..
        } => {
            *m = media;
            *c = capacity;
        }
        GpuDevice::HostCtl { capacity: c, .. } => *c = (*c).max(capacity),
        // The study writes its own data: the files are written, grown to what it needs.
        GpuDevice::File { size, writable, .. } => {
            *size = Some(size.unwrap_or(0).max(capacity));
            *writable = true;
        }
        GpuDevice::Kmod { .. } => {}
    }
    d
}

/// Puts element i = mix64(i ^ seed) on the storage for `n` elements at LBA 0: straight
/// into the simulated medium, else written through `a` (from `src`, which holds them) and
/// flushed.
fn put_data(
    cache: &Cache,
    arr: &dyn Storage,
    a: &Array<'_, u64>,
    src: &DeviceBuffer,
    n: u64,
    seed: u64,
) -> Result<()> {
    if let Some(sim) = bam::storage::sim::SimArray::of(arr) {
        return fill(cache, sim.medium_ptr(0), n, seed);
    }
    a.store_device(src, 0, n)?;
    cache.flush().map(|_| ())
}

/// Raw GPU-initiated reads of whole lines of the study's data (sequential, every thread
/// its own stream of `lines / threads` lines): the miss study's baseline on backends
/// whose media the GPU cannot read directly. Returns decimal GB/s.
fn raw_io_gbps(io: &IoArray, line: u32, lines: u64, threads: u32) -> Result<f64> {
    let geo = io.geometry();
    let per_thread = (lines / threads as u64).max(1);
    let job = Job {
        rw: Rw::Read,
        rwmix_read: 100,
        bs: line.next_power_of_two(),
        threads,
        queues: geo.queues,
        ssds: geo.ssds,
        runtime: Duration::from_secs(1),
        ios_per_thread: Some(per_thread),
        verify: false,
        gen: 0,
        warp_io: false,
        seed: 7,
        span_lbas: (lines * line as u64 / geo.lba_size as u64 / geo.ssds as u64).max(1),
        threads_per_block: 0,
    };
    let r = run_job(io, &job, None)?;
    if r.errors > 0 {
        return Err(Error::Io {
            count: r.errors as u32,
            errors: r.error_log,
        });
    }
    Ok(r.gbps)
}

/// The seed of the study's data (element i holds mix64(i ^ SEED)).
const SEED: u64 = 0x0123_4567_89ab_cdef;

/// Runs the study on `device` (`sim` for the dissertation's setting); `progress` gets
/// each point as it is measured.
pub fn run_cache_bench(
    gpu: &Arc<Gpu>,
    o: &CacheBenchOptions,
    device: &GpuDevice,
    progress: &mut dyn FnMut(&Point),
) -> Result<CacheBenchReport> {
    let mut points = Vec::new();
    // Loaded now, before any simulated array of the study starts (see bam::Module).
    crate::kernels(gpu)?;
    let miss_latency = hit_study(gpu, o, device, &mut |p| {
        progress(&p);
        points.push(p);
    })?;
    miss_study(gpu, o, device, &mut |p| {
        progress(&p);
        points.push(p);
    })?;
    Ok(CacheBenchReport {
        device: gpu.name.clone(),
        sms: gpu.sms,
        backend: device.to_string(),
        options: o.clone(),
        points,
        miss_latency,
    })
}

/// The I/O layer of a cache study: `queues` queues of depth 1024 and `slots` buffer
/// slots of one `line` each.
pub(crate) fn study_io(queues: u32, line: u64, slots: u32, timeout: Duration) -> IoConfig {
    IoConfig {
        queues,
        depth: 1024,
        slot_bytes: IoConfig::slot_for_line(line),
        nslots: slots,
        timeout,
        queue_scratch_bytes: 0,
    }
}

/// The hit half: everything cached (simulated media in HBM). Hands each hit point to
/// `done`, then measures one warp's single-line miss latency on the same cache.
fn hit_study(
    gpu: &Arc<Gpu>,
    o: &CacheBenchOptions,
    device: &GpuDevice,
    done: &mut dyn FnMut(Point),
) -> Result<MissLatency> {
    let line = o.line_bytes;
    let slots = (o.hit_bytes / line as u64) as u32;
    // Ordinary views: the study measures the cache's protocol (a view of an array that
    // fits would otherwise make it resident).
    let cfg = CacheConfig {
        auto_resident_percent: 0,
        ..CacheConfig::new(line, slots)
    };
    let dev = study_device(device, Media::Hbm, o.hit_bytes + (64 << 20), o.sim_sms);
    // (io_slots: the lines and the fill service's spare slots on top.)
    let arr = dev.open(
        gpu,
        &study_io(
            o.queues,
            line as u64,
            cfg.io_slots(),
            Duration::from_secs(2),
        ),
    )?;
    let cache = Cache::new(arr.io(), cfg)?;
    let n = o.hit_bytes / 8;
    let raw = DeviceBuffer::zeroed(gpu, o.hit_bytes as usize)?;
    fill(&cache, raw.ptr(), n, SEED)?;
    {
        let a = cache.array::<u64>(n, 0, Layout::Stripe)?;
        put_data(&cache, &*arr, &a, &raw, n, SEED)?;
        hit_points(&cache, &a, &raw, o, done)?;
        a.close()?;
    }
    let latency = {
        let a = cache.array::<u64>(n, 0, Layout::Stripe)?;
        let latency = miss_latency(&cache, &a, o)?;
        a.close()?;
        latency
    };
    cache.close()?;
    Ok(latency)
}

/// Warms the cache with one cache-line-aware pass (all misses on the simulated array,
/// whose medium was filled behind the cache's back), then measures every pattern at
/// every thread count against the plain copy `raw` in HBM.
fn hit_points(
    cache: &Cache<'_>,
    a: &Array<'_, u64>,
    raw: &DeviceBuffer,
    o: &CacheBenchOptions,
    done: &mut dyn FnMut(Point),
) -> Result<()> {
    let max_t = *o.threads.iter().max().unwrap_or(&65536);
    let (_, bad) = run_pattern(cache, a.view(), None, "cla", max_t, 1, 0, SEED)?;
    if bad != 0 {
        return Err(Error::InvalidArgument(format!(
            "warm-up pass read {bad} wrong values"
        )));
    }
    for &t in &o.threads {
        for pat in ["linear", "random", "cla"] {
            done(point(
                cache,
                a.view(),
                raw.ptr(),
                "hit",
                pat,
                t,
                o.reps,
                o.random_per_thread,
                SEED,
                &|| Ok(()),
            )?);
        }
    }
    Ok(())
}

/// The latency of a single-line miss for one warp, with where its time goes, on the
/// cold lines 0, stride, ... of `a` (the cache must hold none of them).
fn miss_latency(
    cache: &Cache<'_>,
    a: &Array<'_, u64>,
    o: &CacheBenchOptions,
) -> Result<MissLatency> {
    let stride = (a.lines() / o.latency_samples as u64).max(1);
    // First, while the cache is empty: where the time of a miss goes.
    // Lines 0, stride, ... are read into slot 0, unused while the cache is empty.
    let mut phases = step_medians(
        cache,
        a,
        "bam_cb_miss_phases",
        &MISS_PHASES,
        0,
        stride,
        o.latency_samples,
    )?;
    // Then the cache layer's share, on other cold lines (halfway and a quarter of
    // the way between the latency kernel's).
    if stride >= 4 {
        phases.extend(step_medians(
            cache,
            a,
            "bam_cb_miss_anatomy",
            &MISS_ANATOMY,
            stride / 2,
            stride,
            o.latency_samples,
        )?);
    }
    let l = line_latencies(cache, a, stride, o.latency_samples)?;
    let q = |f: f64| l[((l.len() as f64 - 1.0) * f).round() as usize] as f64 / 1000.0;
    Ok(MissLatency {
        line_bytes: o.line_bytes,
        samples: o.latency_samples,
        p50_us: q(0.5),
        p99_us: q(0.99),
        min_us: l[0] as f64 / 1000.0,
        mean_us: l.iter().sum::<u64>() as f64 / l.len() as f64 / 1000.0,
        phases_p50_us: phases,
    })
}

/// Runs bam_cb_latency over the lines 0, stride, ... of `a` (`samples` of them, the
/// values checked) and returns each line's ns, sorted.
fn line_latencies(
    cache: &Cache<'_>,
    a: &Array<'_, u64>,
    stride: u64,
    samples: u32,
) -> Result<Vec<u64>> {
    let out = DeviceBuffer::zeroed(cache.gpu(), 8 * (samples as usize + 1))?;
    let args: (ArrayView, u64, u64, u32, u64, u64) =
        (a.view(), 0, stride, samples, SEED, out.ptr());
    // SAFETY: matches bam_cb_latency(bam_array_view, uint64_t, uint64_t, uint32_t,
    // uint64_t, uint64_t*); `out` outlives the sync.
    unsafe {
        crate::kernels(cache.gpu())?.launch(cache.stream(), "bam_cb_latency", 1, 32, 0, &args)?
    };
    cache.sync()?;
    cache.check_errors()?;
    let mut lat = vec![0u64; samples as usize + 1];
    out.read(0, &mut lat)?;
    if lat[samples as usize] != 0 {
        return Err(Error::InvalidArgument(
            "latency kernel read wrong values".into(),
        ));
    }
    let mut l = lat[..samples as usize].to_vec();
    l.sort_unstable();
    Ok(l)
}

/// The miss half: simulated media in pinned host memory, a cold cache for every point,
/// one pass. Hands each miss point to `done`.
fn miss_study(
    gpu: &Arc<Gpu>,
    o: &CacheBenchOptions,
    device: &GpuDevice,
    done: &mut dyn FnMut(Point),
) -> Result<()> {
    let cfg = CacheConfig {
        auto_resident_percent: 0,
        ..CacheConfig::new(o.line_bytes, o.miss_slots)
    };
    let dev = study_device(device, Media::Host, o.miss_bytes, o.sim_sms);
    // Off the simulated array the raw baseline is GPU-initiated reads, one buffer
    // slot per thread: the I/O layer gets that many slots, the cache uses miss_slots.
    let max_t = *o.threads.iter().max().unwrap_or(&1);
    let slots = match dev {
        GpuDevice::Sim { .. } => cfg.io_slots(),
        _ => cfg.io_slots().max(max_t),
    };
    let arr = dev.open(
        gpu,
        &study_io(o.queues, o.line_bytes as u64, slots, Duration::from_secs(5)),
    )?;
    write_miss_data(gpu, &*arr, &cfg, o)?;
    for &t in &o.threads {
        for pat in ["linear", "cla"] {
            done(miss_point(&*arr, &cfg, o, pat, t)?);
        }
    }
    Ok(())
}

/// Puts the miss study's data on `arr` through a cache of its own (closed after).
fn write_miss_data(
    gpu: &Arc<Gpu>,
    arr: &dyn Storage,
    cfg: &CacheConfig,
    o: &CacheBenchOptions,
) -> Result<()> {
    let n = o.miss_bytes / 8;
    let cache = Cache::new(arr.io(), cfg.clone())?;
    let a = cache.array::<u64>(n, 0, Layout::Stripe)?;
    let src = match bam::storage::sim::SimArray::of(arr) {
        Some(_) => DeviceBuffer::zeroed(gpu, 8)?,
        None => {
            let b = DeviceBuffer::zeroed(gpu, o.miss_bytes as usize)?;
            fill(&cache, b.ptr(), n, SEED)?;
            b
        }
    };
    put_data(&cache, arr, &a, &src, n, SEED)?;
    a.close()?;
    cache.close()
}

/// One miss point, pattern `pat` with `t` threads, on a fresh (cold) cache: against the
/// simulated SSDs' host media read directly, or raw GPU-initiated I/O elsewhere.
fn miss_point(
    arr: &dyn Storage,
    cfg: &CacheConfig,
    o: &CacheBenchOptions,
    pat: &str,
    t: u32,
) -> Result<Point> {
    let n = o.miss_bytes / 8;
    // The raw reads first: their kernels use buffer slots from 0, which the point's cache
    // holds while it lives.
    let raw_gbps = match bam::storage::sim::SimArray::of(arr) {
        Some(_) => 0.0,
        None => raw_io_gbps(
            arr.io(),
            o.line_bytes,
            o.miss_bytes / o.line_bytes as u64,
            t,
        )?,
    };
    let cache = Cache::new(arr.io(), cfg.clone())?;
    let a = cache.array::<u64>(n, 0, Layout::Stripe)?;
    let p = match bam::storage::sim::SimArray::of(arr) {
        Some(sim) => point(
            &cache,
            a.view(),
            sim.medium_ptr(0),
            "miss",
            pat,
            t,
            1,
            0,
            SEED,
            &|| Ok(()),
        )?,
        None => {
            cache.reset_stats()?;
            let (cache_gbps, bad) = run_pattern(&cache, a.view(), None, pat, t, 1, 0, SEED)?;
            Point::new("miss", pat, t, (cache_gbps, raw_gbps), bad, cache.stats()?)
        }
    };
    a.close()?;
    cache.close()?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        CacheBenchOptions::default().validate().unwrap();
    }

    #[test]
    fn validate_names_the_broken_rule() {
        let msg = |f: &dyn Fn(&mut CacheBenchOptions)| {
            let mut o = CacheBenchOptions::default();
            f(&mut o);
            match o.validate() {
                Err(Error::InvalidArgument(m)) => m,
                r => panic!("expected InvalidArgument, got {r:?}"),
            }
        };
        assert!(msg(&|o| o.line_bytes = 1000).contains("line size 1000 B"));
        assert!(msg(&|o| o.line_bytes = 131072).contains("line size"));
        assert!(msg(&|o| o.line_bytes = 256).contains("line size"));
        assert!(msg(&|o| o.hit_bytes = 4097).contains("hit data size"));
        assert!(msg(&|o| o.miss_bytes = 0).contains("miss data size"));
        assert!(msg(&|o| o.miss_slots = 0).contains("slots"));
        assert!(msg(&|o| o.threads = vec![]).contains("empty"));
        assert!(msg(&|o| o.threads = vec![4096, 0]).contains("thread count 0"));
        assert!(msg(&|o| o.threads = vec![100]).contains("multiple of 256"));
        assert!(msg(&|o| o.random_per_thread = 0).contains("random reads"));
        assert!(msg(&|o| o.reps = 0).contains("reps"));
        assert!(msg(&|o| o.latency_samples = 0).contains("latency samples"));
        assert!(msg(&|o| {
            o.hit_bytes = 16 * 4096;
            o.latency_samples = 17;
        })
        .contains("16 lines"));
        assert!(msg(&|o| o.queues = 0).contains("queues"));
        assert!(msg(&|o| o.sim_sms = 0).contains("SMs"));
        CacheBenchOptions {
            line_bytes: 1536,
            hit_bytes: 1536 << 10,
            miss_bytes: 1536 << 10,
            threads: vec![256],
            ..Default::default()
        }
        .validate()
        .unwrap();
    }
}
