//! What the bam examples share: the metadata every JSON result carries (command, commit,
//! GPU, time), progress bars, human count/size arguments (`1e9`, `100M`, `1GiB`),
//! best-of-N timing, the raw zero-copy read of host memory (`zero_copy.cuh` and
//! [`zero_copy_times`]), the simulated array's command-line flags, what the scan
//! examples' kernels share ([`ScanKernels`]), and the generators' random numbers.

use anyhow::Context;
use bam::cuda::{CudaStream, DeviceBuffer};
use bam::io::IoConfig;
use bam::scan::{io_config, ScanConfig};
use bam::storage::sim::{DriveProfile, Media, SimConfig};
use bam::{Gpu, KernelArgs, Module};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where and how a result was measured.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    /// The command line.
    pub command: String,
    /// The commit the binary was built from (`BAM_COMMIT`, else `git rev-parse HEAD`;
    /// "dirty" is appended by the build script when the tree differed).
    pub commit: String,
    /// The GPU's name, as the driver reports it.
    pub gpu: String,
    /// UTC time of the run (seconds since the epoch).
    pub unix_time: u64,
    /// Host CPUs available to the process.
    pub host_cpus: usize,
}

impl RunInfo {
    /// Metadata of this process's run on `gpu` (a name).
    pub fn new(gpu: &str) -> Self {
        let commit = std::env::var("BAM_COMMIT").ok().unwrap_or_else(|| {
            std::process::Command::new("git")
                .args(["rev-parse", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_else(|| "unknown".into())
        });
        RunInfo {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            commit: commit.trim().to_string(),
            gpu: gpu.to_string(),
            unix_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            host_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast generator for test data. Each
/// generator block of an example has its own stream, so data comes out the same on any
/// number of threads.
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Stream `stream` of `seed`, in the generator's own `domain` (a constant per use,
    /// so that two generators with the same seed do not share numbers).
    pub fn new(seed: u64, stream: u64, domain: u64) -> Self {
        SplitMix64(seed ^ stream.wrapping_mul(0xD134_2543_DE82_EF95) ^ domain)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, n) from 32 random bits (n < 2^32; the cheap form).
    pub fn below32(&mut self, n: u64) -> u64 {
        ((self.next_u64() >> 32) * n) >> 32
    }
    /// Uniform in [0, n) for any n.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The flags of the examples that scan a simulated array (`#[command(flatten)]`).
#[derive(clap::Args, Clone, Debug)]
pub struct ScanArgs {
    /// Chunks in flight per block.
    #[arg(long, default_value_t = 3)]
    pub depth: u32,
    /// Threads per block (a multiple of 32, at most 512).
    #[arg(long, default_value_t = 512)]
    pub threads: u32,
    /// Simulated SSDs.
    #[arg(long, default_value_t = 8)]
    pub ssds: u32,
    /// SMs the simulated controllers take.
    #[arg(long, default_value_t = 16)]
    pub sim_sms: u32,
}

impl ScanArgs {
    /// Checks the flags' ranges.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.threads == 0 || !self.threads.is_multiple_of(32) || self.threads > 512 {
            anyhow::bail!(
                "--threads {} must be a multiple of 32, at most 512",
                self.threads
            );
        }
        if self.ssds == 0 || self.sim_sms == 0 || self.depth == 0 {
            anyhow::bail!("--ssds, --sim-sms and --depth must be at least 1");
        }
        Ok(())
    }

    /// The simulated SSD array of a scan example: `--ssds` ideal drives of
    /// `capacity_bytes` each with their media in pinned host memory, `--sim-sms`
    /// controller SMs, 16 queue pairs and buffer slots for scans of `spans` spans (see
    /// [`io_config`]).
    pub fn sim_config(&self, cfg: &ScanConfig, spans: u32, capacity_bytes: u64) -> SimConfig {
        SimConfig {
            ssds: self.ssds,
            media: Media::Host,
            capacity_bytes,
            sim_sms: self.sim_sms,
            io: IoConfig {
                queues: 16,
                ..io_config(cfg, spans)
            },
            fill_pattern: false,
            ..SimConfig::new(DriveProfile::ideal())
        }
    }
}

/// What a scan example's kernels share: the module, a stream, the two counters the
/// kernels keep (rows they could not use, blocks whose scan failed), the launch shape
/// and the timed runs asked for.
pub struct ScanKernels<'g> {
    pub gpu: &'g Arc<Gpu>,
    pub module: &'g Module,
    pub stream: Arc<CudaStream>,
    /// Two 64-bit counters.
    pub counters: DeviceBuffer,
    /// Blocks of a launch: the SMs the simulated controllers leave.
    pub blocks: u32,
    /// Threads per block (`--threads`).
    pub threads: u32,
    /// Timed runs of each variant.
    pub runs: u32,
}

impl<'g> ScanKernels<'g> {
    /// The counters and a stream on `gpu`, blocks for the SMs `scan.sim_sms` leaves.
    pub fn new(
        gpu: &'g Arc<Gpu>,
        module: &'g Module,
        scan: &ScanArgs,
        runs: u32,
    ) -> anyhow::Result<Self> {
        Ok(ScanKernels {
            gpu,
            module,
            counters: DeviceBuffer::zeroed(gpu, 16)?,
            stream: gpu.stream()?,
            blocks: gpu.sms.saturating_sub(scan.sim_sms).max(1),
            threads: scan.threads,
            runs,
        })
    }

    /// Waits for the kernel `what` (two minutes at most).
    pub fn sync(&self, what: &str) -> anyhow::Result<()> {
        self.gpu
            .sync_timeout(&self.stream, Duration::from_secs(120))
            .with_context(|| format!("{what} did not finish"))
    }

    /// Launches `kernel` on `grid` blocks of `--threads` threads on the stream and waits
    /// for it ([`Self::sync`]).
    ///
    /// # Safety
    /// As [`Module::launch`]: `args` must match the kernel's parameters, and every memory
    /// the kernel touches must stay allocated until it has finished.
    pub unsafe fn launch_and_sync<A: KernelArgs + ?Sized>(
        &self,
        kernel: &str,
        grid: u32,
        args: &A,
    ) -> anyhow::Result<()> {
        // SAFETY: forwarded to the caller's contract.
        unsafe {
            self.module
                .launch(&self.stream, kernel, grid, self.threads, 0, args)?
        };
        self.sync(kernel)
    }

    /// The counters: rows the kernels could not use, blocks whose scan failed.
    pub fn counts(&self) -> anyhow::Result<[u64; 2]> {
        let mut c = [0u64; 2];
        self.counters.read(0, &mut c)?;
        Ok(c)
    }
}

/// A count such as `1000000`, `1e9`, `250M`, `2G` (decimal suffixes K, M, G, T).
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1e3),
        Some('M' | 'm') => (&t[..t.len() - 1], 1e6),
        Some('G' | 'g') => (&t[..t.len() - 1], 1e9),
        Some('T' | 't') => (&t[..t.len() - 1], 1e12),
        _ => (&t[..], 1.0),
    };
    if let Ok(v) = num.parse::<u64>() {
        return v
            .checked_mul(mult as u64)
            .ok_or_else(|| format!("{s}: too large"));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s}: not a count (examples: 1000000, 1e9, 250M)"))?;
    let v = v * mult;
    if !(0.0..1.8e19).contains(&v) || v.fract() != 0.0 {
        return Err(format!("{s}: not a whole, non-negative count"));
    }
    Ok(v as u64)
}

