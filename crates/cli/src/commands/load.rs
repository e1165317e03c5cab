//! `bam load`: write a dataset file to the device, in parallel, and optionally verify it.
//!
//! N worker threads (`--queues`) each own an I/O queue pair and take 4 MiB chunks of the
//! file in order from a shared counter: read the chunk with `pread`, write it with a
//! pipelined `write_from`. `--verify` then reads every chunk back the same way and
//! compares; the lowest mismatching LBA is reported.

use super::{DeviceArgs, NamespaceArgs, CHUNK_BYTES};
use crate::device::{self, OpenDevice};
use crate::error::{CliError, CliResult, NvmeContext};
use crate::interrupt;
use crate::output::{print, print_json, Global};
use crate::units::{decimal_bytes, gb_per_s};
use bam_nvme::{Controller, IoQueuePair, Namespace};
use clap::{value_parser, Args};
use indicatif::ProgressBar;
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Most worker threads used when `--queues` is not given.
const DEFAULT_MAX_QUEUES: usize = 8;

/// Arguments of `bam load`.
#[derive(Args, Debug)]
#[command(after_help = "\
The file goes to consecutive logical blocks from --lba on; a last partial block is
padded with zeros. Nothing is written when the file does not fit. Throughput is in
decimal GB/s (10^9 bytes per second). The progress bar is shown on stderr when it is a
terminal, and never with --json or --quiet.

Examples:
  bam load dataset.bin                                  into ./bam-model.img (existing)
  bam load dataset.bin --device model:big.img,size=64G --verify
  bam load dataset.bin --device vfio:0000:01:00.0 --lba 2048 --queues 8 --qdepth 256
  bam load edges.bin --device model:big.img --name edges --elem-bytes 4

With --name the file becomes a named dataset: it goes to the first free blocks after the
device's other datasets (unless --lba says where) and is recorded in the dataset catalog
at the end of the namespace (its last 1 MiB), which `bam info` lists and a GPU program
opens by name (Cache::open::<u32>(\"edges\") over the same medium, e.g. hostctl with
media=big.img).")]
pub struct LoadArgs {
    /// The file to write to the device
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub ns: NamespaceArgs,
    /// First logical block to write the file at (`--offset`, its old name, still works)
    /// [default: 0; with --name the first free blocks after the datasets]
    #[arg(long, value_name = "LBA", alias = "offset")]
    pub lba: Option<u64>,
    /// Record the file as the named dataset NAME in the device's catalog
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Bytes per element of the dataset (what Cache::open::<T> checks T against)
    #[arg(long, value_name = "N", default_value_t = 1, requires = "name",
          value_parser = value_parser!(u32).range(1..=4096))]
    pub elem_bytes: u32,
    /// Read the data back and compare it with the file
    #[arg(long)]
    pub verify: bool,
    /// Worker threads, each with its own I/O queue pair [default: CPUs, at most 8]
    #[arg(long, value_name = "N", value_parser = value_parser!(u16).range(1..=4096))]
    pub queues: Option<u16>,
    /// Entries per I/O queue
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = value_parser!(u32).range(2..=65536))]
    pub qdepth: u32,
}

/// The output of `bam load --json`.
#[derive(Serialize, Debug)]
pub struct LoadResult {
    pub device: String,
    pub file: String,
    pub nsid: u32,
    /// First LBA written.
    pub lba: u64,
    pub blocks: u64,
    pub block_size: u32,
    /// Bytes of the file.
    pub bytes: u64,
    /// Zero bytes added to fill the last block.
    pub padded_bytes: u64,
    pub queues: usize,
    pub qdepth: u32,
    /// Seconds to write, including the final flush.
    pub seconds: f64,
    /// Write throughput in decimal GB/s over `seconds` (the final flush included).
    pub gb_per_s: f64,
    /// Seconds of the final flush (part of `seconds`): the device (or the model's image
    /// file) making the data durable.
    pub flush_seconds: f64,
    /// Throughput in decimal GB/s until the last write completed, before the flush (what
    /// the progress bar shows).
    pub data_gb_per_s: f64,
    pub verified: bool,
    /// The dataset name recorded in the catalog, with `--name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// Seconds to read back and compare, with `--verify`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_seconds: Option<f64>,
    /// Read-back throughput in decimal GB/s, with `--verify`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_gb_per_s: Option<f64>,
}

