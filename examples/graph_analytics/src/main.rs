//! BFS and connected components on a Kronecker (Graph500) or uniform random graph with
//! the CSR edge list on the (simulated) SSD array behind `bam::array<uint32_t>` and a
//! cache that holds a fraction of it; against the same kernels with the edge list in GPU
//! memory and in pinned host memory (zero-copy), and the CPU reference.
//!
//!     cargo run --release -p graph-analytics -- --scale 26 --json graph.json
//!
//! Generation, CSR construction and loading are timed on their own; the time to result
//! of BFS is all its levels (one launch each), of CC all its hooking and compression
//! sweeps until no label moves.
//!
//! With `--device file:PATH` the bam variant reads the CSR edge list where it is, through
//! the file backend (no load step): write it once with `--write-edges PATH` (the same
//! graph flags), e.g.
//!
//!     graph-analytics --scale 26 --write-edges edges.bin --device file:edges.bin,workers=8

use anyhow::{bail, Context, Result};
use bam::cache::{io_config, Cache, CacheConfig, Layout};
use bam::cuda::{CudaStream, DeviceBuffer, PinnedBuffer};
use bam::io::IoConfig;
use bam::storage::sim::{DriveProfile, Media, SimArray, SimConfig};
use bam::storage::{GpuDevice, Storage};
use bam::{Gpu, Module};
use clap::{Parser, ValueEnum};
use example_support::{best, progress, time_runs, RunInfo};
use graph_analytics::{
    bfs_levels, build_csr, cc_labels, compare, kronecker, pick_source, read_edge_list, uniform, Csr,
};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

static KERNELS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin"));
const UNSEEN: u32 = u32::MAX;
/// Hooking sweeps before CC gives up (a power-law graph needs a handful).
const MAX_CC_SWEEPS: u32 = 100;
/// Threads per block and blocks per SM of the graph kernels.
const THREADS: u32 = 256;
const BLOCKS_PER_SM: u32 = 8;
/// A BFS level runs bottom-up when its frontier holds more than 1/32 of the vertices.
const BOTTOM_UP_FRACTION: u64 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum GraphKind {
    /// Graph500 Kronecker graph (A=0.57, B=0.19, C=0.19): 2^scale vertices.
    Kronecker,
    /// Uniform random graph with the same vertex and edge counts.
    Uniform,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Variant {
    /// Edge list in GPU memory.
    Hbm,
    /// Edge list in pinned host memory, read zero-copy across PCIe.
    Pinned,
    /// Edge list on the simulated SSDs behind bam::array and a cache.
    Bam,
}

#[derive(Parser, Debug)]
#[command(
    about = "BFS and connected components with the edge list on (simulated) SSDs through bam::array",
    long_about = "Builds a graph (Graph500 Kronecker, uniform random, or a SNAP/GAP edge list), stores its CSR \
edge list on a simulated SSD array and runs BFS and connected components on the GPU with the edges read \
through bam::array and a cache holding --cache-fraction of them. The same run measures the kernels with the \
edge list in GPU memory and in pinned host memory, and checks every result against the CPU reference.\n\n\
Example: graph-analytics --scale 26 --json graph.json   (1.07 G edges, 2.1 G CSR entries: ~60 GB of host memory)\n\
Example: graph-analytics --scale 20                     (a quick check)\n\
Example: graph-analytics --scale 26 --write-edges e.bin --device file:e.bin,workers=8 --variants bam   (the edge list read in place)"
)]
struct Args {
    /// Graph generator.
    #[arg(long, value_enum, default_value = "kronecker")]
    graph: GraphKind,
    /// log2 of the vertex count.
    #[arg(long, default_value_t = 26)]
    scale: u32,
    /// Undirected edges per vertex.
    #[arg(long, default_value_t = 16)]
    edgefactor: u32,
    /// Read a SNAP/GAP edge list (`u v` per line) instead of generating.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Seed of the generator and of the BFS source.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fraction of the edge list the cache holds.
    #[arg(long, default_value_t = 0.25)]
    cache_fraction: f64,
    /// Cache line sizes in bytes to run the bam variant with (a comma list: one run each).
    #[arg(long, value_delimiter = ',', default_value = "4096")]
    line: Vec<u32>,
    /// Read-ahead of the cache in grid strides (`CacheConfig::readahead`; 0: off). A comma
    /// list runs the bam variant once per value (named bam-LINE-raN).
    #[arg(long, value_delimiter = ',', default_values_t = [CacheConfig::new(4096, 1).readahead])]
    readahead: Vec<u32>,
    /// Blocks (SMs) of the cache's fill service (`CacheConfig::fill_blocks`).
    #[arg(long, default_value_t = CacheConfig::new(4096, 1).fill_blocks)]
    fill_blocks: u32,
    /// Simulated SSDs.
    #[arg(long, default_value_t = 8)]
    ssds: u32,
    /// Also write the CSR edge list here (u32 little-endian, the neighbours of vertex 0
    /// first): the file `--device file:PATH` reads.
    #[arg(long, value_name = "PATH")]
    write_edges: Option<PathBuf>,
    /// The bam variant reads the edge list where it is instead of loading it onto
    /// simulated SSDs: a GPU device string whose first bytes are the edge list of the same
    /// graph (--write-edges), e.g. `file:edges.bin,workers=8`.
    #[arg(long, value_name = "DEV")]
    device: Option<String>,
    /// Queue pairs per SSD of the bam variant's array.
    #[arg(long, default_value_t = 16)]
    queues: u32,
    /// Variants to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "hbm,pinned,bam"
    )]
    variants: Vec<Variant>,
    /// BFS top-down only (by default a level whose frontier holds more than 1/32 of the
    /// vertices runs bottom-up: direction-optimizing BFS).
    #[arg(long)]
    top_down_only: bool,
    /// Timed runs of BFS and CC per variant (the best is reported).
    #[arg(long, default_value_t = 2)]
    runs: u32,
    /// Skip the CPU reference (results are then not checked).
    #[arg(long)]
    no_check: bool,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// GPU buffers every variant shares: offsets, levels, frontiers, labels.
