//! The flags of `bam bench` without a subcommand (the raw I/O benchmark, on one GPU or
//! several) and what they decide before any GPU work: the device to open, the I/O
//! layer's shape and the jobs of the sweep.

use bam::io::IoConfig;
use bam::storage::GpuDevice;
use bam_bench::raw::{Job, Rw};
use std::path::PathBuf;
use std::time::Duration;

/// A comma-separated list of counts of at least 1 (`1024,65536`): one job per value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts(pub Vec<u32>);

impl std::str::FromStr for Counts {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(|x| match x.trim().parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(format!("`{x}` is not a whole number from 1 to 2^32 - 1")),
            })
            .collect::<Result<_, _>>()
            .map(Counts)
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&v.join(","))
    }
}

impl Counts {
    fn max(&self) -> u32 {
        self.0.iter().copied().max().unwrap_or(1)
    }
}

/// `--bs`: a power of two from 512 to 1M, in the size grammar of every size flag.
fn parse_bs(s: &str) -> Result<u32, String> {
    let n = bam_nvme::device::parse_size(s)?;
    if !(512..=(1 << 20)).contains(&n) || !n.is_power_of_two() {
        return Err(format!(
            "{n} bytes: a power of two from 512 to 1M (512, 4K, 64K, 1M)"
        ));
    }
    Ok(n as u32)
}

/// `--rw`.
fn parse_rw(s: &str) -> Result<Rw, String> {
    s.parse()
}

/// `--runtime`: seconds, more than 0.
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= 1e6 => Ok(x),
        _ => Err("a number of seconds above 0 (e.g. 3, 0.5)".into()),
    }
}

