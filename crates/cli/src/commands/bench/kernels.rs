//! `bam bench kernels`: the kernel suite of `bam_bench::suite` (nine kernels written once
//! over their array type, run over GPU memory, zero-copy host memory and UVM as plain
//! kernels and through the software cache as `bam::array<T>` ports) from the command line.
//! It builds a [`SuiteOptions`] and checks it with [`SuiteOptions::validate`].

use super::support::{cause, commit, line_bytes, open_gpu, spinner, write_report, Outputs};
use crate::error::{CliError, CliResult};
use crate::output::{self, Global};
use crate::units::SizeArg;
use bam_bench::suite::{
    run_suite, Kernel, KernelReport, SuiteEvent, SuiteOptions, SuiteReport, Variant, VariantResult,
    UVM_DRIVER_MARGIN,
};
use serde::Serialize;
use std::path::PathBuf;

/// `bam bench kernels --help`'s description (set on the subcommand in `bench/mod.rs`).
pub const LONG_ABOUT: &str = "\
Kernel suite: nine kernels, each written ONCE as a template over its array type, run as
plain kernels over GPU memory, zero-copy host memory and UVM, and ported to bam::array<T>
by swapping the arrays only (the identical template code), all in one process. Answers:
what does a kernel keep of its speed when its data comes from storage through the cache?

