//! `bam-file-peers`: the readers the file backend is compared with, on one file.

mod args;
mod pattern;
mod plan;
mod pread_memcpy;
mod report;
mod run;
mod target;
mod uring;

use anyhow::{bail, Result};
use args::{Args, Peer};
use clap::Parser;
use plan::{Mode, Plan};
use report::{Case, Report};
use run::Limit;
use std::fs::File;
use std::process::ExitCode;
use std::time::Duration;

/// Pieces `--emit-offsets` writes without `--ops`.
const DEFAULT_EMIT: u64 = 1 << 20;
/// The most buffer memory the cases may take.
const MAX_BUFFERS: u64 = 64 << 30;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs what `args` ask; false when --verify found wrong bytes.
fn run(args: &Args) -> Result<bool> {
    if let (Some(path), Some(size)) = (&args.make_file, args.size) {
        pattern::make_file(path, size, args.threads.clamp(1, 64))?;
        eprintln!("wrote {} ({size} B of pattern)", path.display());
        return Ok(true);
    }
    let Some(path) = &args.path else {
        bail!("give the file to read (or --make-file PATH --size N)");
    };
    check(args)?;
    let mode = if args.seq { Mode::Seq } else { Mode::Rand };
    let (file, size) = target::open(path, args.direct)?;
    let plan = Plan::new(mode, args.bs, size, args.threads, args.seed)?;
    if let Some(out) = &args.emit_offsets {
        let ops = args.ops.unwrap_or(DEFAULT_EMIT);
        plan::emit_offsets(&plan, ops, out)?;
        eprintln!(
            "wrote {ops} offsets of {} B pieces to {}",
            args.bs,
            out.display()
        );
        return Ok(true);
    }
    if args.warm {
        target::warm(path, args.threads)?;
    }
    let limit = match args.ops {
        Some(n) => Limit::Ops(n),
        None => Limit::Time(Duration::from_secs_f64(args.seconds)),
    };
    let mut clean = true;
    for &peer in &args.peer {
        if let Some(report) = case(args, peer, &file, &plan, limit)? {
            println!("{}", report.line());
            clean &= report.verify_errors.unwrap_or(0) == 0;
        }
    }
    Ok(clean)
}

/// Refuses shapes that cannot run.
fn check(args: &Args) -> Result<()> {
    if !(1..=4096).contains(&args.threads) {
        bail!("--threads {}: 1 to 4096", args.threads);
    }
    if !(1..=32768).contains(&args.depth) {
        bail!(
            "--depth {}: 1 to 32768 (io_uring's largest ring)",
            args.depth
        );
    }
    if args.bs == 0 || args.bs > 1 << 31 {
        bail!("--bs {}: 1 B to 2 GiB", args.bs);
    }
    if args.direct && !args.bs.is_multiple_of(512) {
        bail!(
            "--bs {} with --direct: a multiple of 512 (the logical block size)",
            args.bs
        );
    }
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 1e6) {
        bail!("--seconds {}: more than 0, at most 1e6", args.seconds);
    }
    if args.ops == Some(0) {
        bail!("--ops 0: at least one read");
    }
    let buffers = args.threads as u64 * args.depth as u64 * args.bs.next_multiple_of(4096);
    if buffers > MAX_BUFFERS {
        bail!("--threads x --depth x --bs = {buffers} B of buffers: at most {MAX_BUFFERS}");
    }
    Ok(())
}

/// Runs one peer over the plan; None when it is SKIPPED.
fn case(args: &Args, peer: Peer, file: &File, plan: &Plan, limit: Limit) -> Result<Option<Report>> {
    let (depth, measured) = match peer {
        Peer::Uring => (
            args.depth,
            run::measure(plan, limit, args.verify, |_| {
                uring::UringWorker::new(file, args.depth, args.bs)
            })?,
        ),
        Peer::PreadMemcpy => match pread_memcpy::gpu() {
            Err(reason) => {
                println!("SKIPPED: pread-memcpy needs a GPU ({reason})");
                return Ok(None);
            }
            Ok(ctx) => (
                1,
                run::measure(plan, limit, args.verify, |_| {
                    pread_memcpy::PreadWorker::new(&ctx, file, args.bs)
                })?,
            ),
        },
    };
    let (m, counts) = measured;
    if let Some(first) = &counts.first_mismatch {
        eprintln!(
            "{}: {} pieces differ from the pattern; the first: {first}",
            peer.name(),
            counts.verify_errors
        );
    }
    let case = Case {
        peer: peer.name(),
        mode: plan.mode.name(),
        direct: args.direct,
        threads: args.threads,
        depth,
        bs: args.bs,
    };
    Ok(Some(Report::new(
        case,
        m,
        args.verify.then_some(counts.verify_errors),
    )))
}
