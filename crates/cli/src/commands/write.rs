//! `bam write`: write a file (or stdin) to an LBA range.

use super::{read_full, DeviceArgs, NamespaceArgs, CHUNK_BYTES, SIMPLE_QUEUE_DEPTH};
use crate::device;
use crate::error::{CliError, CliResult, NvmeContext};
use crate::interrupt;
use crate::output::{print, print_json, Global};
use crate::units::{decimal_bytes, gb_per_s};
use bam_nvme::{IoQueuePair, Namespace};
use clap::Args;
use indicatif::ProgressBar;
use serde::Serialize;
use std::io::Read;
use std::time::Instant;

/// Arguments of `bam write`.
#[derive(Args, Debug)]
#[command(after_help = "\
The data goes to whole logical blocks starting at --lba. When the input is not a
multiple of the block size, the last block is padded with zeros (and bam says so).
A file that does not fit is refused before anything is written; stdin (or a pipe) is
written as it arrives, 4 MiB at a time, and stops with an error at the end of the
namespace. Ctrl-C stops after the write in flight, flushes, says how far it got and
exits with 130.

Examples:
  bam write --lba 0 --input boot.bin
  bam write --device model:disk.img,size=4G --lba 2048 --input data.bin
  echo hello | bam write --device model:disk.img --lba 7 --input -")]
pub struct WriteArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub ns: NamespaceArgs,
    /// First logical block to write
    #[arg(long, value_name = "LBA")]
    pub lba: u64,
    /// File to write; `-` reads stdin
    #[arg(short = 'i', long, value_name = "FILE")]
    pub input: String,
}

/// The output of `bam write --json`.
#[derive(Serialize, Debug)]
pub struct WriteResult {
    pub device: String,
    pub nsid: u32,
    pub lba: u64,
    pub blocks: u64,
    pub block_size: u32,
    /// Bytes of input.
    pub bytes: u64,
    /// Zero bytes added to fill the last block.
    pub padded_bytes: u64,
    /// Seconds from the first read of the input to the end of the final flush.
    pub seconds: f64,
    /// Decimal GB/s of input over `seconds`.
    pub gb_per_s: f64,
}

/// What a failed `bam write` could not do.
const WHAT: &str = "cannot write";

/// Runs `bam write`.
pub fn run(args: &WriteArgs, g: &Global) -> CliResult<()> {
    let name = args.device.device.as_str();
    let what = WHAT;
    let dev = device::open(name, 1)?;
    let ns = dev.ctrl.namespace(args.ns.nsid).during(what, name)?;
    let bs = ns.block_size as u64;

    let (mut input, known_len) = open_input(&args.input)?;
    let empty = || {
        CliError::new(what, format!("the input {} is empty", args.input))
            .on(name)
            .hint("give a file with data to write")
    };
    if let Some(len) = known_len {
        if len == 0 {
            return Err(empty());
        }
        ns.check_range(args.lba, len.div_ceil(bs))
            .during(what, name)?;
    }

    let depth = SIMPLE_QUEUE_DEPTH.min(dev.ctrl.max_queue_entries());
    let mut qp = dev.ctrl.create_io_queue_pair(depth).during(what, name)?;
    interrupt::catch();
    let bar = match known_len {
        Some(len) => g.progress(len, "writing"),
        None => g.progress_stream("writing"),
    };
    let start = Instant::now();
    let (
        Written {
            bytes: done,
            blocks,
        },
        stopped,
    ) = write_input(&mut input, known_len, &mut qp, &ns, args, &bar);
    bar.finish_and_clear();
    if stopped.is_none() && done == 0 {
        return Err(empty());
    }
    // What was written stays written: flush it, whatever stopped the loop.
    let flushed = if blocks > 0 {
        qp.flush(&ns).during(what, name)
    } else {
        Ok(())
    };
    let seconds = start.elapsed().as_secs_f64();
    if let Some(mut e) = stopped {
        let so_far =
            if blocks == 0 {
                "nothing was written".to_string()
            } else {
                format!(
                "the first {done} bytes of {} went to LBA {}..{} ({blocks} blocks of {bs} bytes){}",
                input_name(args),
                args.lba,
                args.lba + blocks,
                if flushed.is_ok() { " and were flushed" } else { " (the flush failed)" }
            )
            };
        e.cause = if e.cause.is_empty() {
            so_far
        } else {
            format!("{}; {so_far}", e.cause)
        };
        return Err(e.on(name));
    }
    flushed?;

    let result = WriteResult {
        device: name.to_string(),
        nsid: ns.nsid,
        lba: args.lba,
        blocks,
        block_size: ns.block_size,
        bytes: done,
        padded_bytes: blocks * bs - done,
        seconds,
        gb_per_s: gb_per_s(done, seconds),
    };
    if g.json {
        print_json(&result);
    } else {
        print(&summary(&result));
    }
    Ok(())
}