Kernels (the arrays in brackets are the ones that move between variants, the \"storage
arrays\"; every other array stays in GPU memory, as in a port that moves only the data
that scales with the problem):
  spmv       CSR SpMV, one warp per row, shuffle reduction  [col u32, val f32]
             8M rows x --degree (16) nonzeros, power-law row lengths, random columns
  bfs        top-down BFS from vertex 0 over the same kind of matrix, one warp per
             frontier vertex, a host loop over levels  [rowptr u64, col u32]
  gather     sum of random u64 elements (1 GiB; elements/8 reads)  [a u64]
  histogram  256-bin histogram of a byte of each u32 element (1 GiB)  [a u32]
  histogram-atomic
             every u32 element (256 MiB) adds one to bin a[i] % 16M of u64 bins that
             live in storage too: an atomic add each (atomicAdd / fetch_add)
             [a u32, bins u64]
  rmw        a[i] = 3 a[i] + 1 over 512 MiB of u64, read back and checked  [a u64]
  pagerank   one PageRank pull iteration over the same kind of matrix (in-edges), one
             thread per vertex: rows of power-law lengths share a warp  [rowptr u64,
             col u32]
  hash-count group-by count of 64M u32 keys (4M distinct) into a linear-probing hash
             table in storage (64 MiB): compare-and-swap claims a slot, an atomic add
             counts; where a thread writes depends on what it read  [keys u32, table u64]
  embedding-bag
             256K bags, each the sum of 32 random 512-byte rows (128 f32) of a 1 GiB
             table, one warp per bag  [table f32]
  (pagerank, hash-count and embedding-bag: written as plain CUDA first, then ported by
  the porting guide's type swap, nothing tuned for the cache.)
Sizes are at --scale 1; --scale multiplies them all.

Variants (in the order they run, for each kernel):
  hbm          the plain kernel (T*), storage arrays in GPU memory: the baseline
  zerocopy     the plain kernel, storage arrays in pinned host memory mapped into the
               GPU: every access crosses PCIe
  bam-hit      the ported kernel (bam::array<T>), a cache with a slot for every line
               (and a quarter more), simulated SSDs with their media in GPU memory,
               loaded one warp per line before the runs: every access hits, so this is
               the cost of the cache's lookups alone (ordinary views: Array::ordinary_view)
  bam-pin-hit  the same, reading through pin_port<T> (bam::array<T>::read_pinned, the
               pin-per-access hit path) in the same cache: an A/B of the hit path
  bam-hit-unbounded
               bam-hit's kernel without __launch_bounds__ (the other forms have
               (256, 6)): a port that swapped the arrays and nothing else
  bam-hit-counting
               bam-hit with the arrays' views counting every access and hit (as with
               CacheConfig::count_hits, off by default): what the counting costs
  bam-hit-8    bam-hit's kernel under __launch_bounds__(256, 8): 32 registers and as
               many warps as the plain kernel; streaming ports gain, random ones can
               lose (the kernel spills: docs/porting-guide.md, register budget)
  bam-resident bam-hit's kernel and cache with the arrays made resident
               (Array::make_resident: every line read into one run of slots and pinned
               for the run; the report says how many arrays got one run, the others go
               through a table of the lines' slots): reads are one plain load (two
               through the table), stores plain stores; the kernel's code is the same
  bam-resident-8
               bam-resident with bam-hit-8's kernel
  bam-default  bam-hit's kernel and cache with the views Array::view gives by default:
               arrays that fit in 90% of the slots (CacheConfig::auto_resident_percent)
               made resident by their first view, the others ordinary; what a port
               gets without asking (bam-hit's views are ordinary_view)
  bam-quarter  the ported kernel, a cache of a quarter of the data's lines, media in
               pinned host memory: every miss reads a line across PCIe
  bam-quarter-8
               bam-quarter with bam-hit-8's kernel, in the same cache
  uvm-2x       the plain kernel, storage arrays in managed memory (cuMemAllocManaged),
  uvm-4x       with a balloon allocation leaving data/2 (data/4) of GPU memory free,
               plus a 32 MiB margin for the driver. The balloon comes first, then a
               fresh managed copy written by the GPU (what does not fit goes to host
               memory).
               gather does 1/--uvm-gather-divisor of its reads there (random reads
               fault on almost every access; rates are per read). --no-uvm skips them.
bam-quarter(-8) and the UVM variants can be slow: each runs at most --budget seconds. When
the warm-up run is slow (UVM: always), the runs are split into launches with a wait and a
budget check after each, and a run the budget cuts reports the work it did per second
(marked partial).

Every variant runs once untimed (warm-up), then --reps timed runs; times are CUDA events
around a run's launches (bfs: its host loop over levels too). Before the timed runs the
suite waits until a short streaming read of GPU memory runs as fast as the fastest it has
seen: after large frees (a balloon, a cache) the GPU's memory bandwidth stays lower for a
moment, up to about 20 % for a quarter of a second on an H100; the notes say when it
waited. Columns:
  ms       median time of the timed runs
  GB/s     decimal GB/s of storage-array elements read and written (not lines moved)
  M/s      work units per second: nonzeros, edges traversed, reads or elements
  x hbm    rate / the hbm variant's rate: 1 = as fast as the plain kernel in GPU memory,
           0.5 = half as fast (the design targets: >= 0.5 for bam-hit, >= 0.35 for
           gather)
  x zc     rate / the zerocopy variant's rate (the target for bam-quarter: >= 0.8;
           and bam-quarter >= 5 x uvm-4x)
  wrong    values the checks found wrong (must be 0): spmv y bit for bit, bfs distances,
           gather and rmw values against their pattern, histogram bins; the hbm run
           itself is checked independently (spmv rows recomputed on the host, bins
           summing to the elements, values against the pattern)
  cache    hit rate, misses and lines read ahead of the timed runs (ported variants)

Needs an NVIDIA GPU (compute capability 9.0 or newer). GPU memory at --scale 1: up to
about 3.5 GB per kernel (the data, the simulated media and the cache, each about the
size of the storage arrays), all of it during the UVM variants (the balloon); host
memory: up to 1.1 GB pinned at a time. The default suite takes under two minutes on an
H100 (100 s measured, UVM included; each budgeted variant at most --budget seconds).";

const AFTER_HELP: &str = "\
Output: one table row per kernel and variant as it finishes; with --json, the report as
JSON on stdout. --output FILE writes the JSON report (rewritten after every kernel, so a
run that is stopped keeps what it measured), --plot FILE.svg draws the ratios to hbm.
Exit code 1 when a check found wrong values or a variant failed (the report is still
printed and written), 2 for bad options (checked before the GPU is touched).

