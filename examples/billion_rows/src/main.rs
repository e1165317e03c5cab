//! The One Billion Row Challenge with the file on the (simulated) SSD array, streamed to
//! the GPU by `bam::scan_reader` and parsed there; against the same parser with the file
//! in GPU memory, the raw zero-copy read of the file from pinned host memory (the PCIe
//! limit of any reader of host-resident data) and the CPU reference.
//!
//!     cargo run --release -p billion-rows -- --rows 1e9 --json results.json
//!
//! Steps (each timed on its own; generation and loading are not part of the time to
//! result): generate the measurements file (or read --input), aggregate it on the CPU
//! (the reference the GPU results must equal), run the HBM baseline, the zero-copy read,
//! load the file onto the simulated SSDs through the GPU's I/O queues, then run the scan
//! `--runs` times and print the challenge's output line. With `--device file:PATH`, the
//! scan reads the measurements file where it is, through the file backend (no load).

use anyhow::{bail, Context, Result};
use bam::cuda::DeviceBuffer;
use bam::scan::{io_config, Scan, ScanConfig, Spans};
use bam::storage::sim::SimArray;
use bam::storage::{GpuDevice, Storage};
use bam::{Gpu, IoArray, Module};
use billion_rows::{aggregate, format_results, generate, read_stations, synthetic_stations, Agg};
use clap::Parser;
use example_support::{
    best, parse_count, parse_size, progress, time_runs, zero_copy_times, RunInfo, ScanArgs,
    ScanKernels,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

static KERNELS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin"));

/// Table layout of kernels.cu: TABLE_SLOTS entries of key, sum, count (8 B each), min,
/// max, name length, ready (4 B each), then the names (NAME_STRIDE bytes each).
const TABLE_SLOTS: usize = 16384;
const NAME_STRIDE: usize = 104;
const TABLE_BYTES: usize = TABLE_SLOTS * (40 + NAME_STRIDE);
/// Bytes after each chunk read with it: longer than the longest row (100 + 1 + 5 + 1).
const HALO: u32 = 512;

#[derive(Parser, Debug)]
#[command(
    about = "The One Billion Row Challenge from (simulated) SSDs through GPU threads",
    long_about = "Generates the challenge's measurements file (`station;value` rows), loads it onto a \
simulated SSD array and computes min/mean/max per station on the GPU with bam's scan reader \
(large sequential reads issued by GPU threads, a few chunks ahead). The same run measures the \
parser on the file in GPU memory (HBM), a raw zero-copy read of the file from pinned host \
memory, and the CPU reference that the GPU output must equal.\n\n\
Example: billion-rows --rows 1e9 --json 1brc.json   (about 13.8 GB: needs ~45 GB of host memory)\n\
Example: billion-rows --rows 10M                    (a quick check)"
)]
struct Args {
    /// Rows to generate (1e9 is the challenge; K, M, G suffixes).
    #[arg(long, default_value = "1e9", value_parser = parse_count)]
    rows: u64,
    /// Synthetic stations to draw from (the challenge allows up to 10,000).
    #[arg(long, default_value_t = 413)]
    stations: usize,
    /// Read stations and their mean temperatures from a `name;mean` file instead.
    #[arg(long)]
    stations_file: Option<PathBuf>,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Use this measurements file instead of generating one.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Also write the generated file here (for other engines, e.g. DuckDB).
    #[arg(long)]
    write_file: Option<PathBuf>,
    /// Chunk size of the scan (K, M suffixes).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    chunk: u64,
    #[command(flatten)]
    scan: ScanArgs,
    /// Timed runs of each GPU variant (the best is reported).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Read the measurements where they are instead of loading them onto simulated SSDs:
    /// a GPU device string whose first bytes are the file, e.g.
    /// `file:measurements.txt` (the file backend: the file is the data, no load step) or
    /// `file:measurements.txt,direct` (cold: every byte from the device). Give the same
    /// file as `--input` for the CPU reference.
    #[arg(long, value_name = "DEV")]
    device: Option<String>,
    /// Queue pairs per SSD of `--device` (the simulated array gets 16; through the file
    /// backend, 64 and 128 scan the page-cached file equally fast: each queue pair gets
    /// its share of the backend's staging).
    #[arg(long, default_value_t = 64)]
    queues: u32,
    /// Skip the CPU reference (then the GPU output is not checked).
    #[arg(long)]
    no_check: bool,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the challenge's output line here.
    #[arg(long)]
    output: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !bam::gpu_available() {
        println!("SKIPPED: no GPU (the CUDA driver is missing or sees no device)");
        return Ok(());
    }
    check_args(&args)?;

