//! Users' loads: data put on storage the documented way and read back, at the sizes
//! users have, as a program written from the README would do it:
//!
//! * **load**: a storage from a device string, one cache holding every line, arrays
//!   placed one after the other, `Array::load` of host data, `Cache::flush`, then
//!   `Array::invalidate` (the lines leave the cache) and `Array::read`, which reads them
//!   from the SSDs again, compared element by element;
//! * **stores**: GPU threads store every element through `bam::array` into a cache a
//!   quarter of the data's size (dirty lines written back when they are evicted), then
//!   flush, invalidate and read back as above.
//!
//! [`stress`] runs a matrix of these over media, queues, depths, SSD counts, line sizes
//! and layouts and prints a table of runs and failures (`bam-cache-tests --stress`).
//! On a queue protocol violation the report carries what the queue held
//! ([`bam::io::QueueSnapshot`]).

use crate::cache_kernels::protocol_config;
use bam::cache::{Cache, CacheConfig, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::error::{Error, IoErrorKind};
use bam::io::IoConfig;
use bam::storage::GpuDevice;
use bam::Storage;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a run does with the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `Array::load` + `Cache::flush`, cache holding every line.
    Load,
    /// GPU stores through a cache of a quarter of the lines (write-back at eviction).
    Stores,
}

/// One configuration of a users' load.
#[derive(Clone, Debug)]
pub struct BulkCase {
    /// Backend and media: `sim:ideal,ssds=8,media=host` and the like (capacity is added
    /// when the string has none).
    pub device: String,
    /// Queue pairs per SSD.
    pub queues: u32,
    /// Entries per queue.
    pub depth: u32,
    /// Cache line (and I/O slot) bytes.
    pub line: u32,
    /// Bytes of each array.
    pub bytes: u64,
    /// Arrays, placed one after the other.
    pub arrays: u32,
    /// Their layout.
    pub layout: Layout,
    /// What the run does.
    pub mode: Mode,
    /// Bound of every GPU-side wait.
    pub timeout: Duration,
}

impl BulkCase {
    /// The scenario: `sim:ideal,ssds=8,media=host`, 32 queues per SSD of 1024
    /// entries, 4 KiB lines, two striped arrays of `bytes` each, loaded and flushed.
    pub fn scenario(bytes: u64) -> Self {
        BulkCase {
            device: "sim:ideal,ssds=8,media=host".into(),
            queues: 32,
            depth: 1024,
            line: 4096,
            bytes,
            arrays: 2,
            layout: Layout::Stripe,
            mode: Mode::Load,
            timeout: Duration::from_secs(2),
        }
    }

    /// A short label for tables.
    pub fn label(&self) -> String {
        format!(
            "{} q{} d{} line {} {}x{} {:?} {:?}",
            self.device,
            self.queues,
            self.depth,
            size(self.line as u64),
            self.arrays,
            size(self.bytes),
            self.layout,
            self.mode
        )
    }
}

/// Bytes as 512, 4K, 64K, 134M, 1.07G.
pub fn size(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2}G", b as f64 / 1e9),
        b if b >= 1 << 20 => format!("{}M", b / 1_000_000),
        b if b >= 1 << 10 => format!("{}K", b / 1024),
        b => b.to_string(),
    }
}

/// What one run found.
#[derive(Debug)]
pub struct BulkOutcome {
    /// Elements compared and found wrong (0 when the run failed before comparing).
    pub checked: u64,
    /// Wrong values read back as success.
    pub wrong: u64,
    /// The first error, with the queue snapshot of a protocol violation appended.
    pub error: Option<String>,
    /// Wall time of the run.
    pub seconds: f64,
}

/// Element `i` of array `a` in run `seed`: the value loaded, stored and expected back.
pub fn value(seed: u64, a: u32, i: u64) -> u32 {
    let mut x = i
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(seed ^ ((a as u64) << 48));
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    x as u32
}

