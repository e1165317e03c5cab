//! What the benchmark commands share: the spinner, where a report came from (command
//! line, driver, commit), and around the library call of `bench cache` and `bench
//! kernels`: turning the library's option errors into usage errors, opening the GPU, and
//! the JSON report (the library's report plus where it came from) written where the
//! flags say.

use crate::error::{CliError, CliResult};
use crate::output::{self, Global};
use crate::units::SizeArg;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A spinner on stderr while the GPU works (hidden with --json, --quiet or when stderr
/// is not a terminal): what runs and for how long so far.
pub fn spinner(visible: bool, msg: String) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !visible || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
    {
        bar.set_style(style);
    }
    bar.set_message(msg);
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// The command line, for benchmark reports.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// The NVIDIA driver's version line, or "unknown".
pub fn driver_version() -> String {
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|v| v.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

/// The commit the binary was built from (`BAM_COMMIT` at build time, else at run time;
/// empty when neither is set).
pub fn commit() -> String {
    option_env!("BAM_COMMIT")
        .map(String::from)
        .or_else(|| std::env::var("BAM_COMMIT").ok())
        .unwrap_or_default()
}

/// The message of a library error: an `InvalidArgument`'s own text (it names the broken
/// rule), any other error as it displays.
pub fn cause(e: bam::Error) -> String {
    match e {
        bam::Error::InvalidArgument(m) => m,
        e => e.to_string(),
    }
}

/// `--line` as the libraries take it (u32), or the rule it breaks.
pub fn line_bytes(line: &SizeArg) -> Result<u32, String> {
    u32::try_from(line.0).map_err(|_| {
        format!(
            "line size {} B: must be a multiple of 512 B from 512 B to 64 KiB (e.g. 4096)",
            line.0
        )
    })
}

/// Parses `--device` (a usage error with `help_hint` when it is bad) and opens GPU 0;
/// `what` heads the errors ("cannot run ...").
pub fn open_gpu(
    what: &str,
    device: &str,
    help_hint: &str,
) -> CliResult<(bam::storage::GpuDevice, Arc<bam::Gpu>)> {
    let device = crate::device::parse_gpu(device).map_err(|e| {
        CliError::usage("invalid device string", e)
            .on(device.to_string())
            .hint(help_hint)
    })?;
    // Load kernels when their modules load, not on first launch: a lazy load while the
    // simulated controllers run can wait for them forever (see bam::Module).
    // Set before the first CUDA call of the process, which reads it.
    if std::env::var_os("CUDA_MODULE_LOADING").is_none() {
        std::env::set_var("CUDA_MODULE_LOADING", "EAGER");
    }
    let gpu_hint =
        "run it on a machine with an NVIDIA GPU (compute capability 9.0 or newer) and its driver";
    if !bam::gpu_available() {
        return Err(CliError::new(
            what,
            "no NVIDIA GPU: the CUDA driver (libcuda.so) is missing or sees no GPU",
        )
        .hint(gpu_hint));
    }
    let gpu = bam::Gpu::new(0).map_err(|e| CliError::new(what, e.to_string()).hint(gpu_hint))?;
    Ok((device, gpu))
}

/// The JSON report: the library's report plus where it came from.
#[derive(Serialize)]
pub struct Report<'a, R: Serialize> {
    #[serde(flatten)]
    pub report: &'a R,
    pub driver: String,
    /// The commit the binary was built from (absent where the library's report has it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub command: String,
    /// Present when the benchmark found a problem (the command then exits with 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a CliError>,
}

/// Where the report goes besides the terminal: the `--output` and `--plot` flags.
pub struct Outputs<'a> {
    pub output: Option<&'a PathBuf>,
    pub plot: Option<&'a PathBuf>,
}

/// Writes `report` with its provenance (and `commit` where the library's report has none)
/// as JSON: on stdout with --json, to --output, drawn to --plot. Then fails with `failure`
/// when there is one (marked as already in the JSON output with --json).
pub fn write_report<R: Serialize>(
    report: &R,
    commit: Option<String>,
    failure: Option<CliError>,
    to: Outputs<'_>,
    g: &Global,
) -> CliResult<()> {
    let report_with_provenance = Report {
        report,
        driver: driver_version(),
        commit,
        command: command_line(),
        error: failure.as_ref(),
    };
    let json = serde_json::to_string_pretty(&report_with_provenance)
        .map_err(|e| CliError::new("cannot serialize the report", e.to_string()))?;
    print_and_save(&json, to.output, g)?;
    if let Some(p) = to.plot {
        crate::commands::plot::write_plot(&report_with_provenance, p)?;
    }
    match failure {
        Some(e) if g.json => Err(e.in_json_output()),
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Prints a JSON report on stdout with --json and writes it to `output` (--output).
pub fn print_and_save(json: &str, output: Option<&PathBuf>, g: &Global) -> CliResult<()> {
    if g.json {
        output::print(&(json.to_string() + "\n"));
    }
    match output {
        Some(p) => crate::outfile::write_file(p, json.as_bytes(), "cannot write the report"),
        None => Ok(()),
    }
}

/// Test helpers of the benchmark commands' arguments.
#[cfg(test)]
pub mod testing {
    /// Parses `args` (without the program name) as the flags of `A`.
    pub fn try_parse<A: clap::Args>(args: &[&str]) -> Result<A, clap::Error> {
        let m = A::augment_args(clap::Command::new("t"))
            .try_get_matches_from(std::iter::once("t").chain(args.iter().copied()))?;
        A::from_arg_matches(&m)
    }

    /// Like [`try_parse`], for flags that parse.
    pub fn parse<A: clap::Args>(args: &[&str]) -> A {
        try_parse(args).unwrap()
    }
}