struct Work {
    offsets: DeviceBuffer,
    level_of: DeviceBuffer,
    fronts: [DeviceBuffer; 2],
    count: DeviceBuffer,
    comp: DeviceBuffer,
    n: u32,
}

/// What one variant measured.
struct Measured {
    bfs: Vec<f64>,
    cc: Vec<f64>,
    levels: u32,
    /// Levels of the last BFS run that ran bottom-up.
    bottom_up_levels: u32,
    cc_sweeps: u32,
    bfs_wrong: usize,
    cc_wrong: usize,
    notes: Value,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !bam::gpu_available() {
        println!("SKIPPED: no GPU (the CUDA driver is missing or sees no device)");
        return Ok(());
    }
    if !(args.cache_fraction > 0.0 && args.cache_fraction <= 1.0) {
        bail!("--cache-fraction {} must be in (0, 1]", args.cache_fraction);
    }

    // 1. The graph.
    let graph = build_graph(&args)?;

    // 2. The CPU reference.
    let reference = cpu_reference(&args, &graph);

    let gpu = Gpu::new(0)?;
    let module = Module::load(&gpu, KERNELS)?;
    let info = RunInfo::new(&gpu.name);
    let runner = Runner {
        w: Work::new(&gpu, &graph.g)?,
        stream: gpu.stream()?,
        gpu: &gpu,
        module: &module,
        graph: &graph,
        args: &args,
        reference: &reference,
    };

    // 3. The variants: BFS and CC with the edge list in each place.
    let mut results = serde_json::Map::new();
    for (variant, line, readahead) in variant_runs(&args) {
        let name = match variant {
            Variant::Bam if args.readahead.len() > 1 => format!("bam-{line}-ra{readahead}"),
            Variant::Bam => format!("bam-{line}"),
            _ => format!("{variant:?}").to_lowercase(),
        };
        let m = runner.measure(variant, line, readahead)?;
        print_measured(&name, &m, &graph.g);
        results.insert(
            name,
            json!({ "bfs_runs_s": m.bfs, "bfs_best_s": best(&m.bfs), "cc_runs_s": m.cc, "cc_best_s": best(&m.cc),
                    "levels": m.levels, "bottom_up_levels": m.bottom_up_levels, "cc_sweeps": m.cc_sweeps, "bfs_wrong": m.bfs_wrong, "cc_wrong": m.cc_wrong,
                    "checked": !args.no_check, "notes": m.notes }),
        );
    }

