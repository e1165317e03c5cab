//! `bam bench`: fio-like raw I/O benchmark of GPU-initiated NVMe I/O, on one GPU (here)
//! or several (`gpus.rs`). Its flags are [`IoArgs`] (`io_args.rs`); [`run`] checks them,
//! runs the sweep, and writes the typed report where the flags say (stdout with --json,
//! --output, --plot).

use super::gpus;
use super::io_args::IoArgs;
use super::support::{command_line, commit, driver_version, print_and_save, spinner};
use crate::commands::plot::write_plot;
use crate::error::{CliError, CliResult};
use crate::output::Global;
use anyhow::{bail, Context, Result};
use bam::storage::sim::{Media, SimArray};
use bam::storage::GpuDevice;
use bam::Gpu;
use bam_bench::raw::{baseline, baseline_hbm, run_job, Baseline, JobResult};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// The report of `bam bench` on one GPU.
#[derive(Serialize)]
pub struct IoReport {
    pub command: String,
    pub device: String,
    pub gpu: String,
    pub driver: String,
    pub commit: String,
    pub backend: String,
    pub array: bam::io::Geometry,
    pub jobs: Vec<JobResult>,
    pub baselines: Vec<Baseline>,
    pub ssd_counters: Vec<bam::storage::SsdCounters>,
}

/// Runs `bam bench` (without a subcommand): every option is checked before any GPU
/// work (a bad one is a usage error), then the jobs run on one GPU or several.
pub fn run(a: &IoArgs, g: &Global) -> CliResult<()> {
    let dev = a.check().map_err(|cause| {
        CliError::usage("invalid bench options", cause)
            .on(a.device.clone())
            .hint("see `bam bench --help` for the devices and options")
    })?;
    if a.gpus.len() > 1 {
        // `check` refuses --plot with several GPUs.
        let report = gpus::run(a, &dev, g).map_err(|e| failed(a, &e))?;
        publish(a, &report, g)?;
        if report.jobs.is_empty() {
            return Err(failed(a, &anyhow::anyhow!("no job ran")));
        }
        Ok(())
    } else {
        let report = run_one(a, &dev, g).map_err(|e| failed(a, &e))?;
        publish(a, &report, g)?;
        match &a.plot {
            Some(p) => write_plot(&report, p),
            None => Ok(()),
        }
    }
}

/// A failure of the benchmark (runtime error, exit code 1).
fn failed(a: &IoArgs, e: &anyhow::Error) -> CliError {
    CliError::new("benchmark failed", format!("{e:#}"))
        .on(a.device.clone())
        .hint("run `bam bench --help` for the devices and options; `bam doctor` says what this machine can run")
}

/// Prints `report` as JSON with --json and writes it to --output (a failure to is a
/// failure of the benchmark, as its message has always said).
fn publish(a: &IoArgs, report: &impl Serialize, g: &Global) -> CliResult<()> {
    let json = serde_json::to_string_pretty(report).map_err(|e| failed(a, &e.into()))?;
    print_and_save(&json, a.output.as_ref(), g).map_err(|e| failed(a, &anyhow::anyhow!("{e}")))
}