/// Arguments of `bam bench` (the raw I/O benchmark).
#[derive(clap::Args, Clone, Debug)]
pub struct IoArgs {
    /// Device GPU threads drive: `sim[:PRESET][,ssds=N][,media=hbm|host|file:PATH][,capacity=SIZE]`
    /// (the simulated array; presets: ideal, optane-p5800x, samsung-980pro, pm1743),
    /// `hostctl[:ssds=N][,capacity=SIZE][,lba=BYTES][,media=ram|file:PATH][,workers=N]` (the
    /// controller model on CPU threads, across PCIe),
    /// `file:PATH[,PATH...][,direct][,rw][,size=SIZE][,workers=N]` (files or block devices
    /// through io_uring), or `kmod:/dev/bam-nvme0[,...]` (real SSDs).
    #[arg(long, value_name = "DEV", default_value = "sim")]
    pub device: String,
    /// Access pattern: randread, randwrite, read, write or randrw
    #[arg(long, value_name = "PATTERN", default_value = "randread", value_parser = parse_rw)]
    pub rw: Rw,
    /// Percentage of reads for randrw (0 to 100)
    #[arg(long, value_name = "PCT", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub rwmix: u32,
    /// Bytes per I/O: a power of two from 512 to 1M (binary units: 4K, 64K, 1M)
    #[arg(long, value_name = "BYTES", default_value = "512", value_parser = parse_bs)]
    pub bs: u32,
    /// GPU threads, each with one I/O in flight (comma list = sweep)
    #[arg(long, value_name = "N,...", default_value = "65536")]
    pub threads: Counts,
    /// I/O queues per SSD (comma list = sweep; the array gets the largest)
    #[arg(long, value_name = "N,...", default_value = "128")]
    pub queues: Counts,
    /// Entries per queue (2 to 65536)
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(2..=65536))]
    pub qdepth: u32,
    /// Number of SSDs (overrides `ssds=` of --device; comma list = sweep)
    #[arg(long, value_name = "N,...")]
    pub ssds: Option<Counts>,
    /// Run time per job in seconds
    #[arg(long, value_name = "SECS", default_value_t = 3.0, value_parser = parse_seconds)]
    pub runtime: f64,
    /// I/Os per thread instead of a run time
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ios: Option<u64>,
    /// Verify every read against the pattern; writes are read back
    #[arg(long)]
    pub verify: bool,
    /// Use the warp API (one request per warp)
    #[arg(long)]
    pub warp: bool,
    /// Also measure the raw limits in the same run: GPU random reads of the same block size
    /// from the array's host media (with `media=host`: every SSD's whole medium, the span the
    /// jobs read) and from 1 GiB of HBM
    #[arg(long)]
    pub baseline: bool,
    /// SMs reserved for the simulated controllers
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub sim_sms: u32,
    /// Timeout of every GPU-side wait, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Threads per block (0 = up to 128). 1 puts every thread in its own warp, so that
    /// the outstanding I/O count stays at --threads (model checks)
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub threads_per_block: u32,
    /// Also write the JSON report to FILE
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also draw IOPS and latency against the sweep (threads, queues or SSDs) as an SVG
    /// to FILE (`bam plot REPORT.json` draws one from a saved report)
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// GPUs (CUDA ordinals, `0,1`). With several, every job runs on the first GPU alone,
    /// then on all of them at once (the same job on each, started together), and the
    /// report gives per-GPU and total IOPS and the ratio to one GPU (docs/multi-gpu.md)
    #[arg(long, value_name = "N,...", default_value = "0", value_parser = parse_gpu_list)]
    pub gpus: GpuList,
    /// With several --gpus: `shared` (one backend serves every GPU's queue pairs on the
    /// same controllers; a simulated array runs on the first GPU and serves the others
    /// through peer access) or `private` (each GPU gets its own simulated or modelled
    /// array: per-GPU scaling of the I/O stack; not for kmod:)
    #[arg(long, value_name = "MODE", default_value = "shared", value_parser = ["shared", "private"])]
    pub sharing: String,
    /// With several --gpus: also run the kernel suite's gather ported to bam::array<u64>,
    /// data-parallel (each GPU its own cache over the same SSDs, a read-only array of the
    /// same data, its share of the reads), on warm caches (array = half a cache) and
    /// cold ones (array = 8 caches), against the first GPU doing all the reads (needs
    /// --sharing shared)
    #[arg(long)]
    pub gather: bool,
    /// Random reads of each cold --gather run (the warm runs read 64 times more)
    #[arg(long, value_name = "N", default_value_t = 1 << 25,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub gather_reads: u64,
}

/// `--gpus`: distinct CUDA ordinals, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuList(pub Vec<usize>);

impl std::ops::Deref for GpuList {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.0
    }
}

fn parse_gpu_list(s: &str) -> Result<GpuList, String> {
    bam::storage::parse_gpus(s)
        .map(GpuList)
        .map_err(|e| e.to_string())
}