    // 4. The comparison and the report.
    let ratios = time_ratios(&results);
    println!("time ratios: {ratios}");
    let wrong: usize = results
        .values()
        .map(|v| {
            v["bfs_wrong"].as_u64().unwrap_or(0) as usize
                + v["cc_wrong"].as_u64().unwrap_or(0) as usize
        })
        .sum();
    if let Some(p) = &args.json {
        let report = report(&args, &info, &graph, reference.cpu_s, results, ratios);
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
    }
    if wrong != 0 {
        println!("FAIL: {wrong} vertices differ from the CPU reference");
        std::process::exit(1);
    }
    Ok(())
}

/// The graph in CSR form, the BFS source and how long building them took.
struct Graph {
    g: Csr,
    src: u32,
    /// Undirected edges before the CSR (which holds each twice).
    undirected_edges: u64,
    /// Seconds generating (or reading) the edges.
    gen_s: f64,
    /// Seconds building the CSR.
    csr_s: f64,
}

/// Generates the graph (or reads `--input`), builds its CSR and picks the BFS source.
fn build_graph(args: &Args) -> Result<Graph> {
    let t = Instant::now();
    let (n, pairs) = match &args.input {
        Some(p) => read_edge_list(p)?,
        None => generate_edges(args)?,
    };
    let gen_s = t.elapsed().as_secs_f64();
    let m_undirected = pairs.len() as u64;
    let pb = progress(m_undirected, "building CSR", false);
    let t = Instant::now();
    let g = build_csr(n, pairs, false, &|d| pb.set_position(d))?;
    pb.finish_and_clear();
    let csr_s = t.elapsed().as_secs_f64();
    let src = pick_source(&g, args.seed).context("the graph has no edges")?;
    if let Some(p) = &args.write_edges {
        let t = Instant::now();
        std::fs::write(p, bam::abi::as_bytes(&g.edges))
            .with_context(|| format!("writing {}", p.display()))?;
        println!(
            "wrote the edge list to {} in {:.1} s",
            p.display(),
            t.elapsed().as_secs_f64()
        );
    }
    println!(
        "graph: {} vertices, {m_undirected} undirected edges, {} CSR entries ({:.2} GB); generated in {gen_s:.1} s, CSR in {csr_s:.1} s; BFS source {src}",
        g.vertices(),
        g.edge_count(),
        g.edge_count() as f64 * 4.0 / 1e9
    );
    Ok(Graph {
        g,
        src,
        undirected_edges: m_undirected,
        gen_s,
        csr_s,
    })
}

/// The vertex count and the undirected edges of a generated `--graph` of `--scale`.
fn generate_edges(args: &Args) -> Result<(u32, Vec<(u32, u32)>)> {
    if args.scale == 0 || args.scale > 31 {
        bail!("--scale {} must be in 1..=31", args.scale);
    }
    let m = (args.edgefactor as u64) << args.scale;
    let pb = progress(m, "generating", false);
    let e = match args.graph {
        GraphKind::Kronecker => kronecker(args.scale, args.edgefactor, args.seed, &|d| {
            pb.set_position(d)
        })?,
        GraphKind::Uniform => uniform(1u32 << args.scale.min(31), m, args.seed, &|d| {
            pb.set_position(d)
        })?,
    };
    pb.finish_and_clear();
    Ok((1u32 << args.scale.min(31), e))
}

/// The CPU's answers, which the GPU's must equal (none with `--no-check`).
struct Reference {
    /// BFS level of every vertex.
    levels: Option<Vec<u32>>,
    /// Component label of every vertex.
    comp: Option<Vec<u32>>,
    /// Seconds of BFS and CC on the CPU.
    cpu_s: Option<f64>,
}

/// BFS and CC on the CPU (every host thread).
fn cpu_reference(args: &Args, graph: &Graph) -> Reference {
    if args.no_check {
        return Reference {
            levels: None,
            comp: None,
            cpu_s: None,
        };
    }
    let t = Instant::now();
    let l = bfs_levels(&graph.g, graph.src);
    let c = cc_labels(&graph.g);
    let s = t.elapsed().as_secs_f64();
    println!(
        "CPU reference ({} threads): BFS + CC in {s:.2} s",
        rayon::current_num_threads()
    );
    Reference {
        levels: Some(l),
        comp: Some(c),
        cpu_s: Some(s),
    }
}

