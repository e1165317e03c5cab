//! Device strings for the GPU path: which backend GPU threads drive, and how to build it.
//!
//! | form | backend |
//! |---|---|
//! | `sim[:PRESET][,ssds=N][,media=hbm\|host\|file:PATH][,capacity=SIZE]` | the simulated SSD array on the GPU ([`crate::sim`]) |
//! | `hostctl[:ssds=N][,capacity=SIZE][,lba=BYTES][,media=ram\|file:PATH][,workers=N]` | the controller model on CPU threads, serving GPU-resident queues across PCIe ([`crate::hostctl`]) |
//! | `kmod:/dev/bam-nvme0[,/dev/bam-nvme1,...]` (or PCI addresses) | real SSDs bound to the bam kernel module ([`crate::kmod`]) |
//!
//! `model:` and `vfio:` name controllers for the CPU-side commands (`bam info`, `read`,
//! `write`, `load`); GPU threads cannot reach them, and parsing one here says so.
//! Sizes take binary suffixes (`K`, `M`, `G`, `T`).
//!
//! ```
//! use bam::device::GpuDevice;
//! let d: GpuDevice = "hostctl:ssds=2,capacity=64M".parse().unwrap();
//! assert_eq!(d.ssds(), 2);
//! assert!("vfio:0000:01:00.0".parse::<GpuDevice>().unwrap_err().to_string().contains("hostctl"));
//! ```

use crate::error::{Error, Result};
use crate::hostctl::{HostCtlArray, HostCtlConfig, HostMedia};
use crate::io::IoConfig;
use crate::kmod::{KmodArray, KmodConfig};
use crate::presets::DriveProfile;
use crate::sim::{Media, SimArray, SimConfig};
use crate::storage::Storage;
use crate::Gpu;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The forms a GPU device string takes, for messages.
pub const GPU_DEVICE_FORMS: &str =
    "sim[:PRESET][,ssds=N][,media=hbm|host|file:PATH][,capacity=SIZE], \
     hostctl[:ssds=N][,capacity=SIZE][,lba=BYTES][,media=ram|file:PATH][,workers=N], \
     or kmod:/dev/bam-nvme0[,/dev/bam-nvme1,...]";

/// A parsed GPU device string.
#[derive(Clone, Debug, PartialEq)]
pub enum GpuDevice {
    /// The simulated SSD array.
    Sim {
        /// Performance model of every SSD.
        model: DriveProfile,
        /// SSDs.
        ssds: u32,
        /// Where the data lives.
        media: Media,
        /// Bytes per SSD.
        capacity: u64,
    },
    /// Controller models on CPU threads.
    HostCtl {
        /// SSDs.
        ssds: u32,
        /// Bytes per SSD.
        capacity: u64,
        /// Logical block size.
        lba: u32,
        /// Where the data lives.
        media: HostMedia,
        /// Serving threads.
        workers: u32,
    },
    /// Real controllers bound to the kernel module.
    Kmod {
        /// Device nodes or PCI addresses.
        devices: Vec<String>,
    },
}

/// What the I/O layer should look like, whatever the backend.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Queue pairs per SSD.
    pub queues: u32,
    /// Entries per queue.
    pub depth: u32,
    /// Bytes per buffer slot.
    pub slot_bytes: u64,
    /// Buffer slots.
    pub nslots: u32,
    /// Bound of every GPU-side wait.
    pub timeout: Duration,
    /// SMs for the simulated controllers (sim only).
    pub sim_sms: u32,
    /// Fill simulated or modelled media with the verification pattern.
    pub fill_pattern: bool,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            queues: 1,
            depth: 1024,
            slot_bytes: 4096,
            nslots: 1024,
            timeout: Duration::from_secs(2),
            sim_sms: 16,
            fill_pattern: true,
        }
    }
}

fn bad<T>(s: String) -> Result<T> {
    Err(Error::InvalidArgument(s))
}

/// Parses a size with a binary suffix (`512`, `4K`, `64M`, `1G`, `2GiB`, `1T`): the
/// grammar of every `--device` and size flag (`bam_nvme::device::parse_size`).
pub fn parse_size(s: &str) -> Result<u64> {
    bam_nvme::device::parse_size(s).map_err(|e| Error::InvalidArgument(format!("`{s}`: {e}")))
}