/// A size in bytes such as `4096`, `512K`, `1M`, `1MiB`, `2G` (binary multiples): the
/// grammar of every size the `bam` command and the device strings take.
pub fn parse_size(s: &str) -> Result<u64, String> {
    bam::storage::parse_size(s).map_err(|e| e.to_string())
}

/// A progress bar over `total` units (`bytes`: shown as sizes and rates), drawn on
/// stderr when it is a terminal (hidden in logs).
pub fn progress(total: u64, what: &str, bytes: bool) -> ProgressBar {
    let pb = ProgressBar::new(total);
    let tmpl = if bytes {
        "{msg:>12} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
    } else {
        "{msg:>12} [{bar:40}] {human_pos}/{human_len} {per_sec} eta {eta}"
    };
    if let Ok(st) = ProgressStyle::with_template(tmpl) {
        pb.set_style(st.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}

/// Times of `runs` repetitions of `f` (seconds), each after `prepare` (untimed).
pub fn time_runs<P, F>(runs: u32, mut prepare: P, mut f: F) -> anyhow::Result<Vec<f64>>
where
    P: FnMut() -> anyhow::Result<()>,
    F: FnMut() -> anyhow::Result<()>,
{
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        prepare()?;
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(times)
}

/// Times of `runs` raw zero-copy reads (the `zc_read` kernel of `zero_copy.cuh`, which the
/// example's `module` includes) of `parts` laid one after the other, 16-byte aligned, in
/// pinned host memory: the PCIe limit of any reader of host-resident data.
pub fn zero_copy_times(
    gpu: &std::sync::Arc<bam::Gpu>,
    module: &bam::Module,
    parts: &[&[u8]],
    runs: u32,
) -> anyhow::Result<Vec<f64>> {
    let total: usize = parts.iter().map(|p| p.len().next_multiple_of(16)).sum();
    let mut pinned = bam::cuda::PinnedBuffer::new(gpu, total.max(16))?;
    let mut off = 0;
    for p in parts {
        pinned.write(off, p)?;
        off += p.len().next_multiple_of(16);
    }
    let sink = bam::cuda::DeviceBuffer::zeroed(gpu, 8)?;
    let stream = gpu.stream()?;
    let words = pinned.len() as u64 / 16;
    time_runs(
        runs,
        || Ok(()),
        || {
            let a = (pinned.dev_ptr(), words, sink.ptr());
            // SAFETY: zc_read(const uint4*, uint64_t, unsigned long long*); the pinned
            // buffer and the sink outlive the synchronisation.
            unsafe { module.launch(&stream, "zc_read", gpu.sms * 4, 512, 0, &a)? };
            gpu.sync_timeout(&stream, std::time::Duration::from_secs(120))?;
            Ok(())
        },
    )
}

/// The smallest of `times` (`f64::NAN` when empty).
pub fn best(times: &[f64]) -> f64 {
    times.iter().copied().fold(f64::NAN, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_count("250M"), Ok(250_000_000));
        assert_eq!(parse_count("1_000"), Ok(1000));
        assert_eq!(parse_count("2.5K"), Ok(2500));
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("-3").is_err());
        assert!(parse_count("lots").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("1.5M").is_err());
        assert!(parse_size("99999999999G").is_err());
    }

    #[test]
    fn best_of_runs() {
        assert_eq!(best(&[3.0, 1.0, 2.0]), 1.0);
        assert!(best(&[]).is_nan());
        let mut n = 0;
        let t = time_runs(
            3,
            || Ok(()),
            || {
                n += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!((t.len(), n), (3, 3));
    }
}
