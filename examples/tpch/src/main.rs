//! TPC-H Q1 and Q6 over lineitem stored column by column on the (simulated) SSD array,
//! scanned by GPU blocks with `bam::scan_reader` (one span per column, chunk k of every
//! column holds the same rows); against the same kernels with the columns in GPU memory,
//! the raw zero-copy rate of reading the columns from pinned host memory, and the CPU
//! reference that the GPU answers must equal.
//!
//!     cargo run --release -p tpch-scan -- --sf 30 --json tpch.json
//!
//! Generation and loading are timed on their own; the time to result of a query is its
//! kernel, launch to finish, with the columns on the SSDs.
//!
//! With `--device file:PATH` the queries read a table file where it is, through the file
//! backend (no load step): write it once with `--write-table PATH` (the same `--sf` and
//! `--seed`), e.g.
//!
//!     tpch-scan --sf 30 --write-table lineitem.tbl --device file:lineitem.tbl,workers=8

use anyhow::{bail, Context, Result};
use bam::cuda::DeviceBuffer;
use bam::io::{IoArray, IoConfig};
use bam::scan::{io_config, Scan, ScanConfig, Span, Spans};
use bam::storage::sim::{SimArray, SimConfig};
use bam::storage::{GpuDevice, Storage};
use bam::{Gpu, Module};
use clap::Parser;
use example_support::{best, progress, time_runs, zero_copy_times, RunInfo, ScanArgs, ScanKernels};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tpch_scan::{
    days, format_scaled, generate, q1, q6, table_layout, write_columns, write_table, Lineitem,
    Q1Row, COLUMNS, TABLE_ALIGN,
};

static KERNELS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin"));

/// Q1 groups and fields per group (kernels.cu): returnflag A/N/R x linestatus F/O.
const Q1_GROUPS: usize = 6;
const Q1_FIELDS: usize = 6;
/// The columns Q6 reads, in the order q6_scan takes them.
const Q6_COLUMNS: [&str; 4] = ["l_shipdate", "l_quantity", "l_extendedprice", "l_discount"];
/// Spans of both queries' scans (each holds buffer slots of its own).
const SCAN_SPANS: u32 = (COLUMNS.len() + Q6_COLUMNS.len()) as u32;

#[derive(Parser, Debug)]
#[command(
    about = "TPC-H Q1 and Q6 over lineitem columns on (simulated) SSDs, scanned by GPU threads",
    long_about = "Generates lineitem's Q1/Q6 columns (the project's generator, TPC-H 3.0.1 clause 4.2.3), \
loads them column by column onto a simulated SSD array and runs Q1 and Q6 on the GPU with bam's scan \
reader. The same run measures the kernels with the columns in GPU memory (HBM), the raw zero-copy read \
rate of the columns from pinned host memory, and the CPU reference the answers must equal.\n\n\
Example: tpch-scan --sf 30 --columns-dir /tmp/li --json tpch.json   (180 M rows)\n\
Example: tpch-scan --sf 1                                            (a quick check)\n\
Example: tpch-scan --sf 30 --write-table li.tbl --device file:li.tbl,workers=8   (the table file read in place)"
)]
struct Args {
    /// Scale factor (lineitem has about 6 M rows per unit).
    #[arg(long, default_value_t = 30.0)]
    sf: f64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write the columns here (raw little-endian, with meta.json) for other engines.
    #[arg(long)]
    columns_dir: Option<PathBuf>,
    /// Also write the columns as one table file here, each column at a multiple of 16 MiB:
    /// the file `--device file:PATH` reads.
    #[arg(long, value_name = "PATH")]
    write_table: Option<PathBuf>,
    /// Read the columns where they are instead of loading them onto simulated SSDs: a GPU
    /// device string whose first bytes are the table file of the same --sf and --seed
    /// (--write-table), e.g. `file:lineitem.tbl,workers=8` (page cache) or
    /// `file:lineitem.tbl,direct` (every byte from the disk).
    #[arg(long, value_name = "DEV")]
    device: Option<String>,
    /// Queue pairs of `--device` (the simulated array gets 16).
    #[arg(long, default_value_t = 64)]
    queues: u32,
    /// Rows per chunk (a multiple of 512: the 1-byte columns' chunks are whole LBAs).
    #[arg(long, default_value_t = 262144)]
    chunk_rows: u32,
    #[command(flatten)]
    scan: ScanArgs,
    /// Timed runs of each query and variant (the best is reported).
    #[arg(long, default_value_t = 5)]
    runs: u32,
    /// Write the GPU's answers here (JSON, the shape duckdb_peer.py --expect reads).
    #[arg(long)]
    answers: Option<PathBuf>,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The answers of one variant: Q1 rows and the Q6 revenue (cents x hundredths).
#[derive(PartialEq, Debug)]
struct Answers {
    q1: Vec<Q1Row>,
    q6: u128,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !bam::gpu_available() {
        println!("SKIPPED: no GPU (the CUDA driver is missing or sees no device)");
        return Ok(());
    }
    check_args(&args)?;

