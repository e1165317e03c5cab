//! `bam bench cache`: the cache study of `bam_bench::cache_study` (hit and miss bandwidth of
//! the software cache against raw reads of the same pattern, single-line miss latency)
//! from the command line. It builds a [`CacheBenchOptions`] and checks it with
//! [`CacheBenchOptions::validate`].

use super::support::{cause, commit, line_bytes, open_gpu, spinner, write_report, Outputs};
use crate::error::{CliError, CliResult};
use crate::output::{self, Global};
use crate::units::SizeArg;
use bam_bench::cache_study::{run_cache_bench, CacheBenchOptions, CacheBenchReport, Point};
use std::path::PathBuf;

/// `bam bench cache --help`'s description (set on the subcommand in `bench/mod.rs`).
pub const LONG_ABOUT: &str = "\
Software cache benchmark: bandwidth of the cache on hits and on misses, and the latency of
one miss, each measured against raw reads of the same pattern, with the same data, in the
same process (the study of the BaM dissertation, §5.5 and §6.2).

What is measured (8-byte elements; every value read is checked, and `wrong` must be 0):
  hit      --hit-size of data on a simulated SSD (media in GPU memory), all of it in the
           cache after one warm-up pass. Patterns: linear (thread t reads t, t+T, ...;
           --reps passes), random (--random-per-thread uniformly random elements per
           thread) and cla (cache-line-aware: a warp takes a whole line and reads all of
           its elements; --reps passes). Raw: the same pattern over a plain array in GPU
           memory (HBM).
  miss     --miss-size of data on a simulated SSD whose media is pinned host memory,
           read once through a cold cache of --miss-slots lines, patterns linear and
           cla. Raw: the same pattern reading that host memory directly (zero-copy).
  latency  one warp reads one line at a time, --latency-samples lines, each a
           single-line miss (ideal SSD, media in GPU memory): p50, p99, min, mean.

--device picks the backend (default sim, the dissertation's setting): with
hostctl:... (controller models on CPU threads across PCIe) or kmod:/dev/bam-nvme0,...
(real SSDs) the hit study runs the same way over that storage, and the miss study's raw
figure is raw GPU-initiated reads of whole lines from the same SSDs (`bam bench`'s path),
since their media cannot be read directly.

The hit and miss studies run at every --threads count. Bandwidth is decimal GB/s of
8-byte elements delivered to GPU threads; ratio = cache / raw.

Needs an NVIDIA GPU (compute capability 9.0 or newer) and its driver. GPU memory: about
3 x --hit-size, plus --miss-slots lines; host memory: --miss-size, pinned.";

const AFTER_HELP: &str = "\
Output: a table (study, pattern, threads, cache GB/s, raw GB/s, ratio, wrong values) and
the latency line; with --json, the report as JSON on stdout (points with cache
statistics, the options, device, driver, commit, command). --output FILE writes that
JSON report too, --plot FILE.svg draws it. Exit code 1 when any value read was wrong (the report is still
printed and written), 2 for bad options (checked before the GPU is touched).

Examples:
  bam bench cache                                     the full study with the defaults
  bam bench cache --hit-size 256M --miss-size 256M --threads 65536,262144 --output cache.json
  bam bench cache --line 512 --threads 65536 --json   512 B lines, one thread count, JSON";

fn defaults() -> CacheBenchOptions {
    CacheBenchOptions::default()
}

/// A comma-separated list of counts (`4096,65536`), shown the same way in `--help`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountList(pub Vec<u32>);

impl std::str::FromStr for CountList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(|x| {
                x.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("`{x}` is not a whole number from 0 to 2^32 - 1"))
            })
            .collect::<Result<_, _>>()
            .map(CountList)
    }
}

impl std::fmt::Display for CountList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&v.join(","))
    }
}

