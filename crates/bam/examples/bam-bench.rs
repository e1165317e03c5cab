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
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut args = cli.args;
    args.json |= cli.json;
    bench::run(&args)
}