Examples:
  bam bench kernels                                      the whole suite, defaults
  bam bench kernels --output kernels.json --plot kernels.svg
  bam bench kernels --kernels spmv,gather --no-uvm --scale 0.25 --budget 5
  bam bench kernels --variants hbm,bam-hit,bam-pin-hit --reps 10   the hit-path A/B";

/// A comma-separated list of names (`spmv,bfs`), shown the same way in `--help`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameList<T>(pub Vec<T>);

impl<T: std::str::FromStr<Err = bam::Error>> std::str::FromStr for NameList<T> {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(|x| x.parse::<T>().map_err(cause))
            .collect::<Result<_, _>>()
            .map(NameList)
    }
}

impl<T: std::fmt::Display> std::fmt::Display for NameList<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<String> = self.0.iter().map(T::to_string).collect();
        f.write_str(&v.join(","))
    }
}

fn defaults() -> SuiteOptions {
    SuiteOptions::default()
}

/// Arguments of `bam bench kernels`; the defaults are `SuiteOptions::default()`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct KernelsArgs {
    /// Storage of the ported variants: sim[:PRESET,...] (simulated SSDs; the suite sets
    /// their media per variant), hostctl[:...], file:PATH,... or kmod:/dev/bam-nvme0[,...]
    #[arg(long, value_name = "DEV", default_value = "sim")]
    pub device: String,
    /// Multiplies every data size (1: 0.5 to 1.1 GB of storage arrays per kernel);
    /// from 1/1024 to 16
    #[arg(long, value_name = "F", default_value_t = defaults().scale)]
    pub scale: f64,
    /// Average nonzeros per row of the spmv / bfs matrix
    #[arg(long, value_name = "N", default_value_t = defaults().degree)]
    pub degree: u32,
    /// Cache line size in bytes of every kernel's ported variants: a multiple of 512 from
    /// 512 to 65536 (4096 or 4K). Default: each kernel's own, as the porting guide picks
    /// it for its access pattern: 4 KiB for the scans (spmv, histogram, rmw), 512 B for the
    /// random readers (gather, bfs)
    #[arg(long, value_name = "BYTES")]
    pub line: Option<SizeArg>,
    /// Timed runs per variant (after one untimed warm-up run)
    #[arg(long, value_name = "N", default_value_t = defaults().reps)]
    pub reps: u32,
    /// Kernels to run, comma-separated: spmv, bfs, gather, histogram, histogram-atomic,
    /// rmw, pagerank, hash-count, embedding-bag
    #[arg(long, value_name = "K,...", default_value_t = NameList(defaults().kernels))]
    pub kernels: NameList<Kernel>,
    /// Variants to run, comma-separated (hbm must be one): hbm, zerocopy, bam-hit,
    /// bam-pin-hit, bam-hit-unbounded, bam-hit-counting, bam-hit-8, bam-resident,
    /// bam-resident-8, bam-default, bam-quarter, bam-quarter-8, uvm-2x, uvm-4x
    #[arg(long, value_name = "V,...", default_value_t = NameList(defaults().variants))]
    pub variants: NameList<Variant>,
    /// Skip the UVM variants (uvm-2x, uvm-4x)
    #[arg(long)]
    pub no_uvm: bool,
    /// Seconds each variant that can be slow (bam-quarter, uvm-2x, uvm-4x) may take,
    /// warm-up and timed runs together
    #[arg(long, value_name = "SECS", default_value_t = defaults().budget_s)]
    pub budget: f64,
    /// gather's UVM variants do 1/N of its reads (rates are per read)
    #[arg(long, value_name = "N", default_value_t = defaults().uvm_gather_divisor)]
    pub uvm_gather_divisor: u32,
    /// I/O queues per simulated SSD
    #[arg(long, value_name = "N", default_value_t = defaults().queues)]
    pub queues: u32,
    /// SMs reserved for the simulated SSD controllers
    #[arg(long, value_name = "N", default_value_t = defaults().sim_sms)]
    pub sim_sms: u32,
    /// SMs reserved for the simulated SSD controllers of the all-hits variants (bam-hit
    /// and its peers), which serve no I/O while timed: a real SSD takes no SM
    #[arg(long, value_name = "N", default_value_t = defaults().hit_sim_sms)]
    pub hit_sim_sms: u32,
    /// Read-ahead of streaming misses of every kernel: lines 1..N grid strides ahead of a
    /// warp whose lanes all missed in one line of a scan (0: off, the library's default;
    /// at most 16). Default: each kernel's own: 8 for the scans, off for the random readers
    #[arg(long, value_name = "N")]
    pub readahead: Option<u32>,
    /// Blocks of the cache's fill service (512 threads each, one SM each; every thread
    /// keeps one fill in flight)
    #[arg(long, value_name = "N", default_value_t = defaults().fill_blocks)]
    pub fill_blocks: u32,
    /// Seed of every input
    #[arg(long, value_name = "N", default_value_t = defaults().seed)]
    pub seed: u64,
    /// Also write the JSON report to FILE (rewritten after each kernel)
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also draw the ratios to hbm, one group of bars per kernel, as an SVG to FILE
    /// (`bam plot REPORT.json` draws one from a saved report)
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

