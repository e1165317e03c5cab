//! `bam write`: write a file (or stdin) to an LBA range.

use super::{read_full, DeviceArgs, NamespaceArgs, CHUNK_BYTES, SIMPLE_QUEUE_DEPTH};
use crate::device;
use crate::error::{CliError, CliResult, NvmeContext};
use crate::output::{print, print_json, Global};
use crate::units::decimal_bytes;
use clap::Args;
use serde::Serialize;
use std::io::Read;
use std::time::Instant;

/// Arguments of `bam write`.
#[derive(Args, Debug)]
#[command(after_help = "\
The data goes to whole logical blocks starting at --lba. When the input is not a
multiple of the block size, the last block is padded with zeros (and bam says so).

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
    pub seconds: f64,
}

/// Runs `bam write`.
pub fn run(args: &WriteArgs, g: &Global) -> CliResult<()> {
    let name = args.device.device.as_str();
    let what = "cannot write";
    let dev = device::open(name, 1)?;
    let ns = dev.ctrl.namespace(args.ns.nsid).during(what, name)?;
    let bs = ns.block_size as u64;

    // The input and its length, known before anything is written.
    let (mut input, len): (Box<dyn Read>, u64) = if args.input == "-" {
        // At most one byte more than the namespace holds: enough to tell it does not fit.
        let mut data = Vec::new();
        std::io::stdin()
            .lock()
            .take(ns.bytes().saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| CliError::file("cannot read the input", "stdin", &e))?;
        let len = data.len() as u64;
        (Box::new(std::io::Cursor::new(data)), len)
    } else {
        let f = std::fs::File::open(&args.input)
            .map_err(|e| CliError::file("cannot open the input", &args.input, &e))?;
        let meta = f
            .metadata()
            .map_err(|e| CliError::file("cannot open the input", &args.input, &e))?;
        if meta.is_file() {
            (Box::new(f), meta.len())
        } else {
            let mut data = Vec::new();
            f.take(ns.bytes().saturating_add(1))
                .read_to_end(&mut data)
                .map_err(|e| CliError::file("cannot read the input", &args.input, &e))?;
            let len = data.len() as u64;
            (Box::new(std::io::Cursor::new(data)), len)
        }
    };
    if len == 0 {
        return Err(
            CliError::new(what, format!("the input {} is empty", args.input))
                .on(name)
                .hint("give a file with data to write"),
        );
    }
    let blocks = len.div_ceil(bs);
    ns.check_range(args.lba, blocks).during(what, name)?;
    let padded = blocks * bs - len;

    let depth = SIMPLE_QUEUE_DEPTH.min(dev.ctrl.max_queue_entries());
    let mut qp = dev.ctrl.create_io_queue_pair(depth).during(what, name)?;
    let start = Instant::now();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(CHUNK_BYTES as u64) as usize;
        let n = read_full(&mut input, &mut buf[..want])
            .map_err(|e| CliError::file("cannot read the input", &args.input, &e))?;
        if n < want {
            return Err(CliError::new(
                "cannot read the input",
                format!(
                    "{} ended after {} of {len} bytes (it changed while being written)",
                    args.input,
                    done + n as u64
                ),
            )
            .hint("write a file that is not being modified"));
        }
        let rounded = n.div_ceil(bs as usize) * bs as usize;
        buf[n..rounded].fill(0);
        qp.write_from(&ns, args.lba + done / bs, &buf[..rounded])
            .during(what, name)?;
        done += n as u64;
    }
    qp.flush(&ns).during(what, name)?;
    let seconds = start.elapsed().as_secs_f64();

    let result = WriteResult {
        device: name.to_string(),
        nsid: ns.nsid,
        lba: args.lba,
        blocks,
        block_size: ns.block_size,
        bytes: len,
        padded_bytes: padded,
        seconds,
    };
    if g.json {
        print_json(&result);
    } else {
        let mut s = format!(
            "wrote {} ({len} bytes) to LBA {}..{} ({blocks} blocks of {bs} bytes) of {name}, namespace {}\n",
            decimal_bytes(len),
            args.lba,
            args.lba + blocks,
            ns.nsid
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
