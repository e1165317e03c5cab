//! The raw I/O benchmark (`bam bench`): fio-like random/sequential reads and writes from
//! GPU threads through the GPU queues, and the baselines it is compared with.

use crate::abi::*;
use bam::abi::*;
use bam::cuda::{DeviceBuffer, Gpu};
use bam::io::Geometry;
use bam::storage::sim::DriveProfile;
use bam::storage::sim::SimProfile;
use bam::{Error, IoArray, IoError, Result};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// Access pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    /// Uniform random reads.
    RandRead,
    /// Uniform random writes.
    RandWrite,
    /// Sequential reads (each thread its own stream).
    Read,
    /// Sequential writes.
    Write,
    /// Random mix (`rwmix` % reads).
    RandRw,
}

impl std::str::FromStr for Rw {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randrw" => Rw::RandRw,
            _ => {
                return Err(format!(
                    "unknown --rw `{s}` (randread|randwrite|read|write|randrw)"
                ))
            }
        })
    }
}

/// One benchmark job.
#[derive(Clone, Debug, Serialize)]
pub struct Job {
    /// Pattern.
    pub rw: Rw,
    /// Percentage of reads for randrw.
    pub rwmix_read: u32,
    /// Bytes per I/O.
    pub bs: u32,
    /// GPU threads (each keeps one I/O in flight; a warp in warp mode).
    pub threads: u32,
    /// I/O queues per SSD used (<= the array's).
    pub queues: u32,
    /// SSDs used (<= the array's).
    pub ssds: u32,
    /// Run time (when `ios` is None).
    pub runtime: Duration,
    /// I/Os per thread instead of a run time.
    pub ios_per_thread: Option<u64>,
    /// Verify data.
    pub verify: bool,
    /// Generation written by writes (reads of a fresh medium expect 0).
    pub gen: u32,
    /// Warp API (a warp per request) instead of the thread API.
    pub warp_io: bool,
    /// RNG seed.
    pub seed: u64,
    /// LBAs per SSD touched (0 = whole namespace).
    pub span_lbas: u64,
    /// Threads per block (0 = up to 128). With 1, every submitting thread is alone in
    /// its warp, so the outstanding count stays at `threads` (lanes of a warp tend to
    /// submit and complete in lock step, which turns N outstanding into batches).
    pub threads_per_block: u32,
}

/// Latency summary in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
}

/// Outcome of one job.
#[derive(Clone, Debug, Serialize)]
pub struct JobResult {
    /// The job.
    pub job: Job,
    /// Completed I/Os.
    pub ios: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds between the first thread's start and the last thread's end (GPU clock).
    pub seconds: f64,
    /// I/Os per second.
    pub iops: f64,
    /// Decimal GB/s.
    pub gbps: f64,
    /// Latency per request (GPU clock).
    pub latency: Latency,
    /// SM clock in GHz during the run (cycles / ns), used for the latency conversion.
    pub sm_ghz: f64,
    /// Failed I/Os.
    pub errors: u64,
    /// Verification failures.
    pub verify_failures: u64,
    /// Errors logged on the GPU (first entries).
    #[serde(skip)]
    pub error_log: Vec<IoError>,
    /// Profile of the controller kernel's warp 0 during the job.
    pub sim_profile: SimProfile,
    /// Threads of the launch that fit on the GPU at once (occupancy of the benchmark
    /// kernel on the SMs the controller leaves free): the I/Os actually outstanding.
    pub resident_threads: u32,
    /// The device model at this job's outstanding I/O count per SSD (IOPS of the array,
    /// mean latency in us); None for the `ideal` model.
    pub model: Option<ModelPoint>,
}

/// What the device model predicts for a job (see `DriveProfile::model_point`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ModelPoint {
    /// I/Os outstanding per SSD.
    pub outstanding_per_ssd: f64,
    /// IOPS of all SSDs used.
    pub iops: f64,
    /// Mean latency in us.
    pub mean_us: f64,
}

fn percentile(hist: &[u64], total: u64, q: f64) -> u64 {
    let target = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut acc = 0;
    for (b, &n) in hist.iter().enumerate() {
        acc += n;
        if acc >= target {
            let lo = hist_bucket_low(b);
            let hi = hist_bucket_low(b + 1).max(lo + 1);
            return (lo + hi) / 2;
        }
    }
    0
}