/// What the workers share.
struct Job<'a> {
    file: &'a File,
    path: &'a str,
    len: u64,
    ns: &'a Namespace,
    offset: u64,
    device: &'a str,
    next: AtomicU64,
    stop: AtomicBool,
    bar: ProgressBar,
    /// Lowest mismatching byte of the file found so far (verify).
    first_bad: AtomicU64,
    /// Chunks completed (written, or read back and compared).
    finished: Vec<AtomicBool>,
}

impl Job<'_> {
    fn chunks(&self) -> u64 {
        self.len.div_ceil(CHUNK_BYTES as u64)
    }

    /// Takes the next chunk: its byte position and length.
    fn take(&self) -> Option<(u64, usize)> {
        if self.stop.load(Ordering::Relaxed) || interrupt::requested() {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        if i >= self.chunks() {
            return None;
        }
        let pos = i * CHUNK_BYTES as u64;
        Some((pos, (self.len - pos).min(CHUNK_BYTES as u64) as usize))
    }

    /// Reads the chunk at `pos` from the file into `buf`, zero-padded to whole blocks;
    /// returns the padded length.
    fn read_chunk(&self, pos: u64, n: usize, buf: &mut [u8]) -> CliResult<usize> {
        self.file
            .read_exact_at(&mut buf[..n], pos)
            .map_err(|e| CliError::file("cannot read the input", self.path, &e))?;
        let bs = self.ns.block_size as usize;
        let rounded = n.div_ceil(bs) * bs;
        buf[n..rounded].fill(0);
        Ok(rounded)
    }

    /// Marks the chunk at `pos` done.
    fn finish(&self, pos: u64, n: usize) {
        if let Some(f) = self.finished.get((pos / CHUNK_BYTES as u64) as usize) {
            f.store(true, Ordering::Relaxed);
        }
        self.bar.inc(n as u64);
    }

    /// Bytes of the file from its start that are done without a gap, and bytes done in all.
    fn progress(&self) -> (u64, u64) {
        let chunk_len =
            |i: usize| (self.len - i as u64 * CHUNK_BYTES as u64).min(CHUNK_BYTES as u64);
        let prefix = self
            .finished
            .iter()
            .take_while(|f| f.load(Ordering::Relaxed))
            .count();
        let prefix_bytes = (0..prefix).map(chunk_len).sum();
        let all = (0..self.finished.len())
            .filter(|&i| self.finished[i].load(Ordering::Relaxed))
            .map(chunk_len)
            .sum();
        (prefix_bytes, all)
    }

    /// Starts another pass over the file (the read-back).
    fn restart(&mut self, bar: ProgressBar) {
        self.next = AtomicU64::new(0);
        self.bar = bar;
        for f in &self.finished {
            f.store(false, Ordering::Relaxed);
        }
    }

    fn lba_of(&self, pos: u64) -> u64 {
        self.offset + pos / self.ns.block_size as u64
    }

    fn fail<T>(&self, e: CliError) -> CliResult<T> {
        self.stop.store(true, Ordering::Relaxed);
        Err(e)
    }

    fn write_worker(&self, qp: &mut IoQueuePair) -> CliResult<()> {
        let mut buf = vec![0u8; CHUNK_BYTES];
        while let Some((pos, n)) = self.take() {
            let len = match self.read_chunk(pos, n, &mut buf) {
                Ok(l) => l,
                Err(e) => return self.fail(e),
            };
            if let Err(e) = qp
                .write_from(self.ns, self.lba_of(pos), &buf[..len])
                .during("load failed", self.device)
            {
                return self.fail(e);
            }
            self.finish(pos, n);
        }
        Ok(())
    }

    fn verify_worker(&self, qp: &mut IoQueuePair) -> CliResult<()> {
        let mut want = vec![0u8; CHUNK_BYTES];
        let mut have = vec![0u8; CHUNK_BYTES];
        while let Some((pos, n)) = self.take() {
            if pos > self.first_bad.load(Ordering::Relaxed) {
                continue; // a lower mismatch is already known
            }
            let len = match self.read_chunk(pos, n, &mut want) {
                Ok(l) => l,
                Err(e) => return self.fail(e),
            };
            if let Err(e) = qp
                .read_into(self.ns, self.lba_of(pos), &mut have[..len])
                .during("verification failed", self.device)
            {
                return self.fail(e);
            }
            if want[..len] != have[..len] {
                let j = want[..len]
                    .iter()
                    .zip(&have[..len])
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                self.first_bad.fetch_min(pos + j as u64, Ordering::Relaxed);
            }
            self.finish(pos, n);
        }
        Ok(())
    }
}