const WHAT: &str = "cannot run the kernel suite";
const HELP_HINT: &str = "see `bam bench kernels --help`";

impl KernelsArgs {
    /// The suite's options, checked: a usage error names the broken rule.
    pub fn options(&self) -> CliResult<SuiteOptions> {
        let usage = |cause: String| CliError::usage(WHAT, cause).hint(HELP_HINT);
        let line_bytes = self
            .line
            .as_ref()
            .map(line_bytes)
            .transpose()
            .map_err(usage)?;
        let variants: Vec<Variant> = self
            .variants
            .0
            .iter()
            .copied()
            .filter(|v| !self.no_uvm || v.oversubscription().is_none())
            .collect();
        // The suite runs variants in its own order; keep the user's list in that order.
        let mut ordered: Vec<Variant> = Variant::ALL
            .into_iter()
            .filter(|v| variants.contains(v))
            .collect();
        if variants.len() != ordered.len() {
            // A duplicate: let validate() name it.
            ordered = variants;
        }
        let o = SuiteOptions {
            scale: self.scale,
            degree: self.degree,
            line_bytes,
            reps: self.reps,
            kernels: self.kernels.0.clone(),
            variants: ordered,
            budget_s: self.budget,
            uvm_gather_divisor: self.uvm_gather_divisor,
            queues: self.queues,
            sim_sms: self.sim_sms,
            hit_sim_sms: self.hit_sim_sms,
            fill_blocks: self.fill_blocks,
            readahead: self.readahead,
            seed: self.seed,
        };
        o.validate().map_err(|e| usage(cause(e)))?;
        Ok(o)
    }
}

/// The cache lines and read-ahead of the selected kernels' ported variants, for the
/// header: "cache lines / read-ahead: spmv 4 KiB / 8, gather 512 B / off".
fn cache_profiles(o: &SuiteOptions) -> String {
    let each: Vec<String> = o
        .kernels
        .iter()
        .map(|&k| {
            let p = o.cache_profile(k);
            let ra = match p.readahead {
                0 => "off".to_string(),
                n => n.to_string(),
            };
            format!(
                "{k} {} / {ra}",
                crate::units::line_size(p.line_bytes as u64)
            )
        })
        .collect();
    format!("cache lines / read-ahead: {}", each.join(", "))
}

/// What --output holds while the suite runs: the kernels done so far.
#[derive(Serialize)]
struct Partial<'a> {
    partial: bool,
    device: &'a str,
    sms: u32,
    commit: &'a str,
    options: &'a SuiteOptions,
    kernels: &'a [KernelReport],
}