/// Runs `job` on the SSDs of `io` (any backend). `model`: the device model the SSDs
/// follow, for the prediction in the result (None for real SSDs). The result's
/// `sim_profile` is left zero: a caller with a simulated array reads it around the job.
///
/// Load the benchmark kernels ([`crate::kernels`]) before building a simulated array: a
/// module load while its controllers run is refused.
pub fn run_job(io: &IoArray, job: &Job, model: Option<&DriveProfile>) -> Result<JobResult> {
    let launch = plan_launch(job, io.geometry())?;
    // The job's threads use slots 0.. (refused while a cache or scan holds them).
    let _slots = io.lease_slots(launch.slots, Some(0))?;
    let params = bench_params(job, io.geometry());
    let (r, error_log, resident) = launch_bench(io, job, &launch, params)?;
    job_result(
        job,
        &launch,
        &r,
        error_log,
        resident,
        params.read_pct,
        model,
    )
}

/// The launch of a job.
struct Launch {
    /// Threads per block.
    block: u32,
    /// Threads, rounded up to whole blocks.
    threads: u32,
    /// Buffer slots the threads use: one a thread, or one a warp with the warp API.
    slots: u32,
}

/// Checks `job` against the array's geometry and shapes its launch.
fn plan_launch(job: &Job, cfg: &Geometry) -> Result<Launch> {
    let lba = cfg.lba_size;
    let bad = |s: String| Err(Error::InvalidArgument(s));
    if job.bs < lba || !job.bs.is_multiple_of(lba) || !job.bs.is_power_of_two() {
        return bad(format!(
            "--bs {} must be a power of two multiple of the LBA size {lba}",
            job.bs
        ));
    }
    if job.bs as u64 > cfg.slot_bytes {
        return bad(format!(
            "--bs {} exceeds the buffer slot size {}",
            job.bs, cfg.slot_bytes
        ));
    }
    if job.queues == 0 || job.queues > cfg.queues || job.ssds == 0 || job.ssds > cfg.ssds {
        return bad("queues/ssds used must be within the array's".into());
    }
    let block = if job.threads_per_block == 0 {
        job.threads.clamp(1, 128)
    } else {
        job.threads_per_block.clamp(1, 1024)
    };
    let threads = job.threads.div_ceil(block) * block;
    let slots_needed = if job.warp_io {
        threads.div_ceil(32)
    } else {
        threads
    };
    if slots_needed > cfg.nslots {
        return bad(format!(
            "{threads} threads need {slots_needed} buffer slots; the array has {}",
            cfg.nslots
        ));
    }
    Ok(Launch {
        block,
        threads,
        slots: slots_needed,
    })
}

/// The benchmark kernel's parameters for `job`.
fn bench_params(job: &Job, cfg: &Geometry) -> BenchParams {
    let ns_lbas = cfg.ns_blocks;
    let span = if job.span_lbas == 0 {
        ns_lbas
    } else {
        job.span_lbas.min(ns_lbas)
    };
    let read_pct = match job.rw {
        Rw::RandRead | Rw::Read => 100,
        Rw::RandWrite | Rw::Write => 0,
        Rw::RandRw => job.rwmix_read.min(100),
    };
    let mut params = BenchParams {
        ios_per_thread: job.ios_per_thread.unwrap_or(0),
        deadline_ns: 0,
        span_lbas: span,
        seed: job.seed,
        nlb: job.bs / cfg.lba_size,
        read_pct,
        random: matches!(job.rw, Rw::RandRead | Rw::RandWrite | Rw::RandRw) as u32,
        verify: job.verify as u32,
        gen: job.gen,
        queues_used: job.queues,
        ssds_used: job.ssds,
        warp_io: job.warp_io as u32,
    };
    if job.ios_per_thread.is_none() {
        // A run time: the kernel counts it from its first thread's start.
        params.deadline_ns = job.runtime.as_nanos().max(1) as u64;
    }
    params
}