fn parse_count(key: &str, v: &str, max: u32) -> Result<u32> {
    match v.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => bad(format!("{key}={v}: expected a number from 1 to {max}")),
    }
}

fn parse_sim(rest: &str) -> Result<GpuDevice> {
    let (mut model, mut ssds, mut media, mut capacity) =
        (DriveProfile::ideal(), 1, Media::Hbm, 1u64 << 30);
    for (i, part) in rest.split(',').filter(|p| !p.is_empty()).enumerate() {
        match part.split_once('=') {
            Some(("ssds", v)) => ssds = parse_count("ssds", v, 1024)?,
            Some(("media", v)) => {
                media = match v {
                    "hbm" | "gpu" => Media::Hbm,
                    "host" => Media::Host,
                    f if f.starts_with("file:") && f.len() > 5 => {
                        Media::File(PathBuf::from(&f[5..]))
                    }
                    _ => return bad(format!("media={v}: hbm, host or file:PATH")),
                }
            }
            Some(("capacity", v)) => capacity = parse_size(v)?,
            None if i == 0 => {
                model = DriveProfile::preset(part).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "unknown preset `{part}` (known: {})",
                        DriveProfile::PRESETS.join(", ")
                    ))
                })?
            }
            _ => {
                return bad(format!(
                    "unknown sim option `{part}` (ssds=N, media=hbm|host|file:PATH, capacity=SIZE)"
                ))
            }
        }
    }
    if capacity == 0 {
        return bad("capacity must not be zero".into());
    }
    Ok(GpuDevice::Sim {
        model,
        ssds,
        media,
        capacity,
    })
}

fn parse_hostctl(rest: &str) -> Result<GpuDevice> {
    let (mut ssds, mut capacity, mut lba, mut media, mut workers) =
        (1, 256u64 << 20, 512u32, HostMedia::Ram, 4);
    for part in rest.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some(("ssds", v)) => ssds = parse_count("ssds", v, 64)?,
            Some(("workers", v)) => workers = parse_count("workers", v, 256)?,
            Some(("capacity", v)) => capacity = parse_size(v)?,
            Some(("lba", v)) => {
                let n = parse_size(v)?;
                if !n.is_power_of_two() || !(512..=65536).contains(&n) {
                    return bad(format!("lba={v}: a power of two from 512 to 64K"));
                }
                lba = n as u32;
            }
            Some(("media", v)) => {
                media = match v {
                    "ram" => HostMedia::Ram,
                    f if f.starts_with("file:") && f.len() > 5 => {
                        HostMedia::File(PathBuf::from(&f[5..]))
                    }
                    _ => return bad(format!("media={v}: ram or file:PATH")),
                }
            }
            _ => {
                return bad(format!(
                    "unknown hostctl option `{part}` (ssds=N, capacity=SIZE, lba=BYTES, media=ram|file:PATH, workers=N)"
                ))
            }
        }
    }
    if capacity < lba as u64 {
        return bad(format!("capacity {capacity} holds no {lba}-byte block"));
    }
    Ok(GpuDevice::HostCtl {
        ssds,
        capacity,
        lba,
        media,
        workers,
    })
}

impl FromStr for GpuDevice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        match kind {
            "sim" => parse_sim(rest),
            "hostctl" => parse_hostctl(rest),
            "kmod" => {
                let devices: Vec<String> = rest
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(String::from)
                    .collect();
                if devices.is_empty() {
                    return bad("kmod: needs the module's device nodes, e.g. kmod:/dev/bam-nvme0,/dev/bam-nvme1".into());
                }
                // Each one as the CPU-side grammar takes it (a node, or a PCI address).
                for d in &devices {
                    if !d.starts_with('/') {
                        bam_nvme::device::parse_bdf(d).map_err(|e| {
                            Error::InvalidArgument(format!(
                                "kmod:{d}: {e} (or a /dev/bam-nvmeN node)"
                            ))
                        })?;
                    }
                }
                Ok(GpuDevice::Kmod { devices })
            }
            "model" | "vfio" => {
                // A malformed one gets the CPU-side grammar's precise message first.
                s.parse::<bam_nvme::device::DeviceSpec>()
                    .map_err(|e| Error::InvalidArgument(e.0))?;
                bad(format!(
                "`{s}` is a controller for the CPU-side commands (info, read, write, load); GPU threads \
                 cannot reach it{}. For the GPU path use {GPU_DEVICE_FORMS}",
                if kind == "vfio" {
                    ": vfio-pci cannot map GPU memory for the controller's DMA (bind it to bam_nvme and use kmod:)"
                } else {
                    " (the same model serves GPU queues as hostctl:)"
                }
            ))
            }
            "" => bad(format!("empty device string; use {GPU_DEVICE_FORMS}")),
            other => bad(format!(
                "unknown device kind `{other}`; use {GPU_DEVICE_FORMS}"
            )),
        }
    }
}

