//! `bam bench`: fio-like raw I/O benchmark of GPU-initiated NVMe I/O.
//!
//! Wiring: `main.rs` has `Command::Bench(BenchCommand)`, which holds these
//! [`BenchArgs`] (run by [`run`]) or the subcommand `bam bench cache`
//! (`commands/bench_cache.rs`). It refers to nothing else in the CLI: `main.rs` turns
//! [`check`]'s errors into usage errors and draws `--plot` from the report [`run`]
//! returns.

use anyhow::{bail, Context, Result};
use bam::device::{GpuDevice, Shape};
use bam::{Gpu, Media};
use bam_bench::raw::{baseline, baseline_hbm, run_job, Baseline, Job, JobResult, Rw};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// A comma-separated list of counts of at least 1 (`1024,65536`): one job per value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts(pub Vec<u32>);

impl std::str::FromStr for Counts {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        s.split(',')
            .map(|x| match x.trim().parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(format!("`{x}` is not a whole number from 1 to 2^32 - 1")),
            })
            .collect::<std::result::Result<_, _>>()
            .map(Counts)
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&v.join(","))
    }
}

impl Counts {
    fn max(&self) -> u32 {
        self.0.iter().copied().max().unwrap_or(1)
    }
}

/// `--bs`: a power of two from 512 to 1M, in the size grammar of every size flag.
fn parse_bs(s: &str) -> std::result::Result<u32, String> {
    let n = bam_nvme::device::parse_size(s)?;
    if !(512..=(1 << 20)).contains(&n) || !n.is_power_of_two() {
        return Err(format!(
            "{n} bytes: a power of two from 512 to 1M (512, 4K, 64K, 1M)"
        ));
    }
    Ok(n as u32)
}

/// `--rw`.
fn parse_rw(s: &str) -> std::result::Result<Rw, String> {
    s.parse()
}

/// `--runtime`: seconds, more than 0.
fn parse_seconds(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= 1e6 => Ok(x),
        _ => Err("a number of seconds above 0 (e.g. 3, 0.5)".into()),
    }
}

/// Arguments of `bam bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// Device GPU threads drive: `sim[:PRESET][,ssds=N][,media=hbm|host|file:PATH][,capacity=SIZE]`
    /// (the simulated array; presets: ideal, optane-p5800x, samsung-980pro, pm1743),
    /// `hostctl[:ssds=N][,capacity=SIZE][,lba=BYTES][,media=ram|file:PATH][,workers=N]` (the
    /// controller model on CPU threads, across PCIe), or `kmod:/dev/bam-nvme0[,...]` (real SSDs).
    #[arg(long, value_name = "DEV", default_value = "sim")]
    pub device: String,
    /// Access pattern: randread, randwrite, read, write or randrw
    #[arg(long, value_name = "PATTERN", default_value = "randread", value_parser = parse_rw)]
    pub rw: Rw,
    /// Percentage of reads for randrw (0 to 100)
    #[arg(long, value_name = "PCT", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub rwmix: u32,
    /// Bytes per I/O: a power of two from 512 to 1M (binary units: 4K, 64K, 1M)
    #[arg(long, value_name = "BYTES", default_value = "512", value_parser = parse_bs)]
    pub bs: u32,
    /// GPU threads, each with one I/O in flight (comma list = sweep)
    #[arg(long, value_name = "N,...", default_value = "65536")]
    pub threads: Counts,
    /// I/O queues per SSD (comma list = sweep; the array gets the largest)
    #[arg(long, value_name = "N,...", default_value = "128")]
    pub queues: Counts,
    /// Entries per queue (2 to 65536)
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(2..=65536))]
    pub qdepth: u32,
    /// Number of SSDs (overrides `ssds=` of --device; comma list = sweep)
    #[arg(long, value_name = "N,...")]
    pub ssds: Option<Counts>,
    /// Run time per job in seconds
    #[arg(long, value_name = "SECS", default_value_t = 3.0, value_parser = parse_seconds)]
    pub runtime: f64,
    /// I/Os per thread instead of a run time
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ios: Option<u64>,
    /// Verify every read against the pattern; writes are read back
    #[arg(long)]
    pub verify: bool,
    /// Use the warp API (one request per warp)
    #[arg(long)]
    pub warp: bool,
    /// Also measure the raw limits in the same run: GPU random reads of the same block size
    /// from the array's host media (with `media=host`: every SSD's whole medium, the span the
    /// jobs read) and from 1 GiB of HBM
    #[arg(long)]
    pub baseline: bool,
    /// SMs reserved for the simulated controllers
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub sim_sms: u32,
    /// Timeout of every GPU-side wait, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Threads per block (0 = up to 128). 1 puts every thread in its own warp, so that
    /// the outstanding I/O count stays at --threads (model checks)
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub threads_per_block: u32,
    /// Print JSON instead of the table (set from the global `--json`).
    #[arg(skip)]
    pub json: bool,
    /// No progress display (set from the global `--quiet`).
    #[arg(skip)]
    pub quiet: bool,
    /// Also write the JSON report to FILE
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also draw IOPS and latency against the sweep (threads, queues or SSDs) as an SVG
    /// to FILE (`bam plot REPORT.json` draws one from a saved report)
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// GPUs (CUDA ordinals, `0,1`). With several, every job runs on the first GPU alone,
    /// then on all of them at once (the same job on each, started together), and the
    /// report gives per-GPU and total IOPS and the ratio to one GPU (docs/multi-gpu.md)
    #[arg(long, value_name = "N,...", default_value = "0", value_parser = parse_gpu_list)]
    pub gpus: GpuList,
    /// With several --gpus: `shared` (one backend serves every GPU's queue pairs on the
    /// same controllers; a simulated array runs on the first GPU and serves the others
    /// through peer access) or `private` (each GPU gets its own simulated or modelled
    /// array: per-GPU scaling of the I/O stack; not for kmod:)
    #[arg(long, value_name = "MODE", default_value = "shared", value_parser = ["shared", "private"])]
    pub sharing: String,
    /// With several --gpus: also run the kernel suite's gather ported to bam::array<u64>,
    /// data-parallel (each GPU its own cache over the same SSDs, a read-only array of the
    /// same data, its share of the reads), on warm caches (array = half a cache) and
    /// cold ones (array = 8 caches), against the first GPU doing all the reads (needs
    /// --sharing shared)
    #[arg(long)]
    pub gather: bool,
    /// Random reads of each cold --gather run (the warm runs read 64 times more)
    #[arg(long, value_name = "N", default_value_t = 1 << 25,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub gather_reads: u64,
}

