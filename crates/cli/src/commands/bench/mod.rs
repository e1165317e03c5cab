//! `bam bench`: the raw I/O benchmark (`io.rs`, its flags in `io_args.rs`; several GPUs
//! in `gpus.rs`), or a subcommand: `bench cache` (`cache.rs`) and `bench kernels`
//! (`kernels.rs`). `support.rs` has what they share. Each returns [`CliResult`] and
//! writes its typed report where the flags say, like every other command.

pub mod cache;
mod gpus;
pub mod io;
pub mod io_args;
pub mod kernels;
pub mod support;

use crate::error::CliResult;
use crate::output::Global;
use clap::Subcommand;

/// `bam bench`: the raw I/O benchmark's flags, or a subcommand (not both).
#[derive(clap::Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    flatten_help = true,
    disable_help_subcommand = true
)]
pub struct BenchCommand {
    #[command(subcommand)]
    sub: Option<BenchSub>,
    #[command(flatten)]
    io: io_args::IoArgs,
}

/// The subcommands of `bam bench`.
#[derive(Subcommand, Debug)]
enum BenchSub {
    /// Software cache: hit and miss bandwidth against raw reads of the same pattern, and
    /// single-line miss latency (needs an NVIDIA GPU)
    #[command(long_about = cache::LONG_ABOUT)]
    Cache(cache::CacheArgs),
    /// Kernel suite: spmv, bfs, gather, histogram and rmw written once over their array
    /// type, plain (GPU memory, zero-copy, UVM) against ported to bam::array (needs an
    /// NVIDIA GPU)
    #[command(long_about = kernels::LONG_ABOUT)]
    Kernels(kernels::KernelsArgs),
}

/// Runs `bam bench` or its subcommand.
pub fn run(b: &BenchCommand, g: &Global) -> CliResult<()> {
    match &b.sub {
        Some(BenchSub::Cache(a)) => cache::run(a, g),
        Some(BenchSub::Kernels(a)) => kernels::run(a, g),
        None => io::run(&b.io, g),
    }
}