impl GpuDevice {
    /// SSDs (controllers) the device string names.
    pub fn ssds(&self) -> u32 {
        match self {
            GpuDevice::Sim { ssds, .. } | GpuDevice::HostCtl { ssds, .. } => *ssds,
            GpuDevice::Kmod { devices } => devices.len() as u32,
        }
    }

    /// Sets the SSD count (simulated and modelled arrays only).
    pub fn set_ssds(&mut self, n: u32) -> Result<()> {
        match self {
            GpuDevice::Sim { ssds, .. } | GpuDevice::HostCtl { ssds, .. } => {
                *ssds = n;
                Ok(())
            }
            GpuDevice::Kmod { devices } if devices.len() as u32 == n => Ok(()),
            GpuDevice::Kmod { devices } => bad(format!(
                "kmod: names {} controllers; list the ones to use instead of --ssds {n}",
                devices.len()
            )),
        }
    }

    /// The performance model the SSDs follow (simulated arrays only).
    pub fn model(&self) -> Option<&DriveProfile> {
        match self {
            GpuDevice::Sim { model, .. } => Some(model),
            _ => None,
        }
    }

    /// The simulated array's configuration for `shape` (None for other backends).
    pub fn sim_config(&self, shape: &Shape) -> Option<SimConfig> {
        let GpuDevice::Sim {
            model,
            ssds,
            media,
            capacity,
        } = self
        else {
            return None;
        };
        let mut c = SimConfig::new(model.clone());
        c.ssds = *ssds;
        c.media = media.clone();
        c.capacity_bytes = *capacity;
        c.queues = shape.queues;
        c.depth = shape.depth;
        c.sim_sms = shape.sim_sms;
        c.timeout = shape.timeout;
        c.slot_bytes = shape.slot_bytes;
        c.nslots = shape.nslots;
        c.fill_pattern = shape.fill_pattern;
        Some(c)
    }

    /// Builds the backend with the I/O layer of `shape`.
    pub fn open(&self, gpu: &Arc<Gpu>, shape: &Shape) -> Result<Box<dyn Storage>> {
        self.open_on(std::slice::from_ref(gpu), shape)
    }

    /// Builds the backend once, serving every GPU of `gpus` (one I/O layer each with the
    /// queues of `shape`, over the same controllers: [`Storage::ios`]). A simulated
    /// array runs its controllers on the first GPU and serves the others through peer
    /// access.
    pub fn open_on(&self, gpus: &[Arc<Gpu>], shape: &Shape) -> Result<Box<dyn Storage>> {
        let io = IoConfig {
            queues: shape.queues,
            depth: shape.depth,
            slot_bytes: shape.slot_bytes,
            nslots: shape.nslots,
            timeout: shape.timeout,
            queue_scratch_bytes: 0,
        };
        Ok(match self {
            GpuDevice::Sim { .. } => {
                let c = self.sim_config(shape).expect("a sim device");
                Box::new(SimArray::on_gpus(gpus, c)?)
            }
            GpuDevice::HostCtl {
                ssds,
                capacity,
                lba,
                media,
                workers,
            } => Box::new(HostCtlArray::on_gpus(
                gpus,
                HostCtlConfig {
                    ssds: *ssds,
                    capacity_bytes: *capacity,
                    lba_size: *lba,
                    media: media.clone(),
                    workers: *workers,
                    io,
                    fill_pattern: shape.fill_pattern,
                    ..HostCtlConfig::new()
                },
            )?),
            GpuDevice::Kmod { devices } => Box::new(KmodArray::on_gpus(
                gpus,
                KmodConfig {
                    devices: devices.clone(),
                    io,
                },
            )?),
        })
    }
}