/// Runs `work` on every queue pair, each in its own thread; the first error wins.
fn run_parallel(
    qps: &mut [IoQueuePair],
    work: impl Fn(&mut IoQueuePair) -> CliResult<()> + Sync,
) -> CliResult<()> {
    let work = &work;
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = qps.iter_mut().map(|qp| s.spawn(move || work(qp))).collect();
        // Every handle is joined here, so a panicking worker surfaces as an error and
        // the scope itself does not panic.
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(
                        CliError::new("internal error", "a load worker thread panicked")
                            .hint("rerun with -vv and report it"),
                    )
                })
            })
            .collect::<Vec<_>>()
    });
    results.into_iter().collect()
}

/// Runs `bam load`.
pub fn run(args: &LoadArgs, g: &Global) -> CliResult<()> {
    let name = args.device.device.as_str();
    let path = args.file.display().to_string();
    let what = format!("cannot load {path}");
    // Parse the device string first: a malformed one is a usage error whatever the file.
    device::parse(name)?;
    if std::env::args().any(|a| a == "--offset" || a.starts_with("--offset=")) {
        g.note("--offset is deprecated: it is --lba now (a block number, not bytes)");
    }
    let (file, len) = open_file(&args.file, &path, &what)?;

    let want_queues = requested_queues(args);
    let OpenDevice { ctrl, .. } = device::open(name, want_queues.min(65534) as u16)?;
    let ns = ctrl.namespace(args.ns.nsid).during(&what, name)?;
    let bs = ns.block_size as u64;
    let blocks = len.div_ceil(bs);
    let mut qps = create_queue_pairs(&ctrl, want_queues, args.qdepth, g, &what, name)?;
    let queues = qps.len();
    // A named dataset: where it goes, and the catalog it joins (read before any write).
    let dataset = match &args.name {
        Some(n) => Some(place_dataset(args, n, &ns, &mut qps[0], len, &what, name)?),
        None => None,
    };
    let lba = dataset
        .as_ref()
        .map(|(d, _)| d.start_lba)
        .unwrap_or(args.lba.unwrap_or(0));
    check_fits(&ns, lba, len, &what, name)?;

    let mut job = Job {
        file: &file,
        path: &path,
        len,
        ns: &ns,
        offset: lba,
        device: name,
        next: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        bar: g.progress(len, "writing"),
        first_bad: AtomicU64::new(u64::MAX),
        finished: (0..len.div_ceil(CHUNK_BYTES as u64))
            .map(|_| AtomicBool::new(false))
            .collect(),
    };
    tracing::debug!(queues, qdepth = args.qdepth, len, "loading");
    let times = write_pass(&job, &mut qps)?;
    let verify_seconds = if args.verify {
        Some(verify_pass(&mut job, &mut qps, g)?)
    } else {
        None
    };
    if let Some((d, mut sets)) = dataset {
        sets.push(d);
        super::catalog::write(&mut qps[0], &ns, &sets, name)?;
    }
    drop(qps);

    let r = LoadResult {
        device: name.to_string(),
        file: path.clone(),
        nsid: ns.nsid,
        lba,
        blocks,
        block_size: ns.block_size,
        bytes: len,
        padded_bytes: blocks * bs - len,
        queues,
        qdepth: args.qdepth,
        seconds: times.total,
        gb_per_s: gb_per_s(len, times.total),
        flush_seconds: times.flush,
        data_gb_per_s: gb_per_s(len, times.data),
        verified: args.verify,
        dataset: args.name.clone(),
        verify_seconds,
        verify_gb_per_s: verify_seconds.map(|s| gb_per_s(len, s)),
    };
    if g.json {
        print_json(&r);
    } else {
        print(&summary(&r));
    }
    Ok(())
}