    // 1. The file.
    let (data, gen_s) = measurements(&args)?;
    let len = data.len() as u64;

    // 2. The CPU reference.
    let (expected, cpu_s) = cpu_reference(&args, &data)?;

    let gpu = Gpu::new(0)?;
    // Every module before the simulated SSDs start (see bam::Module).
    let module = Module::load(&gpu, KERNELS)?;
    let info = RunInfo::new(&gpu.name);
    let k = Aggregator::new(&gpu, &module, &args, expected)?;

    // 3. Baseline: the file in GPU memory.
    let (hbm_times, h2d_s) = k.run_hbm(&data)?;
    let hbm_ok = k.check("HBM")?;
    println!(
        "HBM-resident: best {:.4} s ({:.1} GB/s), output {}",
        best(&hbm_times),
        len as f64 / best(&hbm_times) / 1e9,
        ok(hbm_ok)
    );

    // 4. The raw zero-copy read of the file from pinned host memory.
    let zc_times = zero_copy_times(&gpu, &module, &[&data], args.runs)?;
    println!(
        "zero-copy read of the file: best {:.4} s ({:.1} GB/s)",
        best(&zc_times),
        len as f64 / best(&zc_times) / 1e9
    );

    // 5. The file on the simulated SSDs, loaded through the GPU's I/O queues; or where it
    // is (--device).
    let cfg = ScanConfig::new(args.chunk as u32)
        .halo(HALO)
        .depth(args.scan.depth)
        .blocks(k.sk.blocks);
    let t = Instant::now();
    let arr: Box<dyn Storage> = match &args.device {
        Some(d) => d
            .parse::<GpuDevice>()?
            .open(
                &gpu,
                // As many queue pairs as asked: one would be served by one forwarder
                // warp and one service thread.
                &bam::io::IoConfig {
                    queues: args.queues,
                    ..io_config(&cfg, 1)
                },
            )
            .with_context(|| format!("opening {d}"))?,
        None => {
            let sc = args
                .scan
                .sim_config(&cfg, 1, cfg.ssd_bytes(args.scan.ssds, 1, len));
            Box::new(SimArray::new(&gpu, sc)?)
        }
    };
    let setup_s = t.elapsed().as_secs_f64();
    let (scan, load_s) = match &args.device {
        Some(d) => {
            let span = Spans::in_place(arr.io(), len).with_context(|| d.clone())?;
            println!(
                "reading the file in place through {} (set up in {setup_s:.2} s)",
                arr.describe()
            );
            (Scan::new(arr.io(), &[span], &cfg)?, 0.0)
        }
        None => {
            let (scan, load_s) = load_file(arr.io(), &data, &cfg)?;
            println!("loaded onto {} simulated SSDs in {load_s:.2} s ({:.1} GB/s; array set up in {setup_s:.2} s)", args.scan.ssds, len as f64 / load_s / 1e9);
            (scan, load_s)
        }
    };
    drop(data);

    // 6. The scan: time to result.
    let grid = scan.blocks().min(k.sk.blocks);
    let scan_times = k.run_scan(&scan, grid)?;
    let results = read_table(&k.table)?;
    let scan_ok = k.check("scan")?;
    let line = format_results(&results);
    let shown: String = line.chars().take(300).collect();
    println!(
        "{shown}{}",
        if line.len() > shown.len() { " ..." } else { "" }
    );
    if let Some(p) = &args.output {
        std::fs::write(p, format!("{line}\n"))?;
    }
    let sb = best(&scan_times);
    let from = match &args.device {
        Some(_) => arr.describe(),
        None => "the simulated SSDs".to_string(),
    };
    println!(
        "scan from {}: best {sb:.4} s ({:.1} GB/s, {:.2}x the zero-copy read, {:.2}x HBM), output {}",
        from,
        len as f64 / sb / 1e9,
        sb / best(&zc_times),
        sb / best(&hbm_times),
        ok(scan_ok)
    );
    let checked = k.expected.is_some();
    let report = json!({
        "example": "billion-rows",
        "run": info,
        "rows": args.rows, "bytes": len, "stations": results.len(),
        "config": { "chunk": args.chunk, "halo": HALO, "depth": args.scan.depth, "threads": args.scan.threads,
                    "blocks": grid, "ssds": args.scan.ssds, "sim_sms": args.scan.sim_sms, "media": "host", "drive": "ideal",
                    "device": arr.describe() },
        "generate_s": gen_s, "cpu_reference_s": cpu_s, "h2d_copy_s": h2d_s, "load_s": load_s,
        "scan": { "runs_s": scan_times, "best_s": sb, "match": checked.then_some(scan_ok) },
        "hbm": { "runs_s": hbm_times, "best_s": best(&hbm_times), "match": checked.then_some(hbm_ok) },
        "zero_copy_read": { "runs_s": zc_times, "best_s": best(&zc_times), "gb_s": len as f64 / best(&zc_times) / 1e9 },
        "output": line,
    });
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
    }
    drop(scan);
    drop(arr);
    if !(scan_ok && hbm_ok) {
        std::process::exit(1);
    }
    Ok(())
}