impl Work {
    /// The shared buffers for `g`, its offsets copied in.
    fn new(gpu: &Arc<Gpu>, g: &Csr) -> Result<Work> {
        let n_us = g.vertices();
        let w = Work {
            offsets: DeviceBuffer::zeroed(gpu, 8 * g.offsets.len())?,
            level_of: DeviceBuffer::zeroed(gpu, 4 * n_us)?,
            fronts: [
                DeviceBuffer::zeroed(gpu, 4 * n_us)?,
                DeviceBuffer::zeroed(gpu, 4 * n_us)?,
            ],
            count: DeviceBuffer::zeroed(gpu, 8)?,
            comp: DeviceBuffer::zeroed(gpu, 4 * n_us)?,
            n: n_us as u32,
        };
        w.offsets.write(0, &g.offsets)?;
        Ok(w)
    }
}

/// The runs asked for: each variant once, the bam variant once per line size and
/// read-ahead.
fn variant_runs(args: &Args) -> Vec<(Variant, u32, u32)> {
    args.variants
        .iter()
        .flat_map(|&v| match v {
            Variant::Bam => args
                .line
                .iter()
                .flat_map(|&l| args.readahead.iter().map(move |&r| (v, l, r)))
                .collect(),
            _ => vec![(v, 0, 0)],
        })
        .collect()
}

/// What every variant's runs share.
struct Runner<'a> {
    gpu: &'a Arc<Gpu>,
    module: &'a Module,
    stream: Arc<CudaStream>,
    w: Work,
    graph: &'a Graph,
    args: &'a Args,
    reference: &'a Reference,
}

impl Runner<'_> {
    /// BFS and CC with the edge list where `variant` puts it (the bam variant with
    /// cache lines of `line` bytes and `readahead`).
    fn measure(&self, variant: Variant, line: u32, readahead: u32) -> Result<Measured> {
        let (gpu, g, args) = (self.gpu, &self.graph.g, self.args);
        let (ref_levels, ref_comp) = (&self.reference.levels, &self.reference.comp);
        let edge_bytes = 4 * g.edge_count();
        let plain = |edges: u64| {
            run_variant(
                self.module,
                &self.stream,
                &self.w,
                gpu.sms * BLOCKS_PER_SM,
                "plain",
                &(edges,),
                self.graph.src,
                args,
                ref_levels,
                ref_comp,
            )
        };
        match variant {
            Variant::Hbm => {
                let e = DeviceBuffer::zeroed(gpu, edge_bytes.max(4))?;
                e.write(0, &g.edges)?;
                plain(e.ptr())
            }
            Variant::Pinned => {
                let mut e = PinnedBuffer::new(gpu, edge_bytes.max(4))?;
                write_pinned(&mut e, g);
                plain(e.dev_ptr())
            }
            Variant::Bam => run_bam(
                gpu,
                self.module,
                &self.w,
                g,
                line,
                readahead,
                self.graph.src,
                args,
                ref_levels,
                ref_comp,
            ),
        }
    }
}

/// Prints one variant's line: its best times, rates and wrong vertices.
fn print_measured(name: &str, m: &Measured, g: &Csr) {
    println!(
        "{name:>8}: BFS best {:.4} s ({} levels, {} bottom-up, {:.2} G edges/s), CC best {:.4} s ({} sweeps); wrong: BFS {}, CC {} {}",
        best(&m.bfs),
        m.levels,
        m.bottom_up_levels,
        g.edge_count() as f64 / best(&m.bfs) / 1e9,
        best(&m.cc),
        m.cc_sweeps,
        m.bfs_wrong,
        m.cc_wrong,
        if m.notes.as_object().is_some_and(|o| !o.is_empty()) { m.notes.to_string() } else { String::new() }
    );
}