    // 1. The table.
    let (li, gen_s) = generate_table(&args)?;
    let rows = li.rows() as u64;
    let q1_bytes = column_bytes(rows, &COLUMNS.map(|(n, _)| n));
    let q6_bytes = column_bytes(rows, &Q6_COLUMNS);

    // 2. The CPU reference.
    let (expected, cpu_s) = cpu_reference(&li);

    let gpu = Gpu::new(0)?;
    let module = Module::load(&gpu, KERNELS)?;
    let info = RunInfo::new(&gpu.name);
    let k = Queries::new(&gpu, &module, &args)?;

    // 3. Baseline: the columns in GPU memory.
    let hbm = k.run_hbm(&li)?;
    let hbm_ok = hbm.answers == expected;
    println!(
        "HBM-resident: Q1 best {:.4} s, Q6 best {:.4} s, answers {}",
        best(&hbm.q1),
        best(&hbm.q6),
        verdict(hbm_ok)
    );

    // 4. The raw zero-copy read rate of the columns from pinned host memory.
    let parts = COLUMNS
        .iter()
        .map(|(n, _)| column(&li, n))
        .collect::<Result<Vec<_>>>()?;
    let zc_times = zero_copy_times(&gpu, &module, &parts, args.runs)?;
    let zc_rate = q1_bytes as f64 / best(&zc_times);
    println!("zero-copy read of the 7 columns: {:.1} GB/s", zc_rate / 1e9);

    // 5. The columns on the simulated SSDs, loaded through the GPU's I/O queues; or where
    // they are (--device).
    let cfg = ScanConfig::new(args.chunk_rows * 4)
        .depth(args.scan.depth)
        .blocks(k.sk.blocks);
    let arr: Box<dyn Storage> = match &args.device {
        Some(d) => d
            .parse::<GpuDevice>()?
            .open(
                &gpu,
                &IoConfig {
                    queues: args.queues,
                    ..io_config(&cfg, SCAN_SPANS)
                },
            )
            .with_context(|| format!("opening {d}"))?,
        None => Box::new(SimArray::new(&gpu, sim_config(&args, &cfg, rows))?),
    };
    let (q1_scan, q6_scan, load_s, source) = match &args.device {
        Some(d) => {
            let (q1s, q6s) =
                columns_in_place(arr.io(), rows, &args, &cfg).with_context(|| d.clone())?;
            println!("reading the table file in place through {}", arr.describe());
            (q1s, q6s, 0.0, arr.describe())
        }
        None => {
            let (q1s, q6s, load_s) = load_columns(arr.io(), &li, &args, &cfg)?;
            (q1s, q6s, load_s, "the simulated SSDs".to_string())
        }
    };

