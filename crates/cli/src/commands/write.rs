//! `bam write`: write a file (or stdin) to an LBA range.

use super::{read_full, DeviceArgs, NamespaceArgs, CHUNK_BYTES, SIMPLE_QUEUE_DEPTH};
use crate::device;
use crate::error::{CliError, CliResult, NvmeContext};
use crate::interrupt;
use crate::output::{print, print_json, Global};
use crate::units::{decimal_bytes, gb_per_s};
use clap::Args;
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

/// Runs `bam write`.
pub fn run(args: &WriteArgs, g: &Global) -> CliResult<()> {
    let name = args.device.device.as_str();
    let what = "cannot write";
    let dev = device::open(name, 1)?;
    let ns = dev.ctrl.namespace(args.ns.nsid).during(what, name)?;
    let bs = ns.block_size as u64;

    // The input; a regular file's length is known (and checked) before anything is
    // written, a stream (stdin, a pipe) is written as it arrives, 4 MiB at a time.
    let (mut input, known_len): (Box<dyn Read>, Option<u64>) = if args.input == "-" {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let f = std::fs::File::open(&args.input)
            .map_err(|e| CliError::file("cannot open the input", &args.input, &e))?;
        let meta = f
            .metadata()
            .map_err(|e| CliError::file("cannot open the input", &args.input, &e))?;
        let len = meta.is_file().then_some(meta.len());
        (Box::new(f), len)
    };
    let input_name = if args.input == "-" {
        "stdin"
    } else {
        &args.input
    };
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
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut done = 0u64; // bytes of input written
    let mut blocks = 0u64; // blocks written
                           // What the loop stopped for, when not at the end of the input.
    let mut stopped: Option<CliError> = None;
    loop {
        if interrupt::requested() {
            stopped = Some(CliError::interrupted("write stopped at Ctrl-C", ""));
            break;
        }
        let want = match known_len {
            Some(len) => (len - done).min(CHUNK_BYTES as u64) as usize,
            None => CHUNK_BYTES,
        };
        if want == 0 {
            break;
        }
        let n = match read_full(&mut input, &mut buf[..want]) {
            Ok(n) => n,
            Err(e) => {
                stopped = Some(CliError::file("cannot read the input", input_name, &e));
                break;
            }
        };
        if n < want && known_len.is_some() {
            stopped = Some(
                CliError::new(
                    "cannot read the input",
                    format!(
                        "{} ended after {} of {} bytes (it changed while being written)",
                        args.input,
                        done + n as u64,
                        known_len.unwrap_or_default()
                    ),
                )
                .hint("write a file that is not being modified"),
            );
            break;
        }
        if n == 0 {
            break;
        }
        let rounded = n.div_ceil(bs as usize) * bs as usize;
        buf[n..rounded].fill(0);
        let chunk_blocks = rounded as u64 / bs;
        let lba = args.lba + blocks;
        let wrote = ns
            .check_range(lba, chunk_blocks)
            .and_then(|_| qp.write_from(&ns, lba, &buf[..rounded]))
            .during(what, name);
        if let Err(e) = wrote {
            stopped = Some(e);
            break;
        }
        done += n as u64;
        blocks += chunk_blocks;
        bar.inc(n as u64);
        if n < want {
            break; // the end of a stream
        }
    }
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
        let so_far = if blocks == 0 {
            "nothing was written".to_string()
        } else {
            format!(
                "the first {done} bytes of {input_name} went to LBA {}..{} ({blocks} blocks of {bs} bytes){}",
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
    let padded = blocks * bs - done;
    let len = done;

    let result = WriteResult {
        device: name.to_string(),
        nsid: ns.nsid,
        lba: args.lba,
        blocks,
        block_size: ns.block_size,
        bytes: len,
        padded_bytes: padded,
        seconds,
        gb_per_s: gb_per_s(len, seconds),
    };
    if g.json {
        print_json(&result);
    } else {
        let mut s = format!(
            "wrote {} ({len} bytes) to LBA {}..{} ({blocks} blocks of {bs} bytes) of {name}, namespace {}\n\
             {seconds:.3} s, {:.3} GB/s (decimal; reading the input, the writes and the final flush)\n",
            decimal_bytes(len),
            args.lba,
            args.lba + blocks,
            ns.nsid,
            result.gb_per_s
        );
        if padded > 0 {
            s += &format!(
                "the last block was padded with {padded} zero bytes (the input is not a multiple of {bs} bytes)\n"
            );
        }
        print(&s);
    }
    Ok(())
}