/// Runs the jobs of `a` on one GPU, printing a row per job unless --json.
fn run_one(a: &IoArgs, dev: &GpuDevice, g: &Global) -> Result<IoReport> {
    let show = !g.json && !g.quiet;
    let gpu = Gpu::new(a.gpus[0]).with_context(|| format!("opening GPU {}", a.gpus[0]))?;
    // The benchmark kernels load now, before a simulated array's controllers run.
    bam_bench::kernels(&gpu).context("loading the benchmark kernels")?;
    let warmup = spinner(
        show,
        format!("warm-up: building {} and filling its media", a.device),
    );
    let arr = dev
        .open(&gpu, &a.io_config())
        .with_context(|| format!("building {}", a.device))?;
    warmup.finish_and_clear();
    let njobs = a.job_count(dev);
    let io = arr.io();
    let mut jobs = Vec::new();
    for s in a.ssd_counts(dev) {
        for &q in &a.queues.0 {
            for &t in &a.threads.0 {
                let job = a.job(t, q, s, jobs.len());
                let sim = SimArray::of(arr.as_ref());
                let prof0 = sim.map(SimArray::profile).transpose()?.unwrap_or_default();
                let bar = spinner(
                    show,
                    format!(
                        "job {}/{njobs}: {:?} bs={} threads={t} queues/ssd={q} ssds={s}",
                        jobs.len() + 1,
                        a.rw,
                        a.bs
                    ),
                );
                let r = run_job(io, &job, dev.model());
                bar.finish_and_clear();
                let mut r = r?;
                if let Some(sim) = sim {
                    r.sim_profile = sim.profile()?.since(&prof0);
                }
                if !g.json {
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
    let baselines = if a.baseline {
        baselines(a, dev, &gpu, &*arr, &geometry, g)?
    } else {
        Vec::new()
    };
    drop(arr);
    Ok(IoReport {
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
    })
}

/// `--baseline`: the raw limits at the same block size, on the SMs the benchmark's
/// threads use; printed unless --json.
fn baselines(
    a: &IoArgs,
    dev: &GpuDevice,
    gpu: &Arc<Gpu>,
    arr: &dyn bam::storage::Storage,
    geometry: &bam::io::Geometry,
    g: &Global,
) -> Result<Vec<Baseline>> {
    let bs = a.bs;
    let rt = Duration::from_secs_f64(a.runtime.min(2.0));
    let user_sms = gpu.sms - geometry.reserved_sms;
    let mut baselines = Vec::new();
    if let GpuDevice::Sim {
        media: Media::Host, ..
    } = dev
    {
        // The same span of host memory as the jobs read: every SSD's whole medium
        // (how much host memory the reads touch changes the rate: docs/simulated-ssd.md).
        if let Some(sim) = SimArray::of(arr) {
            let len = sim.config().capacity_bytes / 4096 * 4096;
            let media: Vec<u64> = (0..geometry.ssds as usize)
                .map(|i| sim.medium_ptr(i))
                .collect();
            baselines.push(baseline(
                gpu,
                "zero-copy host",
                &media,
                len,
                bs,
                rt,
                user_sms,
            )?);
            baselines.push(baseline(
                gpu,
                "zero-copy host, all SMs",
                &media,
                len,
                bs,
                rt,
                gpu.sms,
            )?);
        }
    }
    baselines.push(baseline_hbm(gpu, 1 << 30, bs, rt, user_sms)?);
    if !g.json {
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
    Ok(baselines)
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
    use crate::commands::bench::support::testing;

    fn result(a: &IoArgs, threads: u32, index: usize) -> JobResult {
        let iops = 1e5 * f64::from(threads).sqrt();
        JobResult {
            job: a.job(threads, 128, 1, index),
            ios: 1000,
            bytes: 512_000,
            seconds: 1.0,
            iops,
            gbps: iops * 512.0 / 1e9,
            latency: bam_bench::raw::Latency {
                mean_us: 10.0,
                p50_us: 9.0,
                p99_us: 30.0,
                p999_us: f64::NAN, // null in the JSON
            },
            sm_ghz: 1.98,
            errors: 0,
            verify_failures: 0,
            error_log: vec![],
            sim_profile: Default::default(),
            resident_threads: threads,
            model: None,
        }
    }

    /// The typed jobs of a sweep reach the plot without text in between.
    #[test]
    fn typed_jobs_plot() {
        #[derive(Serialize)]
        struct Jobs {
            device: &'static str,
            gpu: &'static str,
            commit: &'static str,
            jobs: Vec<JobResult>,
        }
        let a: IoArgs = testing::parse(&["--threads", "1024,4096,65536"]);
        let report = Jobs {
            device: "sim",
            gpu: "NVIDIA H100 80GB HBM3 (132 SMs)",
            commit: "0123456789abcdef",
            jobs: (0..3).map(|i| result(&a, a.threads.0[i], i)).collect(),
        };
        let r = crate::plot::Report::from_serialize(&report).unwrap();
        assert_eq!(r.kind(), "bench");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("io.svg");
        write_plot(&report, &out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        for s in [
            "GPU threads",
            "million IOPS",
            "NVIDIA H100 80GB HBM3 @ 0123456",
            "512 B, sim",
        ] {
            assert!(svg.contains(s), "{s}: {svg}");
        }
    }
}