/// Opens the file to load: a regular file with data; returns it and its length.
fn open_file(file: &Path, path: &str, what: &str) -> CliResult<(File, u64)> {
    let file = File::open(file).map_err(|e| CliError::file(what, path, &e))?;
    let meta = file
        .metadata()
        .map_err(|e| CliError::file(what, path, &e))?;
    if !meta.is_file() {
        return Err(
            CliError::new(what, format!("{path} is not a regular file")).hint(
                "load needs a file whose size is known; for a stream use `bam write --input -`",
            ),
        );
    }
    let len = meta.len();
    if len == 0 {
        return Err(CliError::new(what, format!("{path} is empty")).hint("give a file with data"));
    }
    Ok((file, len))
}

/// The worker threads asked for: `--queues`, or the CPUs up to [`DEFAULT_MAX_QUEUES`].
fn requested_queues(args: &LoadArgs) -> usize {
    args.queues.map(usize::from).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(DEFAULT_MAX_QUEUES)
    })
}

/// Refuses a file of `len` bytes that does not fit in the namespace from `lba` on.
/// Where the named dataset `dname` goes and what it is (recorded after the data is
/// written), with the catalog's other datasets. Refuses a name that exists, a file that
/// is not whole elements, a namespace too small for a catalog, an `--lba` over another
/// dataset or the catalog, and a file with no room left.
fn place_dataset(
    args: &LoadArgs,
    dname: &str,
    ns: &Namespace,
    qp: &mut IoQueuePair,
    len: u64,
    what: &str,
    device: &str,
) -> CliResult<(bam_nvme::catalog::Dataset, Vec<bam_nvme::catalog::Dataset>)> {
    use bam_nvme::catalog::{check_name, first_free, taken, Dataset};
    check_name(dname).map_err(|m| CliError::usage(what, m))?;
    let eb = args.elem_bytes as u64;
    if len == 0 || !len.is_multiple_of(eb) {
        return Err(CliError::usage(
            what,
            format!("the file's {len} bytes are not a whole number of {eb}-byte elements"),
        ));
    }
    let region = super::catalog::catalog_region_or_err(ns, what, device)?;
    let sets = super::catalog::read(qp, ns, device)?.unwrap_or_default();
    if sets.iter().any(|d| d.name == dname) {
        return Err(
            CliError::new(what, format!("a dataset named {dname:?} exists"))
                .on(device)
                .hint("choose another --name (`bam info` lists the datasets)"),
        );
    }
    let bs = ns.block_size as u64;
    // Whole 4 KiB units (a GPU cache line's usual size), so that GPU arrays placed beside
    // it start on a line.
    let unit = (4096 / bs).max(1);
    let extent = len.div_ceil(bs).div_ceil(unit) * unit;
    let taken = taken(&sets, region);
    let start = match args.lba {
        Some(at) => {
            if let Some((s, e)) = taken.iter().find(|(s, e)| at < s + e && *s < at + extent) {
                return Err(CliError::new(
                    what,
                    format!(
                        "LBAs {at}..{} overlap LBAs {s}..{} of another dataset or of the catalog",
                        at + extent,
                        s + e
                    ),
                )
                .on(device)
                .hint("leave --lba out: --name places the file after the other datasets"));
            }
            at
        }
        None => first_free(&taken, extent, unit, ns.blocks).ok_or_else(|| {
            CliError::new(
                what,
                format!("no room for {extent} blocks beside the datasets and the catalog"),
            )
            .on(device)
            .hint("nothing was written; `bam info` lists the datasets")
        })?,
    };
    let d = Dataset {
        name: dname.to_string(),
        elem_size: args.elem_bytes,
        len: len / eb,
        start_lba: start,
        extent,
        line_bytes: 0,
        ssds: 1,
    };
    Ok((d, sets))
}