/// Runs `bam bench kernels`.
pub fn run(a: &KernelsArgs, g: &Global) -> CliResult<()> {
    // Everything the user typed is checked before the GPU is touched.
    let opts = a.options()?;
    let (device, gpu) = open_gpu(WHAT, &a.device, HELP_HINT)?;
    let sizes = opts.sizes();
    if !g.json {
        output::print(&format!(
            "kernel suite on {} ({} SMs): scale {} ({} rows x {} avg nonzeros; gather {}, histogram {}, \
             histogram-atomic {} into {} bins, rmw {}, hash-count {} keys ({} distinct), embedding-bag \
             {} table, {} bags), {}, {} timed runs per variant{}\n{}\n",
            gpu.name,
            gpu.sms,
            opts.scale,
            sizes.rows,
            opts.degree,
            crate::units::binary_bytes(sizes.gather_elems * 8),
            crate::units::binary_bytes(sizes.hist_elems * 4),
            crate::units::binary_bytes(sizes.ahist_elems * 4),
            sizes.ahist_bins,
            crate::units::binary_bytes(sizes.rmw_elems * 8),
            sizes.hcount_elems,
            sizes.hcount_keys,
            crate::units::binary_bytes(sizes.emb_rows * 512),
            sizes.emb_bags,
            cache_profiles(&opts),
            opts.reps,
            if opts.variants.iter().any(|v| v.budgeted()) {
                format!(", bam-quarter and UVM up to {} s per variant", opts.budget_s)
            } else {
                String::new()
            },
            header()
        ));
    }
    let show = !g.json && !g.quiet;
    let commit = commit();
    let mut done: Vec<KernelReport> = Vec::new();
    let mut write_err: Option<CliError> = None;
    let mut bar = spinner(false, String::new());
    let report = run_suite(
        &gpu,
        &opts,
        &device,
        (!commit.is_empty()).then(|| commit.clone()),
        &mut |e| match e {
            SuiteEvent::Preparing { kernel } => {
                bar.finish_and_clear();
                bar = spinner(show, format!("{kernel}: generating the inputs"));
            }
            SuiteEvent::Starting {
                kernel,
                variant,
                detail,
            } => {
                bar.finish_and_clear();
                if variant.oversubscription().is_some() && !g.quiet {
                    // UVM can take its whole budget: say so where logs see it.
                    eprintln!("bam: {kernel} {variant}: {detail}");
                }
                bar = spinner(
                    show,
                    format!("{kernel} {variant}: warm-up and {} timed runs", opts.reps),
                );
            }
            SuiteEvent::Finished { kernel, result } => {
                bar.finish_and_clear();
                if !g.json {
                    output::print(&(row(kernel, result) + "\n"));
                }
            }
            SuiteEvent::KernelDone { report } => {
                done.push(report.clone());
                if let Some(p) = &a.output {
                    let partial = Partial {
                        partial: true,
                        device: &gpu.name,
                        sms: gpu.sms,
                        commit: &commit,
                        options: &opts,
                        kernels: &done,
                    };
                    let r = serde_json::to_string_pretty(&partial)
                        .map_err(|e| CliError::new("cannot serialize the report", e.to_string()))
                        .and_then(|j| {
                            crate::outfile::write_file(p, j.as_bytes(), "cannot write the report")
                        });
                    if let Err(e) = r {
                        write_err.get_or_insert(e);
                    }
                }
            }
        },
    );
    bar.finish_and_clear();
    if let Some(e) = write_err {
        return Err(e);
    }
    let report = report.map_err(|e| {
        CliError::new("kernel suite failed", e.to_string()).hint(
            "rerun with -v for the driver's logs; the options are in `bam bench kernels --help`",
        )
    })?;
    let failure = failures(&report).map(|cause| {
        CliError::new("the kernel suite found problems", cause).hint(
            "see each variant's `error` and `notes` in the JSON report (--output); \
             rerun that kernel alone with --kernels and -v",
        )
    });
    if !g.json && !report.pin_port_uses_read_pinned {
        output::print(
            "note: bam::array<T> has no read_pinned in this build: bam-pin-hit read through \
             operator[] (the same path as bam-hit)\n",
        );
    }
    // The suite's report has its commit.
    let to = Outputs {
        output: a.output.as_ref(),
        plot: a.plot.as_ref(),
    };
    write_report(&report, None, failure, to, g)
}

fn header() -> String {
    format!(
        "{:<9} {:<11} {:>9} {:>8} {:>9} {:>7} {:>7} {:>6}  {}",
        "kernel", "variant", "ms", "GB/s", "M/s", "x hbm", "x zc", "wrong", "cache / notes"
    )
}