/// Opens the input: a regular file's length is known (and checked) before anything is
/// written, a stream (stdin, a pipe) is written as it arrives, 4 MiB at a time.
fn open_input(input: &str) -> CliResult<(Box<dyn Read>, Option<u64>)> {
    if input == "-" {
        return Ok((Box::new(std::io::stdin().lock()), None));
    }
    let f = std::fs::File::open(input)
        .map_err(|e| CliError::file("cannot open the input", input, &e))?;
    let meta = f
        .metadata()
        .map_err(|e| CliError::file("cannot open the input", input, &e))?;
    let len = meta.is_file().then_some(meta.len());
    Ok((Box::new(f), len))
}

/// The input as messages name it.
fn input_name(args: &WriteArgs) -> &str {
    if args.input == "-" {
        "stdin"
    } else {
        &args.input
    }
}

/// How far the input got.
struct Written {
    /// Bytes of input written.
    bytes: u64,
    /// Blocks written.
    blocks: u64,
}

/// Writes the input, a chunk at a time, to consecutive blocks from `args.lba` on until
/// its end; returns how far it got and, when something other than the end of the input
/// stopped it (a Ctrl-C, a failed read or write), what.
fn write_input(
    input: &mut impl Read,
    known_len: Option<u64>,
    qp: &mut IoQueuePair,
    ns: &Namespace,
    args: &WriteArgs,
    bar: &ProgressBar,
) -> (Written, Option<CliError>) {
    let bs = ns.block_size as u64;
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut w = Written {
        bytes: 0,
        blocks: 0,
    };
    loop {
        if interrupt::requested() {
            return (
                w,
                Some(CliError::interrupted("write stopped at Ctrl-C", "")),
            );
        }
        let want = match known_len {
            Some(len) => (len - w.bytes).min(CHUNK_BYTES as u64) as usize,
            None => CHUNK_BYTES,
        };
        if want == 0 {
            return (w, None);
        }
        let n = match read_chunk(input, &mut buf[..want], known_len, w.bytes, args) {
            Ok(n) => n,
            Err(e) => return (w, Some(e)),
        };
        if n == 0 {
            return (w, None);
        }
        let rounded = n.div_ceil(bs as usize) * bs as usize;
        buf[n..rounded].fill(0);
        let chunk_blocks = rounded as u64 / bs;
        let lba = args.lba + w.blocks;
        let wrote = ns
            .check_range(lba, chunk_blocks)
            .and_then(|_| qp.write_from(ns, lba, &buf[..rounded]))
            .during(WHAT, args.device.device.as_str());
        if let Err(e) = wrote {
            return (w, Some(e));
        }
        w.bytes += n as u64;
        w.blocks += chunk_blocks;
        bar.inc(n as u64);
        if n < want {
            return (w, None); // the end of a stream
        }
    }
}

/// Reads the next chunk of the input into `buf`, `done` bytes of it read before; a
/// regular file (`known_len`) that ends early has changed while being written.
fn read_chunk(
    input: &mut impl Read,
    buf: &mut [u8],
    known_len: Option<u64>,
    done: u64,
    args: &WriteArgs,
) -> CliResult<usize> {
    let n = read_full(input, buf)
        .map_err(|e| CliError::file("cannot read the input", input_name(args), &e))?;
    if n < buf.len() && known_len.is_some() {
        return Err(CliError::new(
            "cannot read the input",
            format!(
                "{} ended after {} of {} bytes (it changed while being written)",
                args.input,
                done + n as u64,
                known_len.unwrap_or_default()
            ),
        )
        .hint("write a file that is not being modified"));
    }
    Ok(n)
}

/// The text `bam write` prints without `--json`.
fn summary(r: &WriteResult) -> String {
    let (len, bs, blocks, padded) = (r.bytes, r.block_size, r.blocks, r.padded_bytes);
    let mut s = format!(
        "wrote {} ({len} bytes) to LBA {}..{} ({blocks} blocks of {bs} bytes) of {}, namespace {}\n\
         {:.3} s, {:.3} GB/s (decimal; reading the input, the writes and the final flush)\n",
        decimal_bytes(len),
        r.lba,
        r.lba + blocks,
        r.device,
        r.nsid,
        r.seconds,
        r.gb_per_s
    );
    if padded > 0 {
        s += &format!(
            "the last block was padded with {padded} zero bytes (the input is not a multiple of {bs} bytes)\n"
        );
    }
    s
}