fn check_fits(ns: &Namespace, lba: u64, len: u64, what: &str, name: &str) -> CliResult<()> {
    let bs = ns.block_size as u64;
    let blocks = len.div_ceil(bs);
    if lba.checked_add(blocks).is_none_or(|end| end > ns.blocks) {
        let room = ns.blocks.saturating_sub(lba);
        return Err(CliError::new(
            what,
            format!(
                "the file ({len} bytes = {blocks} blocks of {bs} bytes) does not fit at LBA {}: namespace {} has {} blocks ({} bytes), {room} of them from LBA {} on",
                lba, ns.nsid, ns.blocks, ns.bytes(), lba
            ),
        )
        .on(name)
        .hint("nothing was written; use a smaller --lba or a larger device (for a new model image: model:PATH,size=SIZE)"));
    }
    Ok(())
}

/// Creates the workers' queue pairs, as many as asked for and the controller grants
/// (saying so when it grants fewer), all before any data moves, so that a bad
/// `--qdepth` writes nothing.
fn create_queue_pairs(
    ctrl: &Controller,
    want_queues: usize,
    qdepth: u32,
    g: &Global,
    what: &str,
    name: &str,
) -> CliResult<Vec<IoQueuePair>> {
    let queues = want_queues.min(ctrl.io_queue_pairs() as usize).max(1);
    if queues < want_queues {
        g.note(&format!(
            "using {queues} queue pairs: the controller grants no more"
        ));
    }
    (0..queues)
        .map(|_| ctrl.create_io_queue_pair(qdepth))
        .collect::<bam_nvme::Result<Vec<_>>>()
        .during(what, name)
}

/// Seconds of the write pass.
struct WriteTimes {
    /// Until the last write completed.
    data: f64,
    /// Of the final flush.
    flush: f64,
    /// In all, the flush included.
    total: f64,
}

/// Writes the whole file with every queue pair and flushes it. Whatever stops the
/// writes, what was written is flushed; a Ctrl-C is reported after the flush with how
/// far the file got.
fn write_pass(job: &Job, qps: &mut [IoQueuePair]) -> CliResult<WriteTimes> {
    interrupt::catch();
    let start = Instant::now();
    let written = run_parallel(qps, |qp| job.write_worker(qp));
    job.bar.finish_and_clear();
    let data = start.elapsed().as_secs_f64();
    if let Err(e) = written {
        // What was written stays: flush it before saying what failed.
        let _ = qps[0].flush(job.ns);
        return Err(e);
    }
    let flush_start = Instant::now();
    qps[0].flush(job.ns).during("load failed", job.device)?;
    let flush = flush_start.elapsed().as_secs_f64();
    let total = start.elapsed().as_secs_f64();
    if interrupt::requested() {
        let (prefix, all) = job.progress();
        let prefix_blocks = prefix.div_ceil(job.ns.block_size as u64);
        return Err(CliError::interrupted(
            "load stopped at Ctrl-C",
            format!(
                "{all} of {} bytes of {} were written and flushed; the file's first {prefix} bytes are complete at LBA {}..{} ({prefix_blocks} blocks)",
                job.len,
                job.path,
                job.offset,
                job.offset + prefix_blocks
            ),
        )
        .on(job.device)
        .hint("run the same `bam load` again to write the whole file"));
    }
    Ok(WriteTimes { data, flush, total })
}

/// Reads the whole file back with every queue pair and compares it with the file;
/// returns the seconds it took. The lowest mismatch, or a Ctrl-C, is an error.
fn verify_pass(job: &mut Job, qps: &mut [IoQueuePair], g: &Global) -> CliResult<f64> {
    job.restart(g.progress(job.len, "verifying"));
    let start = Instant::now();
    let checked = run_parallel(qps, |qp| job.verify_worker(qp));
    job.bar.finish_and_clear();
    checked?;
    let bad = job.first_bad.load(Ordering::Relaxed);
    if bad != u64::MAX {
        let lba = job.lba_of(bad);
        return Err(CliError::new(
            "verification failed",
            format!(
                "LBA {lba} differs from {} (first differing byte: file offset {bad})",
                job.path
            ),
        )
        .on(job.device)
        .hint("the device returned other data than was written; check its health (`bam info`) and load again"));
    }
    if interrupt::requested() {
        let (prefix, _) = job.progress();
        let blocks = job.len.div_ceil(job.ns.block_size as u64);
        return Err(CliError::interrupted(
            "verification stopped at Ctrl-C",
            format!(
                "the whole file was written and flushed ({} bytes at LBA {}..{}); the first {prefix} bytes were read back and match",
                job.len,
                job.offset,
                job.offset + blocks
            ),
        )
        .on(job.device));
    }
    Ok(start.elapsed().as_secs_f64())
}

