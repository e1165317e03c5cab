//! `bam bench`: fio-like raw I/O benchmark of GPU-initiated NVMe I/O.
//!
//! Wiring: `main.rs` has `Command::Bench(BenchCommand)`, which holds these
//! [`BenchArgs`] (run by [`run`]) or the subcommand `bam bench cache`
//! (`commands/bench_cache.rs`). This file is also compiled on its own by
//! `crates/bam/examples/bam-bench.rs`, so it refers to nothing else in the CLI.

use anyhow::{bail, Context, Result};
use bam::bench::{baseline, baseline_hbm, run_job, Baseline, Job, JobResult, Rw};
use bam::device::{GpuDevice, Shape};
use bam::{Gpu, Media};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `bam bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// Device GPU threads drive: `sim[:PRESET][,ssds=N][,media=hbm|host|file:PATH][,capacity=SIZE]`
    /// (the simulated array; presets: ideal, optane-p5800x, samsung-980pro, pm1743),
    /// `hostctl[:ssds=N][,capacity=SIZE][,lba=BYTES][,media=ram|file:PATH][,workers=N]` (the
    /// controller model on CPU threads, across PCIe), or `kmod:/dev/bam-nvme0[,...]` (real SSDs).
    #[arg(long, default_value = "sim")]
    pub device: String,
    /// randread | randwrite | read | write | randrw
    #[arg(long, default_value = "randread")]
    pub rw: String,
    /// Percentage of reads for randrw.
    #[arg(long, default_value_t = 50)]
    pub rwmix: u32,
    /// Block size per I/O (512 .. 1M; suffixes k, M).
    #[arg(long, default_value = "512")]
    pub bs: String,
    /// GPU threads, each with one I/O in flight (comma list = sweep).
    #[arg(long, default_value = "65536")]
    pub threads: String,
    /// I/O queues per SSD (comma list = sweep; the array gets the largest).
    #[arg(long, default_value = "128")]
    pub queues: String,
    /// Entries per queue.
    #[arg(long, default_value_t = 1024)]
    pub qdepth: u32,
    /// Number of SSDs (overrides `ssds=` of --device; comma list = sweep).
    #[arg(long)]
    pub ssds: Option<String>,
    /// Run time per job in seconds.
    #[arg(long, default_value_t = 3.0)]
    pub runtime: f64,
    /// I/Os per thread instead of a run time.
    #[arg(long)]
    pub ios: Option<u64>,
    /// Verify every read against the pattern; writes are read back.
    #[arg(long)]
    pub verify: bool,
    /// Use the warp API (one request per warp).
    #[arg(long)]
    pub warp: bool,
    /// Also measure the raw limits in the same run: GPU random reads of the same block size
    /// from the array's host media (with `media=host`: every SSD's whole medium, the span the
    /// jobs read) and from 1 GiB of HBM.
    #[arg(long)]
    pub baseline: bool,
    /// SMs reserved for the simulated controllers.
    #[arg(long, default_value_t = 16)]
    pub sim_sms: u32,
    /// Timeout of every GPU-side wait, ms.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,
    /// Threads per block (0 = up to 128). 1 puts every thread in its own warp, so that
    /// the outstanding I/O count stays at --threads (model checks).
    #[arg(long, default_value_t = 0)]
    pub threads_per_block: u32,
    /// Print JSON instead of the table (set from the global `--json`).
    #[arg(skip)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
}

fn parse_size(s: &str) -> Result<u64> {
    Ok(bam::device::parse_size(s)?)
}

fn parse_list(s: &str) -> Result<Vec<u32>> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<u32>()
                .with_context(|| format!("bad number `{x}`"))
        })
        .collect()
}

#[derive(Serialize)]
struct Report {
    command: String,
    device: String,
    gpu: String,
    driver: String,
    commit: String,
    backend: String,
    array: bam::io::Geometry,
    jobs: Vec<JobResult>,
    baselines: Vec<Baseline>,
    ssd_counters: Vec<bam::storage::SsdCounters>,
}

/// Runs `bam bench`.
pub fn run(a: &BenchArgs) -> Result<()> {
    let mut dev: GpuDevice = a.device.parse()?;
    let rw: Rw = a.rw.parse().map_err(anyhow::Error::msg)?;
    let bs = u32::try_from(parse_size(&a.bs)?).context("--bs")?;
    if !(512..=(1 << 20)).contains(&bs) || !bs.is_power_of_two() {
        bail!("--bs {}: a power of two from 512 to 1M", a.bs);
    }
    let threads = parse_list(&a.threads)?;
    let queues = parse_list(&a.queues)?;
    if threads.contains(&0) || queues.contains(&0) {
        bail!("--threads and --queues take numbers of at least 1");
    }
    if a.rwmix > 100 {
        bail!("--rwmix {}: a percentage, 0 to 100", a.rwmix);
    }
    let ssds_list = match &a.ssds {
        Some(s) => parse_list(s)?,
        None => vec![dev.ssds()],
    };
    dev.set_ssds(*ssds_list.iter().max().unwrap_or(&1))?;
    let max_threads = *threads.iter().max().unwrap_or(&1);
    let gpu = Gpu::new(0).context("opening the GPU")?;
    let shape = Shape {
        queues: *queues.iter().max().unwrap_or(&1),
        depth: a.qdepth,
        slot_bytes: (bs as u64).max(512),
        nslots: if a.warp {
            max_threads.div_ceil(32)
        } else {
            max_threads.div_ceil(128) * 128
        },
        timeout: Duration::from_millis(a.timeout_ms),
        sim_sms: a.sim_sms,
        fill_pattern: !matches!(
            dev,
            GpuDevice::Sim {
                media: Media::File(_),
                ..
            }
        ) || a.verify,
    };
    if matches!(dev, GpuDevice::Kmod { .. }) && a.verify && !matches!(rw, Rw::RandWrite | Rw::Write)
    {
        bail!(
            "--verify with reads needs media that hold the verification pattern (sim:, hostctl:);              on real SSDs verify writes (--rw randwrite --verify reads them back)"
        );
    }
    let arr = dev
        .open(&gpu, &shape)
        .with_context(|| format!("building {}", a.device))?;
    let io = arr.io();
    let mut jobs = Vec::new();
    for &s in &ssds_list {
        for &q in &queues {
            for &t in &threads {
                let job = Job {
                    rw,
                    rwmix_read: a.rwmix,
                    bs,
                    threads: t,
                    queues: q,
                    ssds: s,
                    runtime: Duration::from_secs_f64(a.runtime),
                    ios_per_thread: a.ios,
                    verify: a.verify,
                    gen: if matches!(rw, Rw::RandRead | Rw::Read) {
                        0
                    } else {
                        1
                    },
                    warp_io: a.warp,
                    seed: 0x5eed ^ jobs.len() as u64,
                    span_lbas: 0,
                    threads_per_block: a.threads_per_block,
                };
                let prof0 = arr.profile()?;
                let mut r = run_job(io, &job, dev.model())?;
                r.sim_profile = arr.profile()?.since(&prof0);
                if !a.json {
                    print_row(&r);
                }
                if r.errors > 0 || r.verify_failures > 0 {
                    for e in r.error_log.iter().take(5) {
                        eprintln!("  error: {e}");
                    }
                    bail!(
                        "{} I/O errors, {} verification failures",
                        r.errors,
                        r.verify_failures
                    );
                }
                jobs.push(r);
            }
        }
    }
    let counters = arr.counters()?;
    let geometry = io.geometry().clone();
    let backend = arr.describe();
    let mut baselines = Vec::new();
    if a.baseline {
        let rt = Duration::from_secs_f64(a.runtime.min(2.0));
        let user_sms = gpu.sms - geometry.reserved_sms;
        // Raw limits at the same block size, on the SMs the benchmark's threads use.
        if let GpuDevice::Sim {
            media: Media::Host, ..
        } = dev
        {
            // The same span of host memory as the jobs read: every SSD's whole medium
            // (how much host memory the reads touch changes the rate: docs/simulated-ssd.md).
            if let Some(sim) = arr.as_sim() {
                let len = sim.config().capacity_bytes / 4096 * 4096;
                let media: Vec<u64> = (0..geometry.ssds as usize)
                    .map(|i| sim.medium_ptr(i))
                    .collect();
                baselines.push(baseline(
                    &gpu,
                    "zero-copy host",
                    &media,
                    len,
                    bs,
                    rt,
                    user_sms,
                )?);
                baselines.push(baseline(
                    &gpu,
                    "zero-copy host, all SMs",
                    &media,
                    len,
                    bs,
                    rt,
                    gpu.sms,
                )?);
            }
        }
        baselines.push(baseline_hbm(&gpu, 1 << 30, bs, rt, user_sms)?);
        if !a.json {
            for b in &baselines {
                println!(
                    "baseline {:<26} {:>7} B chunks: {:>9.2} M/s  {:>8.2} GB/s",
                    b.what,
                    b.chunk,
                    b.rate / 1e6,
                    b.gbps
                );
            }
        }
    }
    drop(arr);
    let report = Report {
        command: command_line(),
        device: a.device.clone(),
        gpu: format!("{} ({} SMs)", gpu.name, gpu.sms),
        driver: driver_version(),
        commit: commit(),
        backend,
        array: geometry,
        jobs,
        baselines,
        ssd_counters: counters,
    };
    let json = serde_json::to_string_pretty(&report)?;
    if a.json {
        println!("{json}");
    }
    if let Some(p) = &a.output {
        std::fs::write(p, &json).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// The command line, for benchmark reports.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// The NVIDIA driver's version line, or "unknown".
pub fn driver_version() -> String {
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|v| v.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

/// The commit the binary was built from (`BAM_COMMIT` at build time, else at run time;
/// empty when neither is set).
pub fn commit() -> String {
    option_env!("BAM_COMMIT")
        .map(String::from)
        .or_else(|| std::env::var("BAM_COMMIT").ok())
        .unwrap_or_default()
}

fn print_row(r: &JobResult) {
    let j = &r.job;
    let mut model = r
        .model
        .map(|m| {
            format!(
                "  model at {:.0} outstanding (resident)/SSD: {:.3} M IOPS, mean {:.2} us (measured/model: IOPS {:.3}, mean {:.3})",
                m.outstanding_per_ssd,
                m.iops / 1e6,
                m.mean_us,
                r.iops / m.iops,
                r.latency.mean_us / m.mean_us
            )
        })
        .unwrap_or_default();
    let p = &r.sim_profile;
    if p.commands > 0 {
        model += &format!(
            "  [sim warp0: {} loops, {:.0} cyc/loop, {:.0} cyc/cmd fetch+data, {:.0} cyc/cmd post, {:.1} cmds/loop]",
            p.loops,
            p.cycles as f64 / p.loops.max(1) as f64,
            p.fetch_cycles as f64 / p.commands as f64,
            p.post_cycles as f64 / p.commands as f64,
            p.commands as f64 / p.loops.max(1) as f64
        );
    }
    println!(
        "{:?} bs={} threads={} queues/ssd={} ssds={}: {:>8.2} M IOPS  {:>7.2} GB/s  lat mean {:.1} p50 {:.1} p99 {:.1} p99.9 {:.1} us{}{}",
        j.rw,
        j.bs,
        j.threads,
        j.queues,
        j.ssds,
        r.iops / 1e6,
        r.gbps,
        r.latency.mean_us,
        r.latency.p50_us,
        r.latency.p99_us,
        r.latency.p999_us,
        if j.verify { "  verified" } else { "" },
        model
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_list("1,2, 3").unwrap(), vec![1, 2, 3]);
    }
}