    // 6. The queries from the SSDs: time to result.
    let grid = q1_scan.blocks().min(q6_scan.blocks()).min(k.sk.blocks);
    let got = k.run_scan(&q1_scan, &q6_scan, grid)?;
    let scan_ok = got.answers == expected;
    let m = Measured {
        rows,
        q1_bytes,
        q6_bytes,
        gen_s,
        cpu_s,
        load_s,
        zc_times,
        zc_rate,
        hbm,
        scan: got,
        grid,
        source,
    };
    print_scan(&m, scan_ok);
    let answers = json!({
        "q1": m.scan.answers.q1.iter().map(Q1Row::to_json).collect::<Vec<_>>(),
        "q6": format_scaled(m.scan.answers.q6, 4),
    });
    if let Some(p) = &args.answers {
        std::fs::write(p, serde_json::to_string_pretty(&answers)?)?;
    }
    if let Some(p) = &args.json {
        let r = report(&args, &info, &m, answers, scan_ok, hbm_ok);
        std::fs::write(p, serde_json::to_string_pretty(&r)?)?;
    }
    drop(q6_scan);
    drop(q1_scan);
    drop(arr);
    if !(scan_ok && hbm_ok) {
        println!("FAIL: GPU answers differ from the CPU reference: expected {expected:?}");
        std::process::exit(1);
    }
    Ok(())
}

/// Refuses arguments the run cannot use.
fn check_args(args: &Args) -> Result<()> {
    if args.chunk_rows == 0 || !args.chunk_rows.is_multiple_of(512) || args.chunk_rows > (64 << 20)
    {
        bail!(
            "--chunk-rows {} must be a positive multiple of 512, at most 64 Mi",
            args.chunk_rows
        );
    }
    args.scan.validate()?;
    if !(args.sf > 0.0 && args.sf <= 1000.0) {
        bail!("--sf {} must be in (0, 1000]", args.sf);
    }
    if args.device.is_some() && args.queues == 0 {
        bail!("--queues must be at least 1");
    }
    Ok(())
}

/// Generates lineitem's columns (and writes them to `--columns-dir`); returns them and
/// the seconds generation took.
fn generate_table(args: &Args) -> Result<(Lineitem, f64)> {
    let orders = (args.sf * 1.5e6).round() as u64;
    let pb = progress(orders, "generating", false);
    let t = Instant::now();
    let li = generate(args.sf, args.seed, &|n| pb.set_position(n))?;
    pb.finish_and_clear();
    let gen_s = t.elapsed().as_secs_f64();
    println!(
        "lineitem: {} rows (SF {}) in {gen_s:.2} s",
        li.rows(),
        args.sf
    );
    if let Some(d) = &args.columns_dir {
        std::fs::create_dir_all(d)?;
        write_columns(&li, d, args.sf, args.seed)?;
    }
    if let Some(p) = &args.write_table {
        let t = Instant::now();
        write_table(&li, p)?;
        println!(
            "wrote the table file {} in {:.2} s",
            p.display(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok((li, gen_s))
}

/// A column's bytes, by name.
fn column<'a>(li: &'a Lineitem, name: &str) -> Result<&'a [u8]> {
    li.column_bytes(name)
        .with_context(|| format!("no column {name}"))
}

/// Bytes of the columns `names` over `rows` rows.
fn column_bytes(rows: u64, names: &[&str]) -> u64 {
    names
        .iter()
        .map(|n| {
            COLUMNS
                .iter()
                .find(|(c, _)| c == n)
                .map_or(0, |(_, w)| rows * *w as u64)
        })
        .sum()
}

/// Q1's cutoff: 90 days before 1998-12-01.
fn q1_cutoff() -> i32 {
    days(1998, 12, 1) - 90
}

/// Q6's parameters as q6_params takes them: the year 1994, discount 5..7 hundredths,
/// quantity below 24.
fn q6_params() -> [u32; 6] {
    [
        days(1994, 1, 1) as u32,
        days(1995, 1, 1) as u32,
        5,
        7,
        24,
        0,
    ]
}

/// Answers Q1 and Q6 on the CPU (every host thread); returns them and the seconds.
fn cpu_reference(li: &Lineitem) -> (Answers, f64) {
    let t = Instant::now();
    let expected = Answers {
        q1: q1(li, 90),
        q6: q6(li, days(1994, 1, 1), 6, 24),
    };
    let cpu_s = t.elapsed().as_secs_f64();
    println!(
        "CPU reference ({} threads): Q1 + Q6 in {cpu_s:.3} s",
        rayon::current_num_threads()
    );
    (expected, cpu_s)
}

/// The simulated SSD array for the columns: room for every column in whole scan units.
fn sim_config(args: &Args, cfg: &ScanConfig, rows: u64) -> SimConfig {
    let unit = cfg.slot_bytes();
    let stored: u64 = COLUMNS
        .iter()
        .map(|(_, w)| (rows * *w as u64).div_ceil(unit) * unit)
        .sum();
    args.scan.sim_config(
        cfg,
        SCAN_SPANS,
        cfg.ssd_bytes(args.scan.ssds, COLUMNS.len() as u32, stored),
    )
}

/// Writes every column to its own span of `io` through the GPU's I/O queues; returns
/// the scans of Q1 (every column) and Q6 (its four) and the seconds loading took.
fn load_columns<'a>(
    io: &'a IoArray,
    li: &Lineitem,
    args: &Args,
    cfg: &ScanConfig,
) -> Result<(Scan<'a>, Scan<'a>, f64)> {
    let rows = li.rows() as u64;
    let mut alloc = Spans::new(io);
    let spans = COLUMNS
        .iter()
        .map(|(_, w)| Ok((alloc.span(rows * *w as u64)?, args.chunk_rows * *w as u32)))
        .collect::<Result<Vec<_>>>()?;
    let (q1_scan, q6_scan) = query_scans(io, &spans, cfg)?;
    let q1_bytes = column_bytes(rows, &COLUMNS.map(|(n, _)| n));
    let pb = progress(q1_bytes, "loading", true);
    let t = Instant::now();
    let mut loaded = 0u64;
    for (i, (n, _)) in COLUMNS.iter().enumerate() {
        let b = column(li, n)?;
        q1_scan.write(i, 0, b, &mut |d| pb.set_position(loaded + d))?;
        loaded += b.len() as u64;
    }
    let load_s = t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    println!(
        "loaded {q1_bytes} bytes onto {} simulated SSDs in {load_s:.2} s",
        args.scan.ssds
    );
    Ok((q1_scan, q6_scan, load_s))
}

/// The scans of the table file's columns where they lie on `io` (table_layout of `rows`
/// rows): no load step.
fn columns_in_place<'a>(
    io: &'a IoArray,
    rows: u64,
    args: &Args,
    cfg: &ScanConfig,
) -> Result<(Scan<'a>, Scan<'a>)> {
    let (cols, len) = table_layout(rows);
    let g = io.geometry();
    let held = g.ns_blocks.saturating_mul(g.ssds as u64) * g.lba_size as u64;
    if held < len {
        bail!(
            "the device holds {held} bytes; the table file of {rows} rows (--sf {} --seed {}) has \
             {len}: write it with --write-table",
            args.sf,
            args.seed
        );
    }
    if !TABLE_ALIGN.is_multiple_of(cfg.slot_bytes()) {
        bail!(
            "--chunk-rows {}: chunks of {} bytes do not fit the table file's 16 MiB column alignment",
            args.chunk_rows,
            cfg.slot_bytes()
        );
    }
    let spans = cols
        .iter()
        .zip(COLUMNS)
        .map(|(c, (_, w))| {
            let s = Spans::in_place_at(io, c.offset, c.bytes)?;
            Ok((s, args.chunk_rows * w as u32))
        })
        .collect::<Result<Vec<_>>>()?;
    query_scans(io, &spans, cfg)
}