/// `--gpus`: distinct CUDA ordinals, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuList(pub Vec<usize>);

impl std::ops::Deref for GpuList {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.0
    }
}

fn parse_gpu_list(s: &str) -> std::result::Result<GpuList, String> {
    bam::device::parse_gpus(s)
        .map(GpuList)
        .map_err(|e| e.to_string())
}

/// Checks what the flags cannot check one by one, before any GPU work: the device string,
/// `--ssds` against it, `--verify` against the backend. Returns the device to open.
pub fn check(a: &BenchArgs) -> std::result::Result<GpuDevice, String> {
    let mut dev: GpuDevice = a.device.parse().map_err(|e: bam::Error| e.to_string())?;
    let ssds = a.ssds.as_ref().map_or(dev.ssds(), Counts::max);
    dev.set_ssds(ssds).map_err(|e| format!("--ssds: {e}"))?;
    if matches!(dev, GpuDevice::Kmod { .. })
        && a.verify
        && !matches!(a.rw, Rw::RandWrite | Rw::Write)
    {
        return Err(
            "--verify with reads needs media that hold the verification pattern (sim:, hostctl:); \
             on real SSDs verify writes (--rw randwrite --verify reads them back)"
                .into(),
        );
    }
    if a.gpus.len() > 1 {
        if a.sharing == "private" && matches!(dev, GpuDevice::Kmod { .. }) {
            return Err(
                "--sharing private gives each GPU its own array; real SSDs (kmod:) can only be \
                 shared: use --sharing shared"
                    .into(),
            );
        }
        if a.gather && a.sharing == "private" {
            return Err(
                "--gather reads one array's data from every GPU: use --sharing shared".into(),
            );
        }
        if a.plot.is_some() {
            return Err(
                "--plot draws single-GPU sweeps; with several --gpus use --output and \
                        scripts/plot_multi_gpu.py"
                    .into(),
            );
        }
    } else if a.gather {
        return Err("--gather compares GPUs: give several --gpus (e.g. --gpus 0,1)".into());
    }
    for (flag, path) in [("--output", &a.output), ("--plot", &a.plot)] {
        if let Some(dir) = path.as_ref().and_then(|p| p.parent()) {
            if !dir.as_os_str().is_empty() && !dir.is_dir() {
                return Err(format!(
                    "{flag} {}: no directory {}",
                    path.as_ref()
                        .map_or(String::new(), |p| p.display().to_string()),
                    dir.display()
                ));
            }
        }
    }
    Ok(dev)
}