/// Runs bam_bench_rw for the job and waits for it (at most the run time, four I/O
/// timeouts and 30 s); returns the kernel's result, the job's own logged errors and the
/// threads that fit on the GPU at once.
fn launch_bench(
    io: &IoArray,
    job: &Job,
    launch: &Launch,
    params: BenchParams,
) -> Result<(BenchResult, Vec<IoError>, u32)> {
    let gpu = io.gpu().clone();
    let cfg = io.geometry();
    let (block, threads) = (launch.block, launch.threads);
    let mut res_buf = DeviceBuffer::zeroed(&gpu, std::mem::size_of::<BenchResult>())?;
    // The job's own error log: its errors are its, never another user's of the I/O layer.
    let mut log = io.new_error_log()?;
    res_buf.write(
        0,
        &[BenchResult {
            t_start_ns: u64::MAX,
            ..Default::default()
        }],
    )?;
    let stream = gpu.stream()?;
    let args: (IoView, BenchParams, u64) = (log.view_of(io.io_view()), params, res_buf.ptr());
    let kernels = crate::kernels(&gpu)?;
    let bench_rw = kernels.function("bam_bench_rw")?;
    // The kernel uses only static shared memory.
    let per_sm = bench_rw.max_blocks_per_sm(block, 0)?.max(1);
    let resident = threads.min(per_sm * block * gpu.sms.saturating_sub(cfg.reserved_sms).max(1));
    // SAFETY: matches bam_bench_rw(bam_io_view, bam_bench_params, bam_bench_result*); the
    // array and result buffer outlive the synchronisation below.
    unsafe { kernels.launch_function(&stream, &bench_rw, threads / block, block, 0, &args)? };
    let limit = job.runtime + cfg.timeout * 4 + Duration::from_secs(30);
    let synced = gpu.sync_timeout(&stream, limit);
    if synced.is_err() {
        log.leak(); // the kernel may still log into it
    }
    DeviceBuffer::keep_unless_synced(synced, &mut [&mut res_buf])?;
    let mut r = [BenchResult::default()];
    res_buf.read(0, &mut r)?;
    let [r] = r;
    let (_count, log) = log.drain()?;
    Ok((r, log, resident))
}

/// The job's result from the kernel's figures (GPU clock), with the device model's
/// prediction at the I/Os actually outstanding.
fn job_result(
    job: &Job,
    launch: &Launch,
    r: &BenchResult,
    error_log: Vec<IoError>,
    resident: u32,
    read_pct: u32,
    model: Option<&DriveProfile>,
) -> Result<JobResult> {
    // t_start_ns starts at u64::MAX and t_end_ns at 0; a job that ran has both set by
    // the kernel, with t_start <= reserved[0] (the first thread's start) <= t_end.
    if r.ios > 0 && (r.t_start_ns == 0 || r.t_start_ns > r.t_end_ns) {
        return Err(Error::InvalidArgument(format!(
            "benchmark result has an invalid time span (start {} ns, end {} ns)",
            r.t_start_ns, r.t_end_ns
        )));
    }
    let seconds = if r.t_end_ns > r.t_start_ns {
        (r.t_end_ns - r.t_start_ns) as f64 * 1e-9
    } else {
        0.0
    };
    let ghz = if r.thread_ns > 0 {
        r.cycles as f64 / r.thread_ns as f64
    } else {
        1.0
    };
    Ok(JobResult {
        job: Job {
            threads: launch.threads,
            ..job.clone()
        },
        ios: r.ios,
        bytes: r.bytes,
        seconds,
        iops: if seconds > 0.0 {
            r.ios as f64 / seconds
        } else {
            0.0
        },
        gbps: if seconds > 0.0 {
            r.bytes as f64 / seconds / 1e9
        } else {
            0.0
        },
        latency: latency(r, ghz),
        sm_ghz: ghz,
        errors: r.errors,
        verify_failures: r.verify_failures,
        error_log,
        sim_profile: SimProfile::default(),
        resident_threads: resident,
        model: model_point(job, resident, read_pct, model),
    })
}

/// The latency summary of a job's result, its cycles converted at `ghz`.
fn latency(r: &BenchResult, ghz: f64) -> Latency {
    let to_us = |c: u64| c as f64 / ghz / 1000.0;
    let total: u64 = r.hist.iter().sum();
    Latency {
        mean_us: if r.ios > 0 {
            r.lat_cycles_sum as f64 / r.ios as f64 / ghz / 1000.0
        } else {
            0.0
        },
        p50_us: to_us(percentile(&r.hist, total, 0.5)),
        p99_us: to_us(percentile(&r.hist, total, 0.99)),
        p999_us: to_us(percentile(&r.hist, total, 0.999)),
    }
}

/// What `model` predicts with the job's `resident` threads outstanding.
fn model_point(
    job: &Job,
    resident: u32,
    read_pct: u32,
    model: Option<&DriveProfile>,
) -> Option<ModelPoint> {
    let per_ssd = if job.warp_io {
        resident.div_ceil(32)
    } else {
        resident
    } as f64
        / job.ssds as f64;
    model
        .and_then(|m| m.model_point(read_pct < 100, job.bs as u64, per_ssd.ceil() as u64))
        .map(|(iops, mean_us)| ModelPoint {
            outstanding_per_ssd: per_ssd,
            iops: iops * job.ssds as f64,
            mean_us,
        })
}