/// Each bam variant's best times over the pinned and HBM variants'.
fn time_ratios(results: &serde_json::Map<String, Value>) -> Value {
    let ratio = |a: &str, b: &str, k: &str| -> Option<f64> {
        Some(results.get(a)?.get(k)?.as_f64()? / results.get(b)?.get(k)?.as_f64()?)
    };
    let mut ratios = serde_json::Map::new();
    for name in results.keys().filter(|k| k.starts_with("bam")) {
        ratios.insert(
            name.clone(),
            json!({
                "bfs_over_pinned": ratio(name, "pinned", "bfs_best_s"), "bfs_over_hbm": ratio(name, "hbm", "bfs_best_s"),
                "cc_over_pinned": ratio(name, "pinned", "cc_best_s"), "cc_over_hbm": ratio(name, "hbm", "cc_best_s"),
            }),
        );
    }
    Value::Object(ratios)
}

/// The JSON report of the run.
fn report(
    args: &Args,
    info: &RunInfo,
    graph: &Graph,
    cpu_s: Option<f64>,
    results: serde_json::Map<String, Value>,
    ratios: Value,
) -> Value {
    let g = &graph.g;
    let (m_undirected, edge_bytes, src) = (graph.undirected_edges, 4 * g.edge_count(), graph.src);
    json!({
        "example": "graph-analytics", "run": info,
        "graph": { "kind": format!("{:?}", args.graph).to_lowercase(), "scale": args.scale, "edgefactor": args.edgefactor,
                   "input": args.input, "vertices": g.vertices(), "undirected_edges": m_undirected, "csr_entries": g.edge_count(),
                   "edge_list_bytes": edge_bytes, "source": src },
        "config": { "bfs": if args.top_down_only { "top-down" } else { "direction-optimizing" },
                    "cache_fraction": args.cache_fraction, "lines": args.line, "readahead": args.readahead, "fill_blocks": args.fill_blocks, "ssds": args.ssds, "threads": THREADS,
                    "blocks_per_sm": BLOCKS_PER_SM, "media": "host", "drive": "ideal" },
        "generate_s": graph.gen_s, "csr_s": graph.csr_s, "cpu_reference_s": cpu_s,
        "variants": results, "ratios": ratios,
    })
}