/// Runs `case` once with data of run `seed`.
pub fn run(gpu: &Arc<Gpu>, case: &BulkCase, seed: u64) -> BulkOutcome {
    let t0 = Instant::now();
    let mut out = BulkOutcome {
        checked: 0,
        wrong: 0,
        error: None,
        seconds: 0.0,
    };
    if let Err(e) = run_inner(gpu, case, seed, &mut out) {
        out.error = Some(e);
    }
    out.seconds = t0.elapsed().as_secs_f64();
    out
}

fn run_inner(
    gpu: &Arc<Gpu>,
    case: &BulkCase,
    seed: u64,
    out: &mut BulkOutcome,
) -> std::result::Result<(), String> {
    let mut device: GpuDevice = with_capacity(case)
        .and_then(|d| d.parse())
        .map_err(|e: Error| format!("device: {e}"))?;
    device.set_fill_pattern(false);
    let line = case.line as u64;
    let lines_per_array = case.bytes.div_ceil(line);
    let total_lines = lines_per_array * case.arrays as u64;
    let cache_lines = match case.mode {
        Mode::Load => total_lines,
        Mode::Stores => (total_lines / 4).max(1024),
    } as u32;
    let shape = IoConfig {
        queues: case.queues,
        depth: case.depth,
        slot_bytes: line,
        nslots: cache_lines,
        timeout: case.timeout,
        ..IoConfig::new()
    };
    // The test kernels load before any storage starts (bam::Module).
    crate::kernels(gpu).map_err(|e| format!("kernels: {e}"))?;
    let storage = device.open(gpu, &shape).map_err(|e| format!("open: {e}"))?;
    let io = storage.io();
    let cfg = CacheConfig {
        readahead: 8,
        ..protocol_config(case.line, cache_lines)
    };
    let cache = Cache::new(io, cfg).map_err(|e| format!("cache: {e}"))?;
    let ssds = io.geometry().ssds as u64;
    let lba = io.geometry().lba_size as u64;
    let elems = case.bytes / 4;
    // Arrays one after the other: the stripe formula of Layout's rustdoc.
    let per_ssd_lines = match case.layout {
        Layout::Stripe => lines_per_array.div_ceil(ssds),
        Layout::Replicate => lines_per_array,
    };
    let mut arrays = Vec::new();
    for a in 0..case.arrays as u64 {
        let start = a * per_ssd_lines * line / lba;
        arrays.push(
            cache
                .array::<u32>(elems, start, case.layout)
                .map_err(|e| format!("array {a}: {e}"))?,
        );
    }
    let fail = |what: &str, e: Error| explain(storage.as_ref(), what, e);
    match case.mode {
        Mode::Load => {
            let mut data = vec![0u32; elems as usize];
            for (a, arr) in arrays.iter().enumerate() {
                fill(&mut data, seed, a as u32);
                arr.load(&data, 0).map_err(|e| fail("load", e))?;
            }
            cache.flush().map_err(|e| fail("flush", e))?;
        }
        Mode::Stores => {
            let res = DeviceBuffer::zeroed(gpu, 8).map_err(|e| e.to_string())?;
            let grid = gpu.sms * 8;
            for (a, arr) in arrays.iter().enumerate() {
                let args: (bam::cache::ArrayView, u64, u64) =
                    (arr.view(), seed ^ ((a as u64) << 48), res.ptr());
                // SAFETY: matches bam_bulk_store_u32(bam_array_view, uint64_t, unsigned
                // long long*); `res` outlives cache.sync().
                unsafe {
                    crate::kernels(gpu)
                        .and_then(|m| {
                            m.launch(cache.stream(), "bam_bulk_store_u32", grid, 256, 0, &args)
                        })
                        .map_err(|e| format!("launch: {e}"))?
                };
                cache.sync().map_err(|e| fail("stores", e))?;
                let mut failed = [0u64];
                res.read(0, &mut failed).map_err(|e| e.to_string())?;
                if failed[0] != 0 {
                    let e = cache.check_errors().err();
                    return Err(format!(
                        "{} store(s) failed{}",
                        failed[0],
                        e.map(|e| format!(": {}", explain(storage.as_ref(), "stores", e)))
                            .unwrap_or_default()
                    ));
                }
            }
            cache.flush().map_err(|e| fail("flush", e))?;
        }
    }
    // Read back from the SSDs: the lines leave the cache, then every element is read.
    let mut back = vec![0u32; elems as usize];
    for (a, arr) in arrays.iter().enumerate() {
        arr.invalidate().map_err(|e| fail("invalidate", e))?;
        arr.read(0, &mut back).map_err(|e| fail("read back", e))?;
        cache.check_errors().map_err(|e| fail("read back", e))?;
        let (wrong, first) = compare(&back, seed, a as u32);
        out.wrong += wrong;
        out.checked += elems;
        if let Some(i) = first {
            return Err(format!(
                "array {a}: {} of {elems} elements wrong, the first at {i}: {:#x}, expected {:#x}",
                out.wrong,
                back[i],
                value(seed, a as u32, i as u64)
            ));
        }
    }
    drop(arrays);
    cache.close().map_err(|e| fail("close", e))?;
    Ok(())
}

