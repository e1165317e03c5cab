//! Stand-alone `bam bench` for device runs (scripts/gpu-run.sh) until the CLI's command
//! enum carries it: the same code as `crates/cli/src/commands/bench.rs`.

#[path = "../../cli/src/commands/bench.rs"]
mod bench;

use clap::Parser;

#[derive(Parser)]
#[command(name = "bam bench", about = "raw GPU-initiated I/O benchmark")]
struct Cli {
    #[command(flatten)]
    args: bench::BenchArgs,
}

fn main() -> anyhow::Result<()> {
    bench::run(&Cli::parse().args)
}