/// Refuses arguments the run cannot use.
fn check_args(args: &Args) -> Result<()> {
    if args.chunk == 0 || args.chunk > (256 << 20) || !args.chunk.is_multiple_of(512) {
        bail!(
            "--chunk {} must be a multiple of 512 bytes, at most 256 MiB",
            args.chunk
        );
    }
    args.scan.validate()
}

/// The measurements file: `--input`, or generated (and written to `--write-file`);
/// returns it and the seconds it took to read or generate.
fn measurements(args: &Args) -> Result<(Vec<u8>, f64)> {
    let t = Instant::now();
    let data = match &args.input {
        Some(p) => std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        None => {
            let stations = match &args.stations_file {
                Some(p) => read_stations(p)?,
                None => synthetic_stations(args.stations, args.seed)?,
            };
            let pb = progress(args.rows, "generating", false);
            let d = generate(&stations, args.rows, args.seed, &|n| pb.set_position(n));
            pb.finish_and_clear();
            d
        }
    };
    let gen_s = t.elapsed().as_secs_f64();
    let len = data.len() as u64;
    println!(
        "file: {} bytes ({:.2} GB) in {gen_s:.2} s",
        len,
        len as f64 / 1e9
    );
    if let Some(p) = &args.write_file {
        let t = Instant::now();
        std::fs::write(p, &data).with_context(|| format!("writing {}", p.display()))?;
        println!(
            "wrote {} in {:.2} s",
            p.display(),
            t.elapsed().as_secs_f64()
        );
    }
    if len == 0 {
        bail!("the measurements file is empty");
    }
    Ok((data, gen_s))
}

/// The challenge's output line computed on the CPU (every host thread) and the seconds
/// it took; none with `--no-check`.
fn cpu_reference(args: &Args, data: &[u8]) -> Result<(Option<String>, Option<f64>)> {
    if args.no_check {
        return Ok((None, None));
    }
    let t = Instant::now();
    let r = aggregate(data)?;
    let s = t.elapsed().as_secs_f64();
    println!(
        "CPU reference ({} threads): {} stations in {s:.3} s",
        rayon::current_num_threads(),
        r.len()
    );
    Ok((Some(format_results(&r)), Some(s)))
}

/// Writes the file to one span of `arr` through the GPU's I/O queues; returns its scan
/// and the seconds loading took.
fn load_file<'a>(io: &'a IoArray, data: &[u8], cfg: &ScanConfig) -> Result<(Scan<'a>, f64)> {
    let len = data.len() as u64;
    let span = Spans::new(io).span(len)?;
    let scan = Scan::new(io, &[span], cfg)?;
    let pb = progress(len, "loading", true);
    let t = Instant::now();
    scan.write(0, 0, data, &mut |n| pb.set_position(n))?;
    let load_s = t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok((scan, load_s))
}

/// The parser's kernels: what scan kernels share, the stations' table and the output
/// the GPU's must equal.
struct Aggregator<'g> {
    sk: ScanKernels<'g>,
    table: DeviceBuffer,
    /// The CPU's output line (none: unchecked).
    expected: Option<String>,
    chunk: u32,
}

impl<'g> Aggregator<'g> {
    fn new(
        gpu: &'g Arc<Gpu>,
        module: &'g Module,
        args: &Args,
        expected: Option<String>,
    ) -> Result<Self> {
        let sk = ScanKernels::new(gpu, module, &args.scan, args.runs)?;
        let table = DeviceBuffer::zeroed(gpu, TABLE_BYTES)?;
        Ok(Aggregator {
            sk,
            table,
            expected,
            chunk: args.chunk as u32,
        })
    }

    /// Whether the table's output equals the CPU reference (true without one; a
    /// mismatch is printed); malformed rows or failed blocks are an error.
    fn check(&self, label: &str) -> Result<bool> {
        let got = format_results(&read_table(&self.table)?);
        let c = self.sk.counts()?;
        if c[0] != 0 {
            bail!("{label}: {} malformed row(s) in the file", c[0]);
        }
        if c[1] != 0 {
            bail!("{label}: the scan failed in {} block(s)", c[1]);
        }
        let same = self.expected.as_ref().is_none_or(|e| *e == got);
        if !same {
            println!("FAIL: {label} output differs from the CPU reference");
        }
        Ok(same)
    }