/// Q1's scan of every column's span (in COLUMNS order, with its chunk size) and Q6's
/// of its four.
fn query_scans<'a>(
    io: &'a IoArray,
    spans: &[(Span, u32)],
    cfg: &ScanConfig,
) -> Result<(Scan<'a>, Scan<'a>)> {
    let q1_scan = Scan::with_chunks(io, spans, cfg)?;
    let q6_spans: Vec<_> = Q6_COLUMNS
        .iter()
        .map(|n| spans[COLUMNS.iter().position(|(c, _)| c == n).unwrap_or(0)])
        .collect();
    let q6_scan = Scan::with_chunks(io, &q6_spans, cfg)?;
    Ok((q1_scan, q6_scan))
}

/// The timed runs of Q1 and Q6 of one variant, and its answers.
struct Timed {
    q1: Vec<f64>,
    q6: Vec<f64>,
    answers: Answers,
}

/// The queries' kernels: what scan kernels share, and the blocks' partial results.
struct Queries<'g> {
    sk: ScanKernels<'g>,
    out: DeviceBuffer,
    chunk_rows: u32,
}

impl<'g> Queries<'g> {
    fn new(gpu: &'g Arc<Gpu>, module: &'g Module, args: &Args) -> Result<Self> {
        let sk = ScanKernels::new(gpu, module, &args.scan, args.runs)?;
        let out = DeviceBuffer::zeroed(gpu, 8 * Q1_GROUPS * Q1_FIELDS * sk.blocks as usize)?;
        Ok(Queries {
            sk,
            out,
            chunk_rows: args.chunk_rows,
        })
    }

    /// Zeroes the partial results and counters before a run.
    fn reset(&self) -> Result<()> {
        self.out.zero()?;
        self.sk.counters.zero()?;
        Ok(())
    }

    /// Q1's rows from the blocks' partial sums (an error for bad rows or failed blocks).
    fn read_q1(&self) -> Result<Vec<Q1Row>> {
        let mut v = vec![0u64; Q1_GROUPS * Q1_FIELDS * self.sk.blocks as usize];
        self.out.read(0, &mut v)?;
        let c = self.sk.counts()?;
        if c[0] != 0 {
            bail!("{} row(s) with an unknown return flag or line status", c[0]);
        }
        if c[1] != 0 {
            bail!("the scan failed in {} block(s)", c[1]);
        }
        Ok(q1_rows(&v))
    }