fn ratio(r: Option<f64>) -> String {
    match r {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) if x >= 0.01 => format!("{x:.3}"),
        Some(x) => format!("{x:.1e}"),
        None => "-".into(),
    }
}

fn row(k: Kernel, r: &VariantResult) -> String {
    if let Some(e) = &r.error {
        return format!("{:<9} {:<11} FAILED: {e}", k.name(), r.variant.name());
    }
    let mut extra = Vec::new();
    if let Some(c) = &r.cache {
        let ahead = if c.stats.readaheads > 0 {
            format!(", {} read ahead", c.stats.readaheads)
        } else {
            String::new()
        };
        let rate = c
            .hit_rate
            .map_or_else(String::new, |r| format!("hit rate {r:.4}, "));
        extra.push(format!(
            "{rate}{} misses{ahead}, {} slots",
            c.stats.misses, c.slots
        ));
    }
    if let Some(u) = &r.uvm {
        extra.push(format!(
            "{:.1}x oversubscribed ({} free of data {})",
            u.effective_oversubscription,
            crate::units::binary_bytes(u.gpu_free_bytes.saturating_sub(UVM_DRIVER_MARGIN)),
            crate::units::binary_bytes(u.data_bytes)
        ));
    }
    if !r.complete {
        extra.push("partial (time budget)".into());
    }
    // A visible wait for the GPU's memory bandwidth before the timed runs (after the
    // frees of earlier variants), or the note that it did not come back.
    match &r.settle {
        Some(s) if !s.settled => extra.push(format!(
            "GPU memory still busy: read {:.0} of {:.0} GB/s",
            s.read_gbps, s.best_gbps
        )),
        Some(s) if s.waited_ms >= 10.0 => {
            extra.push(format!("waited {:.0} ms for a quiet GPU", s.waited_ms))
        }
        _ => {}
    }
    format!(
        "{:<9} {:<11} {:>9.3} {:>8} {:>9.1} {:>7} {:>7} {:>6}  {}",
        k.name(),
        r.variant.name(),
        r.ms_median,
        r.gbps.map_or("-".into(), |g| format!("{g:.1}")),
        r.rate / 1e6,
        ratio(r.ratio_to_hbm),
        ratio(r.ratio_to_zerocopy),
        r.wrong,
        extra.join("; ")
    )
}