/// The case's device string, with a capacity that holds its arrays when it names none.
fn with_capacity(case: &BulkCase) -> std::result::Result<String, Error> {
    if case.device.contains("capacity=") || !case.device.starts_with("sim") {
        return Ok(case.device.clone());
    }
    // The SSD count as the device grammar reads it (one owner of the grammar).
    let ssds = case.device.parse::<GpuDevice>()?.ssds().max(1) as u64;
    let line = case.line as u64;
    let lines = case.bytes.div_ceil(line) * case.arrays as u64;
    let per_ssd = match case.layout {
        Layout::Stripe => lines.div_ceil(ssds) + case.arrays as u64,
        Layout::Replicate => lines,
    } * line;
    let cap = (per_ssd + per_ssd / 4).next_power_of_two().max(64 << 20);
    Ok(format!("{},capacity={}M", case.device, cap >> 20))
}

/// The CPU threads that fill and check the data (GBs per run).
fn workers() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get().min(16))
}

fn fill(data: &mut [u32], seed: u64, a: u32) {
    let chunk = data.len().div_ceil(workers()).max(1);
    std::thread::scope(|sc| {
        for (k, part) in data.chunks_mut(chunk).enumerate() {
            sc.spawn(move || {
                for (i, x) in part.iter_mut().enumerate() {
                    *x = value(seed, a, (k * chunk + i) as u64);
                }
            });
        }
    });
}

/// Elements of `back` that differ from array `a`'s data, and the first of them.
fn compare(back: &[u32], seed: u64, a: u32) -> (u64, Option<usize>) {
    let chunk = back.len().div_ceil(workers()).max(1);
    std::thread::scope(|sc| {
        let parts: Vec<_> = back
            .chunks(chunk)
            .enumerate()
            .map(|(k, part)| {
                sc.spawn(move || {
                    let mut wrong = 0u64;
                    let mut first = None;
                    for (i, &x) in part.iter().enumerate() {
                        let j = k * chunk + i;
                        if x != value(seed, a, j as u64) {
                            wrong += 1;
                            first.get_or_insert(j);
                        }
                    }
                    (wrong, first)
                })
            })
            .collect();
        parts
            .into_iter()
            .map(|h| h.join().unwrap_or((u64::MAX, None)))
            .fold((0u64, None), |(w, f), (w2, f2)| {
                (w.saturating_add(w2), f.or(f2))
            })
    })
}

/// An error of `what`, with the queue snapshot of every protocol violation it reports.
fn explain(storage: &dyn Storage, what: &str, e: Error) -> String {
    let mut s = format!("{what}: {e}");
    let errors = match &e {
        Error::Io { errors, .. } | Error::WriteBack { errors, .. } => errors.clone(),
        _ => Vec::new(),
    };
    let io = storage.io();
    for x in errors
        .iter()
        .filter(|x| matches!(x.kind, IoErrorKind::Protocol))
        .take(4)
    {
        let _ = write!(s, "\n  {x}");
        if let Some(qp) = io.queue_pair_index(x.ssd, x.qid) {
            if let Ok(snap) = io.queue_snapshot(qp) {
                for l in snap.describe(x.cid as usize, x.detail).lines() {
                    let _ = write!(s, "\n    {l}");
                }
            }
        }
    }
    s
}