impl IoArgs {
    /// Checks what the flags cannot check one by one, before any GPU work: the device string,
    /// `--ssds` against it, `--verify` against the backend. Returns the device to open.
    pub fn check(&self) -> Result<GpuDevice, String> {
        let mut dev: GpuDevice = crate::device::parse_gpu(&self.device)?;
        dev.set_sim_sms(self.sim_sms);
        // Verified reads check data nobody wrote against the pattern: the media get it
        // first (a media file the user named is written over only then).
        if self.verify {
            dev.set_fill_pattern(true);
        }
        let ssds = self.ssds.as_ref().map_or(dev.ssds(), Counts::max);
        dev.set_ssds(ssds).map_err(|e| format!("--ssds: {e}"))?;
        if matches!(dev, GpuDevice::Kmod { .. })
            && self.verify
            && !matches!(self.rw, Rw::RandWrite | Rw::Write)
        {
            return Err(
            "--verify with reads needs media that hold the verification pattern (sim:, hostctl:); \
             on real SSDs verify writes (--rw randwrite --verify reads them back)"
                .into(),
        );
        }
        if self.gpus.len() > 1 {
            if self.sharing == "private" && matches!(dev, GpuDevice::Kmod { .. }) {
                return Err(
                "--sharing private gives each GPU its own array; real SSDs (kmod:) can only be \
                 shared: use --sharing shared"
                    .into(),
            );
            }
            if self.gather && self.sharing == "private" {
                return Err(
                    "--gather reads one array's data from every GPU: use --sharing shared".into(),
                );
            }
            if self.plot.is_some() {
                return Err(
                    "--plot draws single-GPU sweeps; with several --gpus use --output and \
                        scripts/plot_multi_gpu.py"
                        .into(),
                );
            }
        } else if self.gather {
            return Err("--gather compares GPUs: give several --gpus (e.g. --gpus 0,1)".into());
        }
        for (flag, path) in [("--output", &self.output), ("--plot", &self.plot)] {
            if let Some(dir) = path.as_ref().and_then(|p| p.parent()) {
                if !dir.as_os_str().is_empty() && !dir.is_dir() {
                    return Err(format!(
                        "{flag} {}: no directory {}",
                        path.as_ref()
                            .map_or(String::new(), |p| p.display().to_string()),
                        dir.display()
                    ));
                }
            }
        }
        Ok(dev)
    }

    /// The I/O layer the jobs need.
    pub fn io_config(&self) -> IoConfig {
        let max_threads = self.threads.max();
        IoConfig {
            queues: self.queues.max(),
            depth: self.qdepth,
            slot_bytes: (self.bs as u64).max(512),
            nslots: if self.warp {
                max_threads.div_ceil(32)
            } else {
                max_threads.div_ceil(128) * 128
            },
            timeout: Duration::from_millis(self.timeout_ms),
            queue_scratch_bytes: 0,
        }
    }

    /// The SSD counts of the sweep: `--ssds`, else the device's own.
    pub fn ssd_counts(&self, dev: &GpuDevice) -> Vec<u32> {
        self.ssds
            .as_ref()
            .map_or_else(|| vec![dev.ssds()], |s| s.0.clone())
    }

    /// The number of jobs of the sweep on `dev`.
    pub fn job_count(&self, dev: &GpuDevice) -> usize {
        self.ssd_counts(dev).len() * self.queues.0.len() * self.threads.0.len()
    }

    /// The job at one point of the sweeps (`index` seeds it).
    pub fn job(&self, threads: u32, queues: u32, ssds: u32, index: usize) -> Job {
        Job {
            rw: self.rw,
            rwmix_read: self.rwmix,
            bs: self.bs,
            threads,
            queues,
            ssds,
            runtime: Duration::from_secs_f64(self.runtime),
            ios_per_thread: self.ios,
            verify: self.verify,
            gen: if matches!(self.rw, Rw::RandRead | Rw::Read) {
                0
            } else {
                1
            },
            warp_io: self.warp,
            seed: 0x5eed ^ index as u64,
            span_lbas: 0,
            threads_per_block: self.threads_per_block,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values() {
        assert_eq!(parse_bs("512"), Ok(512));
        assert_eq!(parse_bs("4k"), Ok(4096));
        assert_eq!(parse_bs("4KiB"), Ok(4096));
        assert_eq!(parse_bs("1M"), Ok(1 << 20));
        for bad in ["3", "256", "2M", "3000", "30000000000000G", "4KB"] {
            assert!(parse_bs(bad).is_err(), "{bad}");
        }
        assert_eq!("1,2, 3".parse::<Counts>(), Ok(Counts(vec![1, 2, 3])));
        assert!("0".parse::<Counts>().is_err());
        assert!("1,,2".parse::<Counts>().is_err());
        assert!(parse_rw("foo").is_err());
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("nan").is_err());
        assert_eq!(parse_gpu_list("0,1"), Ok(GpuList(vec![0, 1])));
        assert!(parse_gpu_list("1,1").is_err());
        assert!(parse_gpu_list("x").is_err());
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
    }
}