/// The failure to report when a check found wrong values or a variant failed.
fn failures(r: &SuiteReport) -> Option<String> {
    let all: Vec<(Kernel, &VariantResult)> = r
        .kernels
        .iter()
        .flat_map(|k| k.variants.iter().map(move |v| (k.kernel, v)))
        .collect();
    let wrong: Vec<_> = all.iter().filter(|(_, v)| v.wrong != 0).collect();
    let failed: Vec<_> = all.iter().filter(|(_, v)| v.error.is_some()).collect();
    let mut parts = Vec::new();
    if let Some((k, v)) = wrong.first() {
        parts.push(format!(
            "{} of {} variants found wrong values ({} in total; first: {k} {}, {} wrong)",
            wrong.len(),
            all.len(),
            wrong.iter().map(|(_, v)| v.wrong).sum::<u64>(),
            v.variant,
            v.wrong
        ));
    }
    if let Some((k, v)) = failed.first() {
        parts.push(format!(
            "{} of {} variants failed (first: {k} {}: {})",
            failed.len(),
            all.len(),
            v.variant,
            v.error.as_deref().unwrap_or("")
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::bench::support::{testing, Report};
    use bam_bench::suite::{Form, Settled};

    fn parse(args: &[&str]) -> KernelsArgs {
        testing::parse(args)
    }

    /// `--help` lists every kernel and every variant the suite has.
    #[test]
    fn help_lists_every_kernel_and_variant() {
        use clap::Args;
        let help = KernelsArgs::augment_args(clap::Command::new("kernels"))
            .render_long_help()
            .to_string();
        let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
        // The names listed after `intro`, up to the option's default.
        let listed = |intro: &str| -> Vec<String> {
            let after = &flat[flat.find(intro).expect(intro) + intro.len()..];
            let list = &after[..after.find('[').unwrap_or(after.len())];
            list.split(',').map(|n| n.trim().to_string()).collect()
        };
        let kernels = listed("Kernels to run, comma-separated:");
        let names: Vec<String> = Kernel::ALL.iter().map(|k| k.name().to_string()).collect();
        assert_eq!(kernels, names);
        let variants = listed("(hbm must be one):");
        let names: Vec<String> = Variant::ALL.iter().map(|v| v.name().to_string()).collect();
        assert_eq!(variants, names);
    }

    #[test]
    fn defaults_are_the_library_defaults() {
        let o = parse(&[]).options().unwrap();
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            serde_json::to_value(defaults()).unwrap()
        );
    }

    #[test]
    fn flags_set_every_option() {
        let o = parse(&[
            "--scale",
            "0.25",
            "--degree",
            "8",
            "--line",
            "8K",
            "--reps",
            "5",
            "--kernels",
            "gather,spmv",
            "--variants",
            "bam-hit,hbm,uvm-4x",
            "--budget",
            "7.5",
            "--uvm-gather-divisor",
            "4",
            "--queues",
            "8",
            "--sim-sms",
            "4",
            "--seed",
            "9",
            "--readahead",
            "3",
        ])
        .options()
        .unwrap();
        assert_eq!(o.scale, 0.25);
        assert_eq!(o.degree, 8);
        assert_eq!(o.line_bytes, Some(8192));
        assert_eq!(o.readahead, Some(3));
        assert_eq!(o.reps, 5);
        assert_eq!(o.kernels, vec![Kernel::Gather, Kernel::Spmv]);
        // Variants run in the suite's order whatever the order typed.
        assert_eq!(
            o.variants,
            vec![Variant::Hbm, Variant::BamHit, Variant::Uvm4x]
        );
        assert_eq!(o.budget_s, 7.5);
        assert_eq!(o.uvm_gather_divisor, 4);
        assert_eq!((o.queues, o.sim_sms, o.seed), (8, 4, 9));
        let o = parse(&["--no-uvm"]).options().unwrap();
        assert_eq!(o.variants.len(), 12);
        assert!(o.variants.iter().all(|v| v.oversubscription().is_none()));
    }

    #[test]
    fn header_names_each_kernels_cache_profile() {
        let o = parse(&["--kernels", "spmv,gather"]).options().unwrap();
        assert_eq!(
            cache_profiles(&o),
            "cache lines / read-ahead: spmv 4 KiB / 8, gather 512 B / off"
        );
        let o = parse(&["--kernels", "bfs,rmw", "--line", "1K", "--readahead", "0"])
            .options()
            .unwrap();
        assert_eq!(
            cache_profiles(&o),
            "cache lines / read-ahead: bfs 1 KiB / off, rmw 1 KiB / off"
        );
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for (args, needle) in [
            (&["--scale", "0"][..], "scale 0"),
            (&["--scale", "100"][..], "scale 100"),
            (&["--line", "1000"][..], "line size 1000 B"),
            (&["--line", "8G"][..], "line size"),
            (&["--reps", "0"][..], "reps"),
            (&["--variants", "bam-hit"][..], "must include hbm"),
            (&["--variants", "hbm,hbm"][..], "hbm is listed twice"),
            (&["--kernels", "bfs,bfs"][..], "bfs is listed twice"),
            (&["--budget", "0"][..], "time budget 0 s"),
        ] {
            let e = parse(args).options().unwrap_err();
            assert!(e.usage, "{args:?}");
            assert!(e.cause.contains(needle), "{args:?}: {e}");
            assert!(!e.to_string().contains('\n'));
        }
        // Unknown names are clap's errors (exit code 2 too).
        assert!(testing::try_parse::<KernelsArgs>(&["--kernels", "fft"]).is_err());
        assert!(testing::try_parse::<KernelsArgs>(&["--variants", "hbm,uvm"]).is_err());
    }

    fn result(v: Variant, wrong: u64, error: Option<&str>) -> VariantResult {
        VariantResult {
            variant: v,
            form: Form::Plain,
            memory: "m".into(),
            runs: 3,
            ms_median: 2.0,
            ms_min: 1.5,
            work: 1000,
            complete: true,
            rate: 5e5,
            gbps: Some(0.004),
            ratio_to_hbm: Some(0.5),
            ratio_to_zerocopy: None,
            wrong,
            cache: None,
            uvm: None,
            settle: None,
            notes: vec![],
            error: error.map(String::from),
        }
    }

    fn report(vs: Vec<VariantResult>) -> SuiteReport {
        SuiteReport {
            device: "NVIDIA H100 80GB HBM3".into(),
            sms: 132,
            backend: "sim:ideal,ssds=1".into(),
            commit: Some("c".into()),
            pin_port_uses_read_pinned: true,
            options: defaults(),
            sizes: defaults().sizes(),
            kernels: vec![KernelReport {
                kernel: Kernel::Gather,
                about: Kernel::Gather.about().into(),
                storage: vec![],
                storage_bytes: 1 << 30,
                work_unit: "reads".into(),
                work: 1000,
                cache: defaults().cache_profile(Kernel::Gather),
                variants: vs,
            }],
        }
    }

    #[test]
    fn failures_name_the_first_bad_variant() {
        let ok = || result(Variant::Hbm, 0, None);
        assert_eq!(failures(&report(vec![ok()])), None);
        let m = failures(&report(vec![
            ok(),
            result(Variant::BamHit, 3, None),
            result(Variant::Uvm2x, 0, Some("out of memory")),
        ]))
        .unwrap();
        assert!(
            m.contains(
                "1 of 3 variants found wrong values (3 in total; first: gather bam-hit, 3 wrong)"
            ),
            "{m}"
        );
        assert!(
            m.contains("1 of 3 variants failed (first: gather uvm-2x: out of memory)"),
            "{m}"
        );
    }

    #[test]
    fn json_report_adds_provenance_and_plots() {
        let r = report(vec![
            result(Variant::Hbm, 0, None),
            result(Variant::BamHit, 0, None),
        ]);
        let rep = Report {
            report: &r,
            driver: "d".into(),
            commit: None,
            command: "bam bench kernels".into(),
            error: None,
        };
        let v = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["commit"], "c");
        assert_eq!(v["driver"], "d");
        assert_eq!(v["kernels"][0]["kernel"], "gather");
        assert_eq!(v["kernels"][0]["variants"][1]["variant"], "bam-hit");
        assert_eq!(v["kernels"][0]["variants"][0]["form"], "plain");
        assert_eq!(v["options"]["variants"][12], "uvm-2x");
        assert!(v.get("error").is_none());
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("k.svg");
        crate::plot::Report::from_serialize(&rep)
            .unwrap()
            .draw(&out)
            .unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(svg.contains("bam-hit") && svg.contains("gather"), "{svg}");
    }

    #[test]
    fn rows_show_failures_and_ratios() {
        let r = row(Kernel::Spmv, &result(Variant::BamHit, 0, None));
        assert!(r.starts_with("spmv      bam-hit"), "{r}");
        assert!(r.contains("0.500"), "{r}");
        let r = row(Kernel::Spmv, &result(Variant::Uvm4x, 0, Some("boom")));
        assert!(r.contains("FAILED: boom"), "{r}");
        assert_eq!(ratio(Some(1234.0)), "1234");
        assert_eq!(ratio(Some(0.001)), "1.0e-3");
        assert_eq!(ratio(None), "-");
    }

    #[test]
    fn rows_show_a_wait_for_a_quiet_gpu() {
        let with = |waited_ms: f64, settled: bool| {
            let mut r = result(Variant::Hbm, 0, None);
            r.settle = Some(Settled {
                waited_ms,
                read_gbps: 2500.0,
                best_gbps: 2980.0,
                settled,
            });
            row(Kernel::Gather, &r)
        };
        assert!(!with(0.3, true).contains("waited"));
        assert!(with(180.0, true).contains("waited 180 ms for a quiet GPU"));
        assert!(with(3000.0, false).contains("GPU memory still busy: read 2500 of 2980 GB/s"));
    }
}
