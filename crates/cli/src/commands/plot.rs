//! `bam plot`: draw a saved benchmark report (`bam bench --output`, `bam bench cache
//! --output`, `bam bench kernels --output`) as an SVG file, without a GPU.

use crate::error::{CliError, CliResult};
use crate::output::{print, print_json, Global};
use crate::plot::Report;
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `bam plot`.
#[derive(Args, Debug)]
#[command(after_help = "\
`bam bench` reports: IOPS and latency (mean, p99) against the swept variable (threads,
queues per SSD or SSDs). `bam bench cache` reports: cache and raw GB/s per study and
pattern, one pair of bars per thread count. `bam bench kernels` reports: each variant's
rate relative to hbm (the plain kernel in GPU memory), one group of bars per kernel.

Examples:
  bam bench --threads 1024,16384,65536 --output run.json && bam plot run.json
  bam plot cache.json --output cache.svg")]
pub struct PlotArgs {
    /// A JSON report of `bam bench`, `bench cache` or `bench kernels` (their --output FILE)
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,
    /// The SVG file to write [default: REPORT with the extension .svg]
    #[arg(short = 'o', long, value_name = "FILE.svg")]
    pub output: Option<PathBuf>,
}

/// The output of `bam plot --json`.
#[derive(Serialize)]
struct PlotResult {
    report: String,
    output: String,
    kind: &'static str,
}

/// Runs `bam plot`.
pub fn run(args: &PlotArgs, g: &Global) -> CliResult<()> {
    let path = args.report.display().to_string();
    let what = "cannot plot";
    let text =
        std::fs::read_to_string(&args.report).map_err(|e| CliError::file(what, &path, &e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        CliError::new(what, format!("{path} is not JSON: {e}"))
            .hint("give the file that `bam bench --output`, `bench cache --output` or `bench kernels --output` wrote")
    })?;
    let report = Report::from_value(v).map_err(|e| {
        CliError::new(what, format!("{path}: {e}")).hint(
            "give the file that `bam bench --output`, `bench cache --output` or `bench kernels --output` wrote",
        )
    })?;
    let kind = report.kind();
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.report.with_extension("svg"));
    let out_name = out.display().to_string();
    report
        .draw(&out)
        .map_err(|e| CliError::new(what, format!("{out_name}: {e}")))?;
    if g.json {
        print_json(&PlotResult {
            report: path,
            output: out_name,
            kind,
        });
    } else {
        print(&format!(
            "plotted the `bam {kind}` report {path} into {out_name}\n"
        ));
    }
    Ok(())
}

/// Draws the typed report that a benchmark just produced (`--plot FILE.svg`).
#[cfg_attr(not(feature = "gpu"), allow(dead_code))] // the benchmarks need the GPU feature
pub fn write_plot<R: Serialize>(report: &R, out: &std::path::Path) -> CliResult<()> {
    let name = out.display().to_string();
    let fail = |e: String| {
        CliError::new("cannot plot", format!("{name}: {e}"))
            .hint("the JSON report (--output FILE) can be plotted later with `bam plot`")
    };
    let report = Report::from_serialize(report).map_err(fail)?;
    crate::outfile::write_via_path(out, |tmp| report.draw(tmp), fail)
}
