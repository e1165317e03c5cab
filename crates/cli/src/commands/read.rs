//! `bam read`: read an LBA range into a file (or stdout).

use super::{DeviceArgs, NamespaceArgs, CHUNK_BYTES, SIMPLE_QUEUE_DEPTH};
use crate::device;
use crate::error::{CliError, CliResult, NvmeContext};
use crate::interrupt;
use crate::outfile::OutputFile;
use crate::output::{print, print_json, Global};
use crate::units::{decimal_bytes, gb_per_s, parse_length};
use clap::{ArgGroup, Args};
use serde::Serialize;
use std::io::Write;
use std::time::Instant;

/// Arguments of `bam read`.
#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("length").required(true).args(["blocks", "bytes"])),
    after_help = "\
Give the length as --blocks (logical blocks) or --bytes (binary units accepted: 4K, 1M,
2G). With --bytes, whole blocks are read and the output is cut to exactly that length.

Examples:
  bam read --lba 0 --blocks 8 --output first8.bin
  bam read --device model:disk.img --lba 2048 --bytes 1M --output - | xxd | head
  bam read --device vfio:01:00.0 --lba 0 --bytes 4K --output sector0.bin --json"
)]
pub struct ReadArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub ns: NamespaceArgs,
    /// First logical block to read
    #[arg(long, value_name = "LBA")]
    pub lba: u64,
    /// Number of logical blocks to read (at least 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub blocks: Option<u64>,
    /// Number of bytes to read, at least 1 (e.g. 4096, 64K, 1M)
    #[arg(long, value_name = "BYTES", value_parser = parse_length)]
    pub bytes: Option<u64>,
    /// Output file; `-` writes to stdout
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: String,
}

/// The output of `bam read --json`.
#[derive(Serialize, Debug)]
pub struct ReadResult {
    pub device: String,
    pub nsid: u32,
    pub lba: u64,
    pub blocks: u64,
    pub block_size: u32,
    /// Bytes written to the output.
    pub bytes: u64,
    pub output: String,
    /// Seconds from the first read to the last byte written to the output.
    pub seconds: f64,
    /// Decimal GB/s over `seconds`.
    pub gb_per_s: f64,
}

/// Runs `bam read`.
pub fn run(args: &ReadArgs, g: &Global) -> CliResult<()> {
    let name = args.device.device.as_str();
    let what = "cannot read";
    let to_stdout = args.output == "-";
    if to_stdout && g.json {
        return Err(
            CliError::usage(what, "--json and --output - both want stdout")
                .hint("write the data to a file with --output FILE"),
        );
    }
    let dev = device::open_read_only(name, 1)?;
    let ns = dev.ctrl.namespace(args.ns.nsid).during(what, name)?;
    let bs = ns.block_size as u64;
    let (blocks, out_bytes) = match (args.blocks, args.bytes) {
        (Some(b), _) => (b, None),
        (None, Some(n)) => (n.div_ceil(bs), Some(n)),
        (None, None) => {
            return Err(CliError::usage(what, "no length given").hint("add --blocks N or --bytes N"))
        }
    };
    ns.check_range(args.lba, blocks).during(what, name)?;
    // In range, so it fits in the namespace's byte size.
    let out_bytes = out_bytes.unwrap_or(blocks * bs);

    let depth = SIMPLE_QUEUE_DEPTH.min(dev.ctrl.max_queue_entries());
    let mut qp = dev.ctrl.create_io_queue_pair(depth).during(what, name)?;

    // A file output is written beside its name and renamed over it when complete, and
    // the model image being read is refused as the output (crate::outfile).
    let image = match &dev.spec {
        device::DeviceSpec::ModelFile { path, .. } => Some(path.as_path()),
        _ => None,
    };
    let mut file = if to_stdout {
        None
    } else {
        let reads: Vec<&std::path::Path> = image.into_iter().collect();
        Some(OutputFile::create(
            std::path::Path::new(&args.output),
            &reads,
            "cannot create the output",
        )?)
    };
    let mut stdout = std::io::stdout().lock();
    let out: &mut dyn Write = match file.as_mut() {
        Some(f) => f,
        None => &mut stdout,
    };
    interrupt::catch();
    let bar = g.progress(out_bytes, "reading");
    let start = Instant::now();
    let mut done = 0u64; // bytes read from the device
    let result = (|| {
        let mut buf = vec![0u8; CHUNK_BYTES];
        while done < out_bytes {
            if interrupt::requested() {
                out.flush()
                    .map_err(|e| CliError::file("cannot write the output", &args.output, &e))?;
                return Err(CliError::interrupted(
                    "read stopped at Ctrl-C",
                    format!(
                        "LBA {}..{} ({} of {out_bytes} bytes) were read",
                        args.lba,
                        args.lba + done / bs,
                        done,
                    ),
                )
                .on(name));
            }
            let n = (blocks * bs - done).min(CHUNK_BYTES as u64) as usize;
            qp.read_into(&ns, args.lba + done / bs, &mut buf[..n])
                .during(what, name)?;
            let keep = (out_bytes - done).min(n as u64) as usize;
            out.write_all(&buf[..keep])
                .and_then(|_| {
                    if done + keep as u64 >= out_bytes {
                        out.flush()
                    } else {
                        Ok(())
                    }
                })
                .map_err(|e| CliError::file("cannot write the output", &args.output, &e))?;
            done += n as u64;
            bar.inc(keep as u64);
        }
        Ok(())
    })();
    bar.finish_and_clear();
    match (result, file) {
        // After Ctrl-C the partial output is kept under its temporary name (the target is
        // left as it was); after another error it is removed (dropped).
        (Err(e), Some(f)) if e.interrupted => {
            let kept = f.keep_partial();
            return Err(match kept {
                Some(p) => e.hint(format!(
                    "what was read is in {} ({} is unchanged)",
                    p.display(),
                    args.output
                )),
                None => e,
            });
        }
        (Err(e), _) => return Err(e),
        (Ok(()), Some(f)) => f.commit("cannot write the output")?,
        (Ok(()), None) => {}
    }
    let seconds = start.elapsed().as_secs_f64();

    let r = ReadResult {
        device: name.to_string(),
        nsid: ns.nsid,
        lba: args.lba,
        blocks,
        block_size: ns.block_size,
        bytes: out_bytes,
        output: args.output.clone(),
        seconds,
        gb_per_s: gb_per_s(out_bytes, seconds),
    };
    if g.json {
        print_json(&r);
    } else {
        let text = format!(
            "read {} ({out_bytes} bytes) from LBA {}..{} ({blocks} blocks of {bs} bytes) of {name}, namespace {}, into {}\n\
             {seconds:.3} s, {:.3} GB/s (decimal; the reads and writing the output)",
            decimal_bytes(out_bytes),
            args.lba,
            args.lba + blocks,
            ns.nsid,
            if to_stdout { "stdout" } else { &args.output },
            r.gb_per_s
        );
        if to_stdout {
            g.note(&text);
        } else {
            print(&(text + "\n"));
        }
    }
    Ok(())
}