/// Arguments of `bam bench cache`; the defaults are `CacheBenchOptions::default()`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct CacheArgs {
    /// Storage: sim[:PRESET,...] (simulated SSDs; the study sets their media), hostctl[:...],
    /// file:PATH,... (files; grown to the study's size) or kmod:/dev/bam-nvme0[,...] (see
    /// `bam bench --help`)
    #[arg(long, value_name = "DEV", default_value = "sim")]
    pub device: String,
    /// Data in the hit study, all of it cached (binary units: 256M, 1G; whole lines)
    #[arg(long, value_name = "SIZE", default_value_t = SizeArg(defaults().hit_bytes))]
    pub hit_size: SizeArg,
    /// Data in the miss study, media in pinned host memory (whole lines)
    #[arg(long, value_name = "SIZE", default_value_t = SizeArg(defaults().miss_bytes))]
    pub miss_size: SizeArg,
    /// Cache lines (slots) in the miss study
    #[arg(long, value_name = "N", default_value_t = defaults().miss_slots)]
    pub miss_slots: u32,
    /// Cache line size in bytes: a multiple of 512 from 512 to 65536 (4096 or 4K)
    #[arg(long, value_name = "BYTES", default_value_t = SizeArg(defaults().line_bytes as u64))]
    pub line: SizeArg,
    /// GPU thread counts to measure, comma-separated; multiples of 256
    #[arg(long, value_name = "N,...", default_value_t = CountList(defaults().threads))]
    pub threads: CountList,
    /// Random reads per thread in the hit study's random pattern
    #[arg(long, value_name = "N", default_value_t = defaults().random_per_thread)]
    pub random_per_thread: u64,
    /// Passes over the data per hit measurement (linear and cla)
    #[arg(long, value_name = "N", default_value_t = defaults().reps)]
    pub reps: u32,
    /// Lines read one by one for the miss latency
    #[arg(long, value_name = "N", default_value_t = defaults().latency_samples)]
    pub latency_samples: u32,
    /// I/O queues per simulated SSD
    #[arg(long, value_name = "N", default_value_t = defaults().queues)]
    pub queues: u32,
    /// SMs reserved for the simulated SSD controllers
    #[arg(long, value_name = "N", default_value_t = defaults().sim_sms)]
    pub sim_sms: u32,
    /// Also write the JSON report to FILE
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also draw cache and raw GB/s per pattern and thread count as an SVG to FILE
    /// (`bam plot REPORT.json` draws one from a saved report)
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

const WHAT: &str = "cannot run the cache benchmark";
const HELP_HINT: &str = "see `bam bench cache --help`";

impl CacheArgs {
    /// The benchmark's options, checked: a usage error names the broken rule.
    pub fn options(&self) -> CliResult<CacheBenchOptions> {
        let usage = |cause: String| CliError::usage(WHAT, cause).hint(HELP_HINT);
        let line_bytes = line_bytes(&self.line).map_err(usage)?;
        let o = CacheBenchOptions {
            hit_bytes: self.hit_size.0,
            miss_bytes: self.miss_size.0,
            miss_slots: self.miss_slots,
            line_bytes,
            threads: self.threads.0.clone(),
            random_per_thread: self.random_per_thread,
            reps: self.reps,
            latency_samples: self.latency_samples,
            queues: self.queues,
            sim_sms: self.sim_sms,
        };
        o.validate().map_err(|e| usage(cause(e)))?;
        Ok(o)
    }
}

/// Runs `bam bench cache`.
pub fn run(a: &CacheArgs, g: &Global) -> CliResult<()> {
    // Everything the user typed is checked before the GPU is touched.
    let opts = a.options()?;
    let (device, gpu) = open_gpu(WHAT, &a.device, HELP_HINT)?;
    if !g.json {
        output::print(&format!(
            "cache benchmark on {} ({} SMs): {} B lines; hits over {} in GPU memory, misses over {} \
             of {device} through {} slots\n{}\n",
            gpu.name,
            gpu.sms,
            opts.line_bytes,
            crate::units::binary_bytes(opts.hit_bytes),
            crate::units::binary_bytes(opts.miss_bytes),
            opts.miss_slots,
            header()
        ));
    }
    let show = !g.json && !g.quiet;
    let mut bar = spinner(show, "measuring the first point (warm-up included)".into());
    let report = run_cache_bench(&gpu, &opts, &device, &mut |p| {
        bar.finish_and_clear();
        if !g.json {
            output::print(&(row(p) + "\n"));
        }
        bar = spinner(show, "measuring the next point".into());
    });
    bar.finish_and_clear();
    let report = report.map_err(|e| {
        CliError::new("cache benchmark failed", e.to_string()).hint(
            "rerun with -v for the driver's logs; the options are in `bam bench cache --help`",
        )
    })?;
    let failure = wrong_values(&report.points).map(|cause| {
        CliError::new("the cache benchmark read wrong values", cause).hint(
            "the cache or the raw reads returned data that differs from the medium; \
             rerun with -v and report it with the JSON report",
        )
    });
    if !g.json {
        output::print(&(latency_line(&report) + "\n"));
    }
    // The library's report has no commit: it goes in here.
    let to = Outputs {
        output: a.output.as_ref(),
        plot: a.plot.as_ref(),
    };
    write_report(&report, Some(commit()), failure, to, g)
}

fn header() -> String {
    format!(
        "{:<5} {:<7} {:>8} {:>11} {:>10} {:>7} {:>7}",
        "study", "pattern", "threads", "cache GB/s", "raw GB/s", "ratio", "wrong"
    )
}

fn row(p: &Point) -> String {
    format!(
        "{:<5} {:<7} {:>8} {:>11.1} {:>10.1} {:>7.3} {:>7}",
        p.study, p.pattern, p.threads, p.cache_gbps, p.raw_gbps, p.ratio, p.wrong_values
    )
}

