//! `bam bench --gpus 0,1`: the raw jobs, and with `--gather` the ported gather kernel, on
//! the first GPU alone and then on every GPU at once, over shared controllers (one
//! backend serving every GPU's queue pairs) or private arrays (one per GPU). The engines
//! are `bam_bench::multi_gpu`'s; this builds the backends, prints and reports.

use super::io_args::IoArgs;
use super::support::{command_line, commit, driver_version, spinner};
use crate::output::Global;
use anyhow::{Context, Result};
use bam::storage::GpuDevice;
use bam::storage::{SsdCounters, Storage};
use bam::{Gpu, IoArray};
use bam_bench::multi_gpu::{gather_scaling, raw_scaling, GatherOptions, GatherScaling, RawScaling};
use serde::Serialize;
use std::sync::Arc;

#[derive(Serialize)]
pub struct GatherStudy {
    /// `warm` (the array fits each cache, read once before the run) or `cold`.
    study: &'static str,
    #[serde(flatten)]
    result: GatherScaling,
}

/// The report of `bam bench` on several GPUs.
#[derive(Serialize)]
pub struct GpusReport {
    pub command: String,
    pub device: String,
    pub gpus: Vec<String>,
    pub driver: String,
    pub commit: String,
    pub sharing: String,
    pub backends: Vec<String>,
    pub array: bam::io::Geometry,
    /// Per job: the first GPU alone, then every GPU at once.
    pub jobs: Vec<RawScaling>,
    pub gather: Vec<GatherStudy>,
    /// Per backend (one when shared), per SSD.
    pub ssd_counters: Vec<Vec<SsdCounters>>,
}

/// Runs `bam bench` with several `--gpus` (checked by [`IoArgs::check`]), printing a
/// row per job and study unless --json.
pub fn run(a: &IoArgs, dev: &GpuDevice, g: &Global) -> Result<GpusReport> {
    let show = !g.json && !g.quiet;
    let gpus = a
        .gpus
        .iter()
        .map(|&n| Gpu::new(n).with_context(|| format!("opening GPU {n}")))
        .collect::<Result<Vec<Arc<Gpu>>>>()?;
    for gpu in &gpus {
        // Every kernel loads now, before a simulated array's controllers run.
        bam_bench::kernels(gpu).context("loading the benchmark kernels")?;
        if a.gather {
            bam_bench::suite_kernels(gpu).context("loading the kernel suite")?;
        }
    }
    let shape = a.io_config();
    let warmup = spinner(
        show,
        format!(
            "warm-up: building {} for GPUs {:?} ({})",
            a.device, a.gpus, a.sharing
        ),
    );
    let backends: Vec<Box<dyn Storage>> = if a.sharing == "private" {
        gpus.iter()
            .map(|gpu| dev.open(gpu, &shape))
            .collect::<bam::Result<_>>()
    } else {
        dev.open_on(&gpus, &shape).map(|b| vec![b])
    }
    .with_context(|| format!("building {} for GPUs {:?}", a.device, a.gpus))?;
    warmup.finish_and_clear();
    let ios: Vec<&IoArray> = backends.iter().flat_map(|b| b.ios()).collect();
    let njobs = a.job_count(dev);
    let mut jobs = Vec::new();
    for s in a.ssd_counts(dev) {
        for &q in &a.queues.0 {
            for &t in &a.threads.0 {
                let j = a.job(t, q, s, jobs.len());
                let bar = spinner(
                    show,
                    format!(
                        "job {}/{njobs}: {:?} bs={} threads={t}/GPU queues/ssd={q} ssds={s}: one GPU, then {}",
                        jobs.len() + 1,
                        a.rw,
                        a.bs,
                        ios.len()
                    ),
                );
                let r = raw_scaling(&ios, &j, dev.model());
                bar.finish_and_clear();
                let r = r?;
                if !g.json {
                    print_raw(&r, &a.gpus);
                }
                jobs.push(r);
            }
        }
    }
    let mut gather = Vec::new();
    if a.gather {
        let geo = ios[0].geometry();
        let cache_bytes = geo.slot_bytes * geo.nslots as u64;
        let cap = geo.capacity_bytes() * geo.ssds as u64;
        // Hits are orders of magnitude faster than misses: the warm study reads 64
        // times more, so that each run lasts tens of milliseconds.
        for (study, bytes, warm, reads) in [
            (
                "warm",
                cache_bytes / 2,
                true,
                a.gather_reads.saturating_mul(64),
            ),
            ("cold", cache_bytes * 8, false, a.gather_reads),
        ] {
            let bytes = bytes.min(cap / 2);
            let o = GatherOptions {
                elements: (bytes / 8).max(1),
                reads,
                warm,
                seed: 0x6a7,
            };
            let bar = spinner(
                show,
                format!(
                    "gather ({study}): {} reads of {} MB through bam::array, one GPU, then {}",
                    o.reads,
                    bytes / 1_000_000,
                    ios.len()
                ),
            );
            let r = gather_scaling(&ios, &o);
            bar.finish_and_clear();
            let r = r.with_context(|| format!("gather ({study})"))?;
            if !g.json {
                print_gather(study, &r);
            }
            gather.push(GatherStudy { study, result: r });
        }
    }
    let ssd_counters = backends
        .iter()
        .map(|b| b.counters())
        .collect::<bam::Result<Vec<_>>>()?;
    let report = GpusReport {
        command: command_line(),
        device: a.device.clone(),
        gpus: gpus
            .iter()
            .map(|gpu| format!("{}: {} ({} SMs)", gpu.ordinal(), gpu.name, gpu.sms))
            .collect(),
        driver: driver_version(),
        commit: commit(),
        sharing: a.sharing.clone(),
        backends: backends.iter().map(|b| b.describe()).collect(),
        array: ios[0].geometry().clone(),
        jobs,
        gather,
        ssd_counters,
    };
    drop(backends);
    Ok(report)
}

fn print_raw(r: &RawScaling, gpus: &[usize]) {
    let j = &r.one.job;
    let each: Vec<String> = r
        .each
        .iter()
        .zip(gpus)
        .map(|(x, g)| format!("GPU {g} {:.2}", x.iops / 1e6))
        .collect();
    println!(
        "{:?} bs={} threads={}/GPU queues/ssd={} ssds={}: one GPU {:>8.2} M IOPS | {} | all {:>8.2} M IOPS {:>7.2} GB/s = {:.2}x one GPU",
        j.rw,
        j.bs,
        j.threads,
        j.queues,
        j.ssds,
        r.one.iops / 1e6,
        each.join(", "),
        r.total_iops / 1e6,
        r.total_gbps,
        r.ratio
    );
}

/// A hit rate for people: two decimals, or "n/a" when hits were not counted.
fn rate(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_string(), |r| format!("{r:.2}"))
}

fn print_gather(study: &str, r: &GatherScaling) {
    let each: Vec<String> = r
        .each
        .iter()
        .map(|x| {
            format!(
                "GPU {} {:.1} M/s (hits {})",
                x.gpu,
                x.reads_per_s / 1e6,
                rate(x.hit_rate)
            )
        })
        .collect();
    println!(
        "gather through bam::array ({study}, {} MB, {} B lines): one GPU {:.1} M reads/s (hits {}) | {} | all {:.1} M reads/s = {:.2}x one GPU; every value checked",
        r.options.elements * 8 / 1_000_000,
        r.line_bytes,
        r.one.reads_per_s / 1e6,
        rate(r.one.hit_rate),
        each.join(", "),
        r.total_reads_per_s / 1e6,
        r.ratio
    );
}