/// A spinner on stderr while the GPU works (hidden with --json, --quiet or when stderr
/// is not a terminal): what runs and for how long so far.
pub fn spinner(visible: bool, msg: String) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !visible || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
    {
        bar.set_style(style);
    }
    bar.set_message(msg);
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
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

/// The I/O layer the jobs of `a` need on `dev`.
pub fn shape(a: &BenchArgs, dev: &GpuDevice) -> Shape {
    let max_threads = a.threads.max();
    Shape {
        queues: a.queues.max(),
        depth: a.qdepth,
        slot_bytes: (a.bs as u64).max(512),
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
    }
}

/// The job of `a` at one point of its sweeps (`index` seeds it).
pub fn job(a: &BenchArgs, threads: u32, queues: u32, ssds: u32, index: usize) -> Job {
    Job {
        rw: a.rw,
        rwmix_read: a.rwmix,
        bs: a.bs,
        threads,
        queues,
        ssds,
        runtime: Duration::from_secs_f64(a.runtime),
        ios_per_thread: a.ios,
        verify: a.verify,
        gen: if matches!(a.rw, Rw::RandRead | Rw::Read) {
            0
        } else {
            1
        },
        warp_io: a.warp,
        seed: 0x5eed ^ index as u64,
        span_lbas: 0,
        threads_per_block: a.threads_per_block,
    }
}

/// Runs `bam bench` on one GPU (several: `bench_gpus::run`); returns the JSON report (also printed with --json and written to
/// --output).
pub fn run(a: &BenchArgs) -> Result<String> {
    let show = !a.json && !a.quiet;
    let dev = check(a).map_err(anyhow::Error::msg)?;
    let rw = a.rw;
    let bs = a.bs;
    let threads = &a.threads.0;
    let queues = &a.queues.0;
    let ssds_list = a
        .ssds
        .as_ref()
        .map_or_else(|| vec![dev.ssds()], |s| s.0.clone());
    let gpu = Gpu::new(a.gpus[0]).with_context(|| format!("opening GPU {}", a.gpus[0]))?;
    // The benchmark kernels load now, before a simulated array's controllers run.
    bam_bench::kernels(&gpu).context("loading the benchmark kernels")?;
    let shape = shape(a, &dev);
    let warmup = spinner(
        show,
        format!("warm-up: building {} and filling its media", a.device),
    );
    let arr = dev
        .open(&gpu, &shape)
        .with_context(|| format!("building {}", a.device))?;
    warmup.finish_and_clear();
    let njobs = ssds_list.len() * queues.len() * threads.len();
    let io = arr.io();
    let mut jobs = Vec::new();
    for &s in &ssds_list {
        for &q in queues {
            for &t in threads {
                let job = job(a, t, q, s, jobs.len());
                let prof0 = arr.profile()?;
                let bar = spinner(
                    show,
                    format!(
                        "job {}/{njobs}: {rw:?} bs={bs} threads={t} queues/ssd={q} ssds={s}",
                        jobs.len() + 1
                    ),
                );
                let r = run_job(io, &job, dev.model());
                bar.finish_and_clear();
                let mut r = r?;
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
            if let Some(sim) = bam::SimArray::of(&*arr) {
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
        crate::outfile::write_file(p, json.as_bytes(), "cannot write the report")
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(json)
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
    fn flag_values() {
        assert_eq!(parse_bs("512"), Ok(512));
        assert_eq!(parse_bs("4k"), Ok(4096));
        assert_eq!(parse_bs("4KiB"), Ok(4096));
        assert_eq!(parse_bs("1M"), Ok(1 << 20));
        for bad in ["3", "256", "2M", "3000", "30000000000000G", "4KB"] {
            assert!(parse_bs(bad).is_err(), "{bad}");
        }
        assert_eq!("1,2, 3".parse::<Counts>(), Ok(Counts(vec![1, 2, 3])));
        assert!("0".parse::<Counts>().is_err());
        assert!("1,,2".parse::<Counts>().is_err());
        assert!(parse_rw("foo").is_err());
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("nan").is_err());
        assert_eq!(parse_gpu_list("0,1"), Ok(GpuList(vec![0, 1])));
        assert!(parse_gpu_list("1,1").is_err());
        assert!(parse_gpu_list("x").is_err());
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
    }
}