/// Parses a list of GPU ordinals (`0,1`): distinct, in the order given.
///
/// ```
/// assert_eq!(bam::device::parse_gpus("1,0").unwrap(), vec![1, 0]);
/// assert!(bam::device::parse_gpus("0,0").is_err());
/// ```
pub fn parse_gpus(s: &str) -> Result<Vec<usize>> {
    let mut out: Vec<usize> = Vec::new();
    for part in s.split(',') {
        let g: usize = part.trim().parse().map_err(|_| {
            Error::InvalidArgument(format!(
                "`{part}` in `{s}` is not a GPU ordinal (0, 1, ...)"
            ))
        })?;
        if out.contains(&g) {
            return bad(format!("GPU {g} is listed twice in `{s}`"));
        }
        out.push(g);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<GpuDevice> {
        s.parse()
    }

    #[test]
    fn sim_strings() {
        let d = p("sim").unwrap();
        assert_eq!(d.ssds(), 1);
        assert_eq!(d.model().unwrap().name, "ideal");
        let d = p("sim:optane-p5800x,ssds=8,media=host,capacity=2G").unwrap();
        let GpuDevice::Sim {
            model,
            ssds,
            media,
            capacity,
        } = d
        else {
            panic!("not sim")
        };
        assert_eq!(
            (model.name.as_str(), ssds, media, capacity),
            ("optane-p5800x", 8, Media::Host, 2 << 30)
        );
        assert_eq!(
            p("sim:ideal,media=file:/tmp/x")
                .unwrap()
                .sim_config(&Shape::default())
                .unwrap()
                .media,
            Media::File("/tmp/x".into())
        );
        for s in [
            "sim:nope",
            "sim:ideal,ssds=0",
            "sim:ideal,media=x",
            "sim:ideal,capacity=1Q",
            "sim:ideal,foo=1",
        ] {
            assert!(p(s).is_err(), "{s}");
        }
    }

    #[test]
    fn hostctl_and_kmod_strings() {
        let d = p("hostctl:ssds=2,capacity=64M,lba=4K,workers=8,media=file:/tmp/m").unwrap();
        assert_eq!(
            d,
            GpuDevice::HostCtl {
                ssds: 2,
                capacity: 64 << 20,
                lba: 4096,
                media: HostMedia::File("/tmp/m".into()),
                workers: 8
            }
        );
        assert_eq!(p("hostctl").unwrap().ssds(), 1);
        for s in [
            "hostctl:lba=1000",
            "hostctl:workers=0",
            "hostctl:capacity=100",
            "hostctl:x",
        ] {
            assert!(p(s).is_err(), "{s}");
        }
        let mut d = p("kmod:/dev/bam-nvme0,/dev/bam-nvme1").unwrap();
        assert_eq!(d.ssds(), 2);
        assert!(d.set_ssds(1).is_err());
        assert!(d.set_ssds(2).is_ok());
        assert!(p("kmod:").is_err());
        assert!(p("kmod:0000:41:00.0,0000:42:00.0").is_ok());
        assert!(p("kmod:bogus").is_err());
    }

    #[test]
    fn cpu_side_devices_say_why_not() {
        let e = p("vfio:0000:01:00.0").unwrap_err().to_string();
        assert!(
            e.contains("cannot map GPU memory") && e.contains("kmod:"),
            "{e}"
        );
        let e = p("model:ram:1G").unwrap_err().to_string();
        assert!(e.contains("hostctl"), "{e}");
        let e = p("model:ram:1GB").unwrap_err().to_string();
        assert!(e.contains("binary"), "{e}");
        assert!(p("nvme:x")
            .unwrap_err()
            .to_string()
            .contains("unknown device kind"));
        assert!(p("").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("2T").unwrap(), 2 << 40);
        assert!(parse_size("30000000000000G").is_err());
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert!(parse_size("4KB").is_err());
    }
}