    /// Q6's revenue from the blocks' partial sums (an error for failed blocks).
    fn read_q6(&self) -> Result<u128> {
        let mut v = vec![0u64; self.sk.blocks as usize];
        self.out.read(0, &mut v)?;
        let c = self.sk.counts()?;
        if c[1] != 0 {
            bail!("the scan failed in {} block(s)", c[1]);
        }
        Ok(v.iter().map(|&x| x as u128).sum())
    }

    /// Q1 and Q6 with the columns copied to GPU memory.
    fn run_hbm(&self, li: &Lineitem) -> Result<Timed> {
        let bufs = COLUMNS
            .iter()
            .map(|(n, _)| {
                let b = column(li, n)?;
                let d = DeviceBuffer::zeroed(self.sk.gpu, b.len().max(1))?;
                d.write(0, b)?;
                Ok(d)
            })
            .collect::<Result<Vec<_>>>()?;
        let ptr = |name: &str| {
            COLUMNS
                .iter()
                .position(|(c, _)| *c == name)
                .map_or(0, |i| bufs[i].ptr())
        };
        let (rows, chunk_rows) = (li.rows() as u64, self.chunk_rows);
        let (out, counters) = (self.out.ptr(), self.sk.counters.ptr());
        let c7: [u64; 7] = std::array::from_fn(|i| bufs[i].ptr());
        let t1 = time_runs(
            self.sk.runs,
            || self.reset(),
            || {
                let a = (c7, rows, chunk_rows, q1_cutoff(), out, counters);
                // SAFETY: q1_hbm(q1_cols, uint64_t, uint32_t, int32_t, unsigned long long*,
                // unsigned long long*); q1_cols is 7 pointers; the buffers outlive the sync.
                unsafe { self.sk.launch_and_sync("q1_hbm", self.sk.blocks, &a) }
            },
        )?;
        let q1v = self.read_q1()?;
        let c4: [u64; 4] = std::array::from_fn(|i| ptr(Q6_COLUMNS[i]));
        let t6 = time_runs(
            self.sk.runs,
            || self.reset(),
            || {
                let a = (c4, rows, chunk_rows, q6_params(), out);
                // SAFETY: q6_hbm(q6_cols, uint64_t, uint32_t, q6_params, unsigned long long*);
                // q6_cols is 4 pointers, q6_params six 32-bit words.
                unsafe { self.sk.launch_and_sync("q6_hbm", self.sk.blocks, &a) }
            },
        )?;
        let q6v = self.read_q6()?;
        Ok(Timed {
            q1: t1,
            q6: t6,
            answers: Answers { q1: q1v, q6: q6v },
        })
    }

    /// Q1 and Q6 through their scans, `grid` blocks each.
    fn run_scan(&self, q1_scan: &Scan, q6_scan: &Scan, grid: u32) -> Result<Timed> {
        let (out, counters) = (self.out.ptr(), self.sk.counters.ptr());
        let scan_q1 = time_runs(
            self.sk.runs,
            || self.reset(),
            || {
                let a = (q1_scan.view(), q1_cutoff(), out, counters, counters + 8);
                // SAFETY: q1_scan(bam_scan_view, int32_t, unsigned long long*, unsigned long
                // long*, unsigned long long*); everything outlives the synchronisation.
                unsafe { self.sk.launch_and_sync("q1_scan", grid, &a) }?;
                q1_scan.check_errors()?;
                Ok(())
            },
        )?;
        let got_q1 = self.read_q1()?;
        let scan_q6 = time_runs(
            self.sk.runs,
            || self.reset(),
            || {
                let a = (q6_scan.view(), q6_params(), out, counters + 8);
                // SAFETY: q6_scan(bam_scan_view, q6_params, unsigned long long*, unsigned long
                // long*); everything outlives the synchronisation.
                unsafe { self.sk.launch_and_sync("q6_scan", grid, &a) }?;
                q6_scan.check_errors()?;
                Ok(())
            },
        )?;
        Ok(Timed {
            q1: scan_q1,
            q6: scan_q6,
            answers: Answers {
                q1: got_q1,
                q6: self.read_q6()?,
            },
        })
    }
}

