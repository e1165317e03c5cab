//! `bam`: inspect, load, read and write NVMe controllers reached by the bam drivers, or
//! the controller model that stands in for one.
//!
//! Layout: `device.rs` parses device strings and brings controllers up, `error.rs` turns
//! failures into one-line messages and exit codes, `output.rs` prints text, JSON and
//! progress, `units.rs` parses and prints sizes, `plot/` draws benchmark reports, and
//! `commands/` has one module per subcommand (`commands/bench/` a folder: `bam bench`
//! and its subcommands). To add a subcommand: add `commands/NAME.rs` with `NameArgs` and
//! `run`, a variant to [`Command`] and its arm in [`run`].

mod commands;
mod device;
mod error;
mod interrupt;
mod outfile;
mod output;
mod plot;
mod units;

use clap::{Parser, Subcommand};
use error::{CliError, EXIT_RUNTIME};
use output::Global;
use serde::Serialize;
use std::io::Write;

const AFTER_HELP: &str = "\
Devices (--device DEV):
  model:PATH[,size=SIZE][,lba=BYTES]
        The in-process NVMe controller model (strict, as a real drive would be), with its
        data in the model image PATH: a 4 KiB header (magic, version, geometry,
        checksum), then the blocks. size= creates a missing image (sparse) of SIZE, a
        whole number of blocks; without size= a missing image is an error, so a mistyped
        path creates nothing. lba= is a new image's block size (512 to 64K, a power of
        two; default 512). An existing image keeps its size and block size; size= and
        lba=, when given, must match them. An image is locked while in use: one writing
        command, or any number of reading ones (info, read, which open it read-only).
        A raw disk image (no header) is refused: import it with
        bam load FILE --device model:NEW.img,size=SIZE. PATH must not contain a comma.
  model:ram:SIZE[,lba=BYTES]
        A throwaway controller model in RAM; its data is gone when bam exits.
  vfio:DDDD:BB:DD.F   (or vfio:BB:DD.F for domain 0000)
        A PCI NVMe controller bound to vfio-pci, e.g. vfio:0000:01:00.0 (see lspci -D).
  kmod:/dev/bam-nvmeN   (or kmod:DDDD:BB:DD.F)
        A controller bound to the bam kernel module (bam bind BDF; see bam list).
  Without --device, bam uses model:./bam-model.img: an existing image in the current
  directory, never created implicitly. Create it once with
  --device model:./bam-model.img,size=1G, or use model:ram:SIZE for a throwaway.

GPU devices (bam bench, bench cache, bench kernels: GPU threads drive them; docs/real-hardware.md):
  file:PATH[,PATH...][,direct|buffered][,rw][,size=SIZE][,workers=N][,sms=N][,staging=SIZE]
        Files or block devices (one path per SSD, striped): GPU threads' commands run
        on CPU threads through io_uring, page cache or O_DIRECT. Read-only unless rw,
        size= (create or grow) or fill=pattern; the file's bytes are the data. Runs on
        any Linux GPU machine, e.g. file:/data/edges.bin or file:/dev/nvme1n1,direct.
  sim[:PRESET][,ssds=N][,media=hbm|host|file:PATH][,capacity=SIZE]
        The simulated SSD array on the GPU (presets: ideal, optane-p5800x,
        samsung-980pro, pm1743).
  hostctl[:ssds=N][,capacity=SIZE][,lba=BYTES][,media=ram|file:PATH][,workers=N]
        The controller model on CPU threads, serving the GPU's queues across PCIe
        (verification; every command costs a few CUDA copies).
  kmod:/dev/bam-nvme0[,/dev/bam-nvme1,...]
        Real SSDs bound to the bam kernel module; data is striped over them. Run
        `bam doctor` first.

Units: sizes you type are binary (K = 1024, M, G, T; 1G = 2^30 bytes). Rates and
capacities bam prints are decimal (GB = 10^9 bytes, GB/s) unless labelled GiB/MiB.