fn latency_line(r: &CacheBenchReport) -> String {
    let l = &r.miss_latency;
    let phases: Vec<String> = l
        .phases_p50_us
        .iter()
        .map(|(name, us)| format!("{name} {us:.2}"))
        .collect();
    format!(
        "miss latency, one warp, {} B line, {} samples: p50 {:.2} us  p99 {:.2} us  min {:.2} us  mean {:.2} us\n  \
         steps of a lone read, p50 us: {}",
        l.line_bytes,
        l.samples,
        l.p50_us,
        l.p99_us,
        l.min_us,
        l.mean_us,
        phases.join(", ")
    )
}

/// The failure to report when any point read wrong values.
fn wrong_values(points: &[Point]) -> Option<String> {
    let bad: Vec<&Point> = points.iter().filter(|p| p.wrong_values != 0).collect();
    let first = bad.first()?;
    Some(format!(
        "{} of {} points read wrong values ({} wrong in total; first: {} {} at {} threads, {} wrong)",
        bad.len(),
        points.len(),
        bad.iter().map(|p| p.wrong_values).sum::<u64>(),
        first.study,
        first.pattern,
        first.threads,
        first.wrong_values
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::bench::support::{testing, Report};

    fn parse(args: &[&str]) -> CacheArgs {
        testing::parse(args)
    }

    #[test]
    fn defaults_are_the_library_defaults() {
        let o = parse(&[]).options().unwrap();
        let d = CacheBenchOptions::default();
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            serde_json::to_value(&d).unwrap()
        );
    }

    #[test]
    fn flags_set_every_option() {
        let o = parse(&[
            "--hit-size",
            "1536K",
            "--miss-size",
            "3M",
            "--miss-slots",
            "1024",
            "--line",
            "1536",
            "--threads",
            "256,65536",
            "--random-per-thread",
            "7",
            "--reps",
            "2",
            "--latency-samples",
            "10",
            "--queues",
            "8",
            "--sim-sms",
            "4",
        ])
        .options()
        .unwrap();
        assert_eq!(o.hit_bytes, 1536 << 10);
        assert_eq!(o.miss_bytes, 3 << 20);
        assert_eq!(o.miss_slots, 1024);
        assert_eq!(o.line_bytes, 1536);
        assert_eq!(o.threads, vec![256, 65536]);
        assert_eq!(o.random_per_thread, 7);
        assert_eq!(o.reps, 2);
        assert_eq!(o.latency_samples, 10);
        assert_eq!(o.queues, 8);
        assert_eq!(o.sim_sms, 4);
        assert_eq!(parse(&["--line", "4K"]).options().unwrap().line_bytes, 4096);
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for (args, needle) in [
            (&["--line", "1000"][..], "line size 1000 B"),
            (&["--line", "8G"][..], "line size"),
            (&["--threads", "0"][..], "thread count 0"),
            (&["--threads", "4096,100"][..], "multiple of 256"),
            (&["--hit-size", "1000"][..], "hit data size"),
            (&["--latency-samples", "0"][..], "latency samples"),
        ] {
            let e = parse(args).options().unwrap_err();
            assert!(e.usage, "{args:?}");
            assert!(e.cause.contains(needle), "{args:?}: {e}");
            assert!(!e.to_string().contains('\n'));
        }
    }

    fn point(wrong: u64) -> Point {
        Point {
            study: "hit".into(),
            pattern: "random".into(),
            threads: 4096,
            cache_gbps: 1.0,
            raw_gbps: 1.0,
            ratio: 1.0,
            wrong_values: wrong,
            stats: Default::default(),
        }
    }

    #[test]
    fn json_report_adds_provenance_and_the_error() {
        // The fields of a CacheBenchReport that matter here.
        let r = serde_json::json!({
            "device": "NVIDIA H100 80GB HBM3",
            "sms": 132,
            "options": CacheBenchOptions::default(),
            "points": [point(2)],
        });
        let mut rep = Report {
            report: &r,
            driver: "d".into(),
            commit: Some("c".into()),
            command: "bam bench cache".into(),
            error: None,
        };
        let v = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["device"], "NVIDIA H100 80GB HBM3");
        assert_eq!(v["commit"], "c");
        assert_eq!(v["command"], "bam bench cache");
        assert_eq!(v["driver"], "d");
        assert_eq!(v["points"][0]["wrong_values"], 2);
        assert_eq!(v["options"]["line_bytes"], 4096);
        assert!(v.get("error").is_none());
        let e = CliError::new("x", "y");
        rep.error = Some(&e);
        let v = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["error"]["cause"], "y");
    }

    #[test]
    fn wrong_values_name_the_first_bad_point() {
        let p = point;
        assert_eq!(wrong_values(&[p(0), p(0)]), None);
        let m = wrong_values(&[p(0), p(3), p(4)]).unwrap();
        assert!(m.starts_with("2 of 3 points"), "{m}");
        assert!(m.contains("7 wrong in total"), "{m}");
        assert!(m.contains("hit random at 4096 threads, 3 wrong"), "{m}");
    }
}