/// What the run measured, for the printout and the JSON report.
struct Measured {
    rows: u64,
    q1_bytes: u64,
    q6_bytes: u64,
    gen_s: f64,
    cpu_s: f64,
    load_s: f64,
    zc_times: Vec<f64>,
    /// Zero-copy read rate in bytes per second.
    zc_rate: f64,
    hbm: Timed,
    scan: Timed,
    /// Blocks of the scans.
    grid: u32,
    /// Where the columns were read from.
    source: String,
}

/// Prints the scans' times against the zero-copy read and HBM, and their answers.
fn print_scan(m: &Measured, scan_ok: bool) {
    let (b1, b6) = (best(&m.scan.q1), best(&m.scan.q6));
    let (zc1, zc6) = (m.q1_bytes as f64 / m.zc_rate, m.q6_bytes as f64 / m.zc_rate);
    let from = &m.source;
    println!(
        "Q1 from {from}: best {b1:.4} s = {:.2}x the zero-copy time of its {:.2} GB, {:.2}x HBM",
        b1 / zc1,
        m.q1_bytes as f64 / 1e9,
        b1 / best(&m.hbm.q1)
    );
    println!(
        "Q6 from {from}: best {b6:.4} s = {:.2}x the zero-copy time of its {:.2} GB, {:.2}x HBM",
        b6 / zc6,
        m.q6_bytes as f64 / 1e9,
        b6 / best(&m.hbm.q6)
    );
    let got = &m.scan.answers;
    println!(
        "Q6 revenue {}; answers {}",
        format_scaled(got.q6, 4),
        verdict(scan_ok)
    );
    for r in &got.q1 {
        println!(
            "  {} {} count {} sum_qty {} sum_charge {}",
            r.returnflag,
            r.linestatus,
            r.count,
            r.sum_qty,
            format_scaled(r.sum_charge, 6)
        );
    }
}

/// The JSON report of the run.
fn report(
    args: &Args,
    info: &RunInfo,
    m: &Measured,
    answers: Value,
    scan_ok: bool,
    hbm_ok: bool,
) -> Value {
    let (b1, b6) = (best(&m.scan.q1), best(&m.scan.q6));
    let (zc1, zc6) = (m.q1_bytes as f64 / m.zc_rate, m.q6_bytes as f64 / m.zc_rate);
    let (scan_q1, scan_q6, hbm_q1, hbm_q6) = (&m.scan.q1, &m.scan.q6, &m.hbm.q1, &m.hbm.q6);
    json!({
        "example": "tpch-scan",
        "run": info,
        "sf": args.sf, "rows": m.rows,
        "config": { "chunk_rows": args.chunk_rows, "depth": args.scan.depth, "threads": args.scan.threads, "blocks": m.grid,
                    "ssds": args.scan.ssds, "sim_sms": args.scan.sim_sms, "media": "host", "drive": "ideal",
                    "device": m.source },
        "generate_s": m.gen_s, "cpu_reference_s": m.cpu_s, "load_s": m.load_s,
        "zero_copy": { "runs_s": m.zc_times, "gb_s": m.zc_rate / 1e9 },
        "q1": { "bytes": m.q1_bytes, "scan_runs_s": scan_q1, "scan_best_s": b1, "hbm_runs_s": hbm_q1, "hbm_best_s": best(hbm_q1),
                "zero_copy_s": zc1, "x_zero_copy": b1 / zc1 },
        "q6": { "bytes": m.q6_bytes, "scan_runs_s": scan_q6, "scan_best_s": b6, "hbm_runs_s": hbm_q6, "hbm_best_s": best(hbm_q6),
                "zero_copy_s": zc6, "x_zero_copy": b6 / zc6 },
        "match": { "scan": scan_ok, "hbm": hbm_ok },
        "answers": answers,
    })
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "match the CPU reference"
    } else {
        "DIFFER from the CPU reference"
    }
}

/// Sums the blocks' partial Q1 sums (128-bit) into the rows of the non-empty groups.
fn q1_rows(v: &[u64]) -> Vec<Q1Row> {
    let mut sums = [[0u128; Q1_FIELDS]; Q1_GROUPS];
    for block in v.chunks_exact(Q1_GROUPS * Q1_FIELDS) {
        for (g, row) in sums.iter_mut().enumerate() {
            for (f, x) in row.iter_mut().enumerate() {
                *x += block[g * Q1_FIELDS + f] as u128;
            }
        }
    }
    tpch_scan::q1_rows(&sums)
}