Exit codes: 0 success, 1 the operation failed, 2 the command line is wrong, 130
stopped by Ctrl-C (read, write and load flush what they wrote and say how far they got).
Errors are one line on stderr: bam: error: <what> (device <DEV>): <cause> — <what to do>.
With --json, results (and errors, as {\"error\": ...}) are JSON on stdout.

Examples:
  bam info -d model:./bam-model.img,size=1G       create the default device's image (1 GiB)
  bam info --device model:ram:4G,lba=4096 --json  a throwaway 4 GiB model, as JSON
  bam write --lba 0 --input boot.bin              write a file at LBA 0 (default device)
  bam read --lba 0 --bytes 4K --output -          dump the first 4 KiB to stdout
  bam load data.bin --device model:big.img,size=64G --verify
  bam -v info --device vfio:0000:01:00.0          a real controller, with debug logs
  bam doctor                                      what this machine lacks for the GPU path
  bam bench --device file:/scratch/d.bin,size=4G --bs 4K   GPU threads reading a file
  bam bench --gpus 0,1 --gather                   two GPUs on one simulated array, against one
  bam plot run.json --output run.svg              plot a saved `bam bench` report";

/// `--help`'s heading of the options every subcommand takes.
const GLOBAL: &str = "Global options";

/// Command-line interface of `bam`.
#[derive(Parser, Debug)]
#[command(
    name = "bam",
    version,
    about = "Inspect, load, read and write NVMe controllers for BaM (GPU-initiated storage access)",
    after_help = AFTER_HELP,
    propagate_version = true
)]
struct Cli {
    /// Print results as JSON on stdout (no progress bars)
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,
    /// Log more on stderr: -v debug, -vv trace (RUST_LOG overrides)
    #[arg(short, long, action = clap::ArgAction::Count, global = true, help_heading = GLOBAL)]
    verbose: u8,
    /// No progress bars or notes on stderr
    #[arg(short, long, global = true, help_heading = GLOBAL)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// List NVMe controllers, the driver each is bound to and its bam --device string
    List(commands::list::ListArgs),
    /// Bind a controller to the bam kernel module (or --driver vfio-pci)
    Bind(commands::bind::BindArgs),
    /// Give a controller back to the kernel's nvme driver
    Unbind(commands::bind::UnbindArgs),
    /// Check what GPU-initiated I/O on real SSDs needs here (GPU, nvidia_p2p, bam module,
    /// IOMMU, PCIe topology, memlock) and say what is missing; exit 1 on any FAIL
    #[command(long_about = commands::doctor::LONG_ABOUT, after_help = commands::doctor::AFTER_HELP)]
    Doctor(commands::doctor::DoctorArgs),
    /// Identify the controller and its namespaces: version, limits, MDTS, LBA formats
    Info(commands::info::InfoArgs),
    /// Read an LBA range into a file or stdout
    Read(commands::read::ReadArgs),
    /// Write a file or stdin to an LBA range
    Write(commands::write::WriteArgs),
    /// Write a dataset file to the device in parallel, with progress; --verify reads it back
    Load(commands::load::LoadArgs),
    /// Draw a saved `bam bench`, `bench cache` or `bench kernels` report (JSON) as an SVG plot
    Plot(commands::plot::PlotArgs),
    /// GPU-initiated I/O benchmark, fio-style, on the simulated SSD array; `bench cache`:
    /// the software cache's hit/miss bandwidth and miss latency; `bench kernels`: ported
    /// kernels against their plain baselines (needs a GPU)
    #[cfg(feature = "gpu")]
    Bench(Box<commands::bench::BenchCommand>),
}

fn run(command: &Command, g: &Global) -> error::CliResult<()> {
    match command {
        Command::List(a) => commands::list::run(a, g),
        Command::Bind(a) => commands::bind::run_bind(a, g),
        Command::Unbind(a) => commands::bind::run_unbind(a, g),
        Command::Doctor(a) => commands::doctor::run(a, g),
        Command::Info(a) => commands::info::run(a, g),
        Command::Read(a) => commands::read::run(a, g),
        Command::Write(a) => commands::write::run(a, g),
        Command::Load(a) => commands::load::run(a, g),
        Command::Plot(a) => commands::plot::run(a, g),
        #[cfg(feature = "gpu")]
        Command::Bench(b) => commands::bench::run(b, g),
    }
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => "warn",
        1 => "warn,bam=debug,bam_nvme=debug",
        _ => "trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(s) if !s.is_empty() => EnvFilter::try_new(s).unwrap_or_else(|_| EnvFilter::new(level)),
        _ => EnvFilter::new(level),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[derive(Serialize)]
struct JsonError<'a> {
    error: &'a CliError,
}

fn main() {
    // clap prints usage errors itself and exits with 2 (0 for --help / --version).
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let g = Global {
        json: cli.json,
        quiet: cli.quiet,
    };
    let code = match run(&cli.command, &g) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "bam: error: {e}");
            if g.json && !e.in_json_output {
                output::print_json(&JsonError { error: &e });
            }
            e.exit_code()
        }
    };
    debug_assert!([0, EXIT_RUNTIME, error::EXIT_USAGE, error::EXIT_INTERRUPTED].contains(&code));
    std::process::exit(code);
}