/// The text `bam load` prints without `--json`.
fn summary(r: &LoadResult) -> String {
    let LoadResult {
        device: name,
        bytes: len,
        blocks,
        block_size: bs,
        seconds,
        flush_seconds,
        queues,
        padded_bytes: padded,
        ..
    } = r;
    let mut s = format!(
        "loaded {} ({len} bytes) into {name}, namespace {}, LBA {}..{} ({blocks} blocks of {bs} bytes)\n\
         write: {seconds:.3} s, {:.3} GB/s (decimal), {queues} queue pair(s) of depth {}; \
         this includes the final flush ({flush_seconds:.3} s): {:.3} GB/s until the last write \
         completed, as the progress bar showed\n",
        decimal_bytes(*len),
        r.nsid,
        r.lba,
        r.lba + blocks,
        r.gb_per_s,
        r.qdepth,
        r.data_gb_per_s
    );
    if let Some(d) = &r.dataset {
        s += &format!("recorded as dataset {d:?} in the device's catalog (`bam info` lists it)\n");
    }
    if *padded > 0 {
        s += &format!("the last block was padded with {padded} zero bytes\n");
    }
    match (r.verify_seconds, r.verify_gb_per_s) {
        (Some(vs), Some(vr)) => {
            s += &format!("verified: yes ({vs:.3} s, {vr:.3} GB/s read back, all bytes match)\n")
        }
        _ => s += "verified: no (add --verify to read back and compare)\n",
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Global;

    #[test]
    fn verify_finds_the_lowest_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.bin");
        let len = CHUNK_BYTES * 2 + 1000;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();

        let dev = device::open("model:ram:16M", 4).unwrap();
        let ns = dev.ctrl.namespace(1).unwrap();
        let mut qps: Vec<_> = (0..3)
            .map(|_| dev.ctrl.create_io_queue_pair(16).unwrap())
            .collect();
        let g = Global {
            json: false,
            quiet: true,
        };
        let new_job = || Job {
            file: &file,
            path: "data.bin",
            len: len as u64,
            ns: &ns,
            offset: 8,
            device: "model:ram:16M",
            next: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            bar: g.progress(len as u64, "test"),
            first_bad: AtomicU64::new(u64::MAX),
            finished: (0..3).map(|_| AtomicBool::new(false)).collect(),
        };
        let job = new_job();
        run_parallel(&mut qps, |qp| job.write_worker(qp)).unwrap();
        let job = new_job();
        run_parallel(&mut qps, |qp| job.verify_worker(qp)).unwrap();
        assert_eq!(job.first_bad.load(Ordering::Relaxed), u64::MAX);

        // Corrupt two blocks in different chunks; the lower one is reported.
        let bad = [
            CHUNK_BYTES as u64 * 2 + 700,
            CHUNK_BYTES as u64 + 5 * 512 + 3,
        ];
        for b in bad {
            let lba = 8 + b / 512;
            let mut block = vec![0u8; 512];
            qps[0].read_into(&ns, lba, &mut block).unwrap();
            block[(b % 512) as usize] ^= 0xFF;
            qps[0].write_from(&ns, lba, &block).unwrap();
        }
        let job = new_job();
        run_parallel(&mut qps, |qp| job.verify_worker(qp)).unwrap();
        assert_eq!(job.first_bad.load(Ordering::Relaxed), bad[1]);
        assert_eq!(job.lba_of(bad[1]), 8 + (CHUNK_BYTES / 512) as u64 + 5);
    }
}