/// Copies the edge list into pinned memory with every host thread.
fn write_pinned(e: &mut PinnedBuffer, g: &Csr) {
    use rayon::prelude::*;
    let bytes = bam::abi::as_bytes(&g.edges);
    e.as_mut_bytes()[..bytes.len()]
        .par_chunks_mut(64 << 20)
        .zip(bytes.par_chunks(64 << 20))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// The edge list behind a cache of `cache_fraction` of it: on the simulated SSDs, loaded
/// through the cache, or where it is (`--device`).
#[allow(clippy::too_many_arguments)]
fn run_bam(
    gpu: &std::sync::Arc<Gpu>,
    module: &Module,
    w: &Work,
    g: &Csr,
    line: u32,
    readahead: u32,
    src: u32,
    args: &Args,
    ref_levels: &Option<Vec<u32>>,
    ref_comp: &Option<Vec<u32>>,
) -> Result<Measured> {
    let m = g.edge_count() as u64;
    let lines = (4 * m).div_ceil(line as u64);
    let slots =
        ((lines as f64 * args.cache_fraction).ceil() as u64).clamp(1, u32::MAX as u64) as u32;
    let cfg = CacheConfig {
        readahead,
        fill_blocks: args.fill_blocks,
        ..CacheConfig::new(line, slots)
    };
    let io = IoConfig {
        queues: args.queues,
        ..io_config(&cfg)
    };
    let t = Instant::now();
    let arr: Box<dyn Storage> = match &args.device {
        Some(d) => d
            .parse::<GpuDevice>()?
            .open(gpu, &io)
            .with_context(|| format!("opening {d}"))?,
        None => Box::new(SimArray::new(
            gpu,
            SimConfig {
                ssds: args.ssds,
                media: Media::Host,
                capacity_bytes: (lines.div_ceil(args.ssds as u64) + 1) * line as u64,
                io,
                fill_pattern: false,
                ..SimConfig::new(DriveProfile::ideal())
            },
        )?),
    };
    let cache = Cache::new(arr.io(), cfg)?;
    let share = 100.0 * slots as f64 / lines as f64;
    let edges = match &args.device {
        Some(d) => {
            // In place: element i is bytes 4 i .. 4 i + 4 of the device.
            let edges = cache
                .array_read_only::<u32>(m.max(1), 0, Layout::Stripe)
                .with_context(|| format!("{m} edges on {d} (write them with --write-edges)"))?;
            println!("    bam: the edge list read in place through {}; cache {slots} lines of {line} B ({share:.0}% of the edge list)",
                arr.describe());
            edges
        }
        None => {
            let edges = cache.array::<u32>(m.max(1), 0, Layout::Stripe)?;
            let pb = progress(m, "loading", false);
            const PIECE: usize = 64 << 20;
            for (i, c) in g.edges.chunks(PIECE).enumerate() {
                edges.load(c, (i * PIECE) as u64)?;
                pb.set_position(((i * PIECE) + c.len()) as u64);
            }
            cache.flush()?;
            pb.finish_and_clear();
            println!("    bam: {m} edges loaded onto {} simulated SSDs in {:.1} s; cache {slots} lines of {line} B ({share:.0}% of the edge list)",
                args.ssds, t.elapsed().as_secs_f64());
            edges
        }
    };
    let load_s = t.elapsed().as_secs_f64();
    cache.reset_stats()?;
    let mut r = run_variant(
        module,
        cache.stream(),
        w,
        gpu.sms * BLOCKS_PER_SM,
        "bam",
        &(edges.view(),),
        src,
        args,
        ref_levels,
        ref_comp,
    )?;
    cache.check_errors()?;
    let st = cache.stats()?;
    r.notes = json!({ "load_s": load_s, "cache_lines": slots, "edge_lines": lines, "hit_rate": st.hit_rate(),
                      "misses": st.misses, "accesses": st.accesses, "device": arr.describe() });
    edges.close()?;
    cache.close()?;
    drop(arr);
    Ok(r)
}

/// BFS and CC `args.runs` times each with the edge list passed as `edges` (one kernel
/// argument: a pointer or a bam::array view), checked against the reference.
#[allow(clippy::too_many_arguments)]
fn run_variant<E: bam::KernelArg>(
    module: &Module,
    stream: &bam::cuda::CudaStream,
    w: &Work,
    blocks: u32,
    form: &str,
    edges: &(E,),
    src: u32,
    args: &Args,
    ref_levels: &Option<Vec<u32>>,
    ref_comp: &Option<Vec<u32>>,
) -> Result<Measured> {
    let k = Kernels {
        module,
        stream,
        w,
        blocks,
        form,
    };
    let e = edges.0;
    let (bfs, levels, bottom_up_levels) = time_bfs(&k, e, src, args)?;
    let bfs_wrong = wrong(&w.level_of, ref_levels.as_deref(), "BFS", form, "levels")?;
    let (cc, sweeps) = time_cc(&k, e, args.runs)?;
    let cc_wrong = wrong(&w.comp, ref_comp.as_deref(), "CC", form, "labels")?;
    Ok(Measured {
        bfs,
        cc,
        levels,
        bottom_up_levels,
        cc_sweeps: sweeps,
        bfs_wrong,
        cc_wrong,
        notes: json!({}),
    })
}

/// Where a variant's kernels run: the module, the stream, the shared buffers, the grid
/// and the edge list's form (`plain` or `bam`: the suffix of the kernels' names).
struct Kernels<'a> {
    module: &'a Module,
    stream: &'a bam::cuda::CudaStream,
    w: &'a Work,
    blocks: u32,
    form: &'a str,
}

impl Kernels<'_> {
    /// Waits for the work on the stream (five minutes at most).
    fn sync(&self, what: &str) -> Result<()> {
        self.w
            .offsets
            .gpu()
            .sync_timeout(self.stream, Duration::from_secs(300))
            .with_context(|| format!("{what} did not finish"))
    }
}