fn baseline_raw(
    gpu: &Arc<Gpu>,
    srcs: &[u64],
    nchunks: u64,
    chunk: u32,
    runtime_ns: u64,
    blocks: u32,
    block: u32,
) -> Result<BenchResult> {
    let res_buf = DeviceBuffer::zeroed(gpu, std::mem::size_of::<BenchResult>())?;
    res_buf.write(
        0,
        &[BenchResult {
            t_start_ns: u64::MAX,
            ..Default::default()
        }],
    )?;
    let warps = (blocks * block).div_ceil(32) as usize;
    let dst = DeviceBuffer::zeroed(gpu, warps * 8 * chunk as usize)?;
    let src_table = DeviceBuffer::zeroed(gpu, std::mem::size_of_val(srcs))?;
    src_table.write(0, srcs)?;
    let stream = gpu.stream()?;
    let args: (u64, u32, u64, u32, u64, u64, u64, u64) = (
        src_table.ptr(),
        srcs.len() as u32,
        nchunks,
        chunk,
        dst.ptr(),
        runtime_ns,
        0x1234,
        res_buf.ptr(),
    );
    // SAFETY: matches bam_baseline_read(const uint64_t*, uint32_t, uint64_t, uint32_t,
    // uint64_t, uint64_t, uint64_t, bam_bench_result*); buffers outlive the sync below.
    unsafe { crate::kernels(gpu)?.launch(&stream, "bam_baseline_read", blocks, block, 0, &args)? };
    gpu.sync_timeout(&stream, Duration::from_secs(120))?;
    let mut r = [BenchResult::default()];
    res_buf.read(0, &mut r)?;
    Ok(r[0])
}

/// GPU random reads of `chunk`-byte chunks of `len` bytes of GPU memory (HBM), filled
/// with the data pattern first (no timing on zeros), on `sms` SMs' worth of blocks.
pub fn baseline_hbm(
    gpu: &Arc<Gpu>,
    len: u64,
    chunk: u32,
    runtime: Duration,
    sms: u32,
) -> Result<Baseline> {
    let mem = DeviceBuffer::zeroed(gpu, len as usize)?;
    bam::pattern::fill_gpu(&mem, 0, 0)?;
    baseline(gpu, "HBM", &[mem.ptr()], len, chunk, runtime, sms)
}

/// A raw-limit measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Baseline {
    /// What was read.
    pub what: String,
    /// Chunk size in bytes.
    pub chunk: u32,
    /// Chunks per second.
    pub rate: f64,
    /// Decimal GB/s.
    pub gbps: f64,
}

/// GPU random reads of `chunk`-byte chunks spread evenly over the memories at `srcs`
/// (`len` bytes each: e.g. every SSD's medium, the span a benchmark reads) for
/// `runtime`, on `sms` SMs' worth of blocks (the same SMs a benchmark uses).
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use std::time::Duration;
/// let gpu = bam::cuda::Gpu::new(0)?;
/// let mem = bam::cuda::DeviceBuffer::zeroed(&gpu, 1 << 30)?;
/// let b = bam_bench::raw::baseline(&gpu, "HBM", &[mem.ptr()], 1 << 30, 4096, Duration::from_millis(200), gpu.sms)?;
/// println!("{:.1} GB/s", b.gbps);
/// # Ok(())
/// # }
/// ```
pub fn baseline(
    gpu: &Arc<Gpu>,
    what: &str,
    srcs: &[u64],
    len: u64,
    chunk: u32,
    runtime: Duration,
    sms: u32,
) -> Result<Baseline> {
    if srcs.is_empty() || len < chunk as u64 || chunk == 0 || !chunk.is_multiple_of(16) {
        return Err(Error::InvalidArgument(format!(
            "baseline: {} memories of {len} B in chunks of {chunk} B (need at least one memory, \
             a chunk size that is a nonzero multiple of 16 B and no larger than a memory)",
            srcs.len()
        )));
    }
    let r = baseline_raw(
        gpu,
        srcs,
        len / chunk as u64,
        chunk,
        runtime.as_nanos().max(1) as u64,
        sms * 8,
        256,
    )?;
    let s = (r.t_end_ns.saturating_sub(r.t_start_ns)) as f64 * 1e-9;
    Ok(Baseline {
        what: what.into(),
        chunk,
        rate: if s > 0.0 { r.ios as f64 / s } else { 0.0 },
        gbps: if s > 0.0 {
            r.bytes as f64 / s / 1e9
        } else {
            0.0
        },
    })
}