/// The stress matrix: every combination of media, queues per SSD, depth, SSDs, line
/// size and layout, loads and GPU stores, `runs` times each, at `bytes` per array.
pub fn matrix(bytes: u64) -> Vec<BulkCase> {
    let mut v = Vec::new();
    for media in ["hbm", "host"] {
        for ssds in [1u32, 8] {
            for queues in [1u32, 8, 32, 64] {
                for depth in [64u32, 1024] {
                    for line in [512u32, 4096, 65536] {
                        for layout in [Layout::Stripe, Layout::Replicate] {
                            if ssds == 1 && layout == Layout::Replicate {
                                continue; // one SSD: the same placement as Stripe
                            }
                            for mode in [Mode::Load, Mode::Stores] {
                                v.push(BulkCase {
                                    device: format!("sim:ideal,ssds={ssds},media={media}"),
                                    queues,
                                    depth,
                                    line,
                                    bytes,
                                    arrays: 1,
                                    layout,
                                    mode,
                                    timeout: Duration::from_secs(2),
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    v
}

/// One row of the stress table (and of its JSON report).
#[derive(serde::Serialize)]
pub struct StressRow {
    /// The case's label.
    pub case: String,
    /// Runs.
    pub runs: u32,
    /// Runs that failed (an error, or wrong values).
    pub failed: u32,
    /// Wrong values read back as success, over all runs.
    pub wrong: u64,
    /// Elements verified, over all runs.
    pub verified: u64,
    /// Wall time of all runs.
    pub seconds: f64,
    /// The first failure's text.
    pub first_failure: Option<String>,
}

/// Runs `cases` `runs` times each, printing a line per run and a table at the end, and
/// writing the rows as JSON to `json` (rewritten after every case, so that a run cut
/// short keeps what it did); returns the number of failed runs.
pub fn stress(
    gpu: &Arc<Gpu>,
    cases: &[BulkCase],
    runs: u32,
    seed0: u64,
    json: Option<&std::path::Path>,
) -> u64 {
    let mut failed = 0u64;
    let mut wrong = 0u64;
    let mut total = 0u64;
    let mut rows: Vec<StressRow> = Vec::new();
    let t0 = Instant::now();
    for (k, c) in cases.iter().enumerate() {
        let mut row = StressRow {
            case: c.label(),
            runs,
            failed: 0,
            wrong: 0,
            verified: 0,
            seconds: 0.0,
            first_failure: None,
        };
        for r in 0..runs {
            let seed = seed0 ^ ((k as u64) << 20) ^ r as u64;
            let o = run(gpu, c, seed);
            total += 1;
            row.seconds += o.seconds;
            row.wrong += o.wrong;
            row.verified += o.checked;
            wrong += o.wrong;
            match &o.error {
                None => println!(
                    "PASS stress {} run {r} ({:.2} s): {} elements verified",
                    row.case, o.seconds, o.checked
                ),
                Some(e) => {
                    row.failed += 1;
                    row.first_failure.get_or_insert_with(|| e.clone());
                    println!("FAIL stress {} run {r} ({:.2} s): {e}", row.case, o.seconds);
                }
            }
        }
        failed += row.failed as u64;
        rows.push(row);
        if let Some(p) = json {
            let written = serde_json::to_vec_pretty(&rows)
                .map_err(std::io::Error::other)
                .and_then(|b| std::fs::write(p, b));
            if let Err(e) = written {
                eprintln!("stress: writing {}: {e}", p.display());
            }
        }
    }
    println!(
        "\n{:<70} {:>5} {:>7} {:>9}",
        "case", "runs", "failed", "seconds"
    );
    for r in &rows {
        println!(
            "{:<70} {:>5} {:>7} {:>9.2}",
            r.case, r.runs, r.failed, r.seconds
        );
    }
    println!(
        "stress: {total} runs, {failed} failed, {wrong} wrong values read as success, {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    failed
}