/// BFS from `src`, `args.runs` times, one launch per level (bottom-up where the frontier
/// is large, unless `--top-down-only`): the times, the levels and the levels of the last
/// run that ran bottom-up.
fn time_bfs<E: bam::KernelArg>(
    k: &Kernels,
    e: E,
    src: u32,
    args: &Args,
) -> Result<(Vec<f64>, u32, u32)> {
    let w = k.w;
    let unseen = vec![UNSEEN; w.n as usize];
    let mut levels = 0;
    let mut bottom_up_levels = 0u32;
    let bfs = time_runs(
        args.runs,
        || {
            w.level_of.write(0, &unseen)?;
            w.level_of.write(4 * src as usize, &[0u32])?;
            w.fronts[0].write(0, &[src])?;
            Ok(())
        },
        || {
            let (mut level, mut size) = (0u32, 1u32);
            bottom_up_levels = 0;
            while size > 0 {
                if level > w.n {
                    bail!("BFS did not end after {level} levels");
                }
                w.count.zero()?;
                let bottom_up =
                    !args.top_down_only && size as u64 * BOTTOM_UP_FRACTION > w.n as u64;
                bottom_up_levels += u32::from(bottom_up);
                let kernel = if bottom_up {
                    "bfs_bottom_up"
                } else {
                    "bfs_level"
                };
                let a = (
                    w.offsets.ptr(),
                    e,
                    w.level_of.ptr(),
                    w.n,
                    w.fronts[level as usize % 2].ptr(),
                    size,
                    w.fronts[(level as usize + 1) % 2].ptr(),
                    w.count.ptr(),
                    level,
                );
                // SAFETY: bfs_level_{plain,bam} and bfs_bottom_up_{plain,bam} take
                // (const uint64_t*, EDGES, uint32_t*, uint32_t, const uint32_t*, uint32_t,
                // uint32_t*, uint32_t*, uint32_t): EDGES is a pointer or bam::array<uint32_t>
                // (ArrayView); the buffers outlive the sync.
                unsafe {
                    k.module.launch(
                        k.stream,
                        &format!("{kernel}_{}", k.form),
                        k.blocks,
                        THREADS,
                        0,
                        &a,
                    )?
                };
                k.sync("a BFS level")?;
                let mut c = [0u32];
                w.count.read(0, &mut c)?;
                size = c[0];
                level += 1;
            }
            levels = level;
            Ok(())
        },
    )?;
    Ok((bfs, levels, bottom_up_levels))
}

/// Connected components, `runs` times: hooking and compression sweeps until no label
/// moves; the times and the sweeps of the last run.
fn time_cc<E: bam::KernelArg>(k: &Kernels, e: E, runs: u32) -> Result<(Vec<f64>, u32)> {
    let (w, blocks) = (k.w, k.blocks);
    let mut sweeps = 0;
    let cc = time_runs(
        runs,
        || Ok(()),
        || {
            let a = (w.comp.ptr(), w.n);
            // SAFETY: cc_init(uint32_t*, uint32_t); comp has n entries.
            unsafe {
                k.module
                    .launch(k.stream, "cc_init", blocks, THREADS, 0, &a)?
            };
            sweeps = 0;
            loop {
                sweeps += 1;
                if sweeps > MAX_CC_SWEEPS {
                    bail!("CC did not converge in {MAX_CC_SWEEPS} sweeps");
                }
                w.count.zero()?;
                let h = (w.offsets.ptr(), e, w.n, w.comp.ptr(), w.count.ptr());
                // SAFETY: cc_hook_{plain,bam}(const uint64_t*, EDGES, uint32_t, uint32_t*,
                // uint32_t*); cc_compress(uint32_t*, uint32_t); the buffers outlive the sync.
                unsafe {
                    let hook = format!("cc_hook_{}", k.form);
                    k.module.launch(k.stream, &hook, blocks, THREADS, 0, &h)?;
                    k.module
                        .launch(k.stream, "cc_compress", blocks, THREADS, 0, &a)?;
                }
                k.sync("a CC sweep")?;
                let mut c = [0u32];
                w.count.read(0, &mut c)?;
                if c[0] == 0 {
                    return Ok(());
                }
            }
        },
    )?;
    Ok((cc, sweeps))
}

/// Vertices whose value in `buf` (read back from the GPU) differs from the reference
/// (0 without one), printed as a failure with the first few.
fn wrong(
    buf: &DeviceBuffer,
    reference: Option<&[u32]>,
    what: &str,
    form: &str,
    noun: &str,
) -> Result<usize> {
    let Some(r) = reference else { return Ok(0) };
    let mut got = vec![0u32; r.len()];
    buf.read(0, &mut got)?;
    let (k, first) = compare(r, &got);
    if k != 0 {
        println!("FAIL: {what} ({form}): {k} {noun} differ, first {first:?}");
    }
    Ok(k)
}