    /// Empties the table and zeroes the counters before a run.
    fn reset(&self) -> Result<()> {
        self.table.write(0, &empty_table())?;
        self.sk.counters.zero()?;
        Ok(())
    }

    /// The parser over a copy of the file in GPU memory: its times and the seconds of
    /// the copy.
    fn run_hbm(&self, data: &[u8]) -> Result<(Vec<f64>, f64)> {
        let len = data.len() as u64;
        let hbm = DeviceBuffer::zeroed(self.sk.gpu, len as usize + 8)?;
        let t = Instant::now();
        hbm.write(0, data)?;
        let h2d_s = t.elapsed().as_secs_f64();
        let times = time_runs(
            self.sk.runs,
            || self.reset(),
            || {
                let a = (
                    hbm.ptr(),
                    len,
                    self.chunk,
                    HALO,
                    self.table.ptr(),
                    self.sk.counters.ptr(),
                );
                // SAFETY: brc_hbm(const char*, uint64_t, uint32_t, uint32_t, char*, unsigned long
                // long*); the buffers outlive the synchronisation.
                unsafe { self.sk.launch_and_sync("brc_hbm", self.sk.blocks, &a) }
            },
        )?;
        Ok((times, h2d_s))
    }

    /// The parser over the file on the simulated SSDs through `scan`, `grid` blocks.
    fn run_scan(&self, scan: &Scan, grid: u32) -> Result<Vec<f64>> {
        let (table, counters) = (self.table.ptr(), self.sk.counters.ptr());
        time_runs(
            self.sk.runs,
            || self.reset(),
            || {
                let a = (scan.view(), table, counters, counters + 8);
                // SAFETY: brc_scan(bam_scan_view, char*, unsigned long long*, unsigned long long*);
                // ScanView is bam_scan_view's layout; everything outlives the synchronisation.
                unsafe { self.sk.launch_and_sync("brc_scan", grid, &a) }?;
                scan.check_errors()?;
                Ok(())
            },
        )
    }
}

fn ok(b: bool) -> &'static str {
    if b {
        "matches the CPU reference"
    } else {
        "DIFFERS"
    }
}

/// The table as the kernels expect it before a run: keys 0, min = i32::MAX, max = i32::MIN.
fn empty_table() -> Vec<u8> {
    let mut t = vec![0u8; TABLE_BYTES];
    let (mn, rest) = t[24 * TABLE_SLOTS..].split_at_mut(4 * TABLE_SLOTS);
    for w in mn.chunks_exact_mut(4) {
        w.copy_from_slice(&i32::MAX.to_le_bytes());
    }
    for w in rest[..4 * TABLE_SLOTS].chunks_exact_mut(4) {
        w.copy_from_slice(&i32::MIN.to_le_bytes());
    }
    t
}

/// The stations the kernels found, decoded from the table.
fn read_table(table: &DeviceBuffer) -> Result<BTreeMap<Vec<u8>, Agg>> {
    let mut t = vec![0u8; TABLE_BYTES];
    table.read(0, &mut t)?;
    let u64_at = |off: usize| u64::from_le_bytes(t[off..off + 8].try_into().unwrap_or([0; 8]));
    let u32_at = |off: usize| u32::from_le_bytes(t[off..off + 4].try_into().unwrap_or([0; 4]));
    let mut out = BTreeMap::new();
    let mut keys = std::collections::HashSet::new();
    for i in 0..TABLE_SLOTS {
        let key = u64_at(8 * i);
        if key == 0 {
            continue;
        }
        // Blocks tell names apart by a 64-bit hash (kernels.cu, local_table): two names
        // with one hash would have been merged there.
        if !keys.insert(key) {
            bail!("two station names share the 64-bit hash {key:#x}: results not reliable");
        }
        let n = u32_at(32 * TABLE_SLOTS + 4 * i) as usize;
        if n == 0 || n > 100 {
            bail!("table slot {i}: name length {n}");
        }
        let name_off = 40 * TABLE_SLOTS + NAME_STRIDE * i;
        let agg = Agg {
            min: u32_at(24 * TABLE_SLOTS + 4 * i) as i32,
            max: u32_at(28 * TABLE_SLOTS + 4 * i) as i32,
            sum: u64_at(8 * TABLE_SLOTS + 8 * i) as i64,
            count: u64_at(16 * TABLE_SLOTS + 8 * i),
        };
        if out
            .insert(t[name_off..name_off + n].to_vec(), agg)
            .is_some()
        {
            bail!(
                "station in two table slots: {:?}",
                String::from_utf8_lossy(&t[name_off..name_off + n])
            );
        }
    }
    Ok(out)
}
