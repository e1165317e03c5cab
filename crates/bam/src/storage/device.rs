//! Device strings for the GPU path: which backend GPU threads drive, parsed, printed and
//! opened here and nowhere else.
//!
//! | form | backend |
//! |---|---|
//! | `sim[:PRESET][,ssds=N][,media=hbm\|host\|file:PATH][,capacity=SIZE][,sms=N][,fill=pattern\|zero]` | the simulated SSD array on the GPU ([`crate::storage::sim`]) |
//! | `hostctl[:ssds=N][,capacity=SIZE][,lba=BYTES][,media=ram\|file:PATH][,workers=N][,fill=pattern\|zero]` | the controller model on CPU threads, serving GPU-resident queues across PCIe ([`crate::storage::hostctl`]) |
//! | `file:PATH[,PATH...][,direct\|buffered][,rw][,size=SIZE][,workers=N][,sms=N][,staging=SIZE][,fill=pattern\|zero]` | files and block devices, served by CPU threads through io_uring ([`crate::storage::file`]) |
//! | `kmod:/dev/bam-nvme0[,/dev/bam-nvme1,...]` (or PCI addresses) | real SSDs bound to the bam kernel module ([`crate::storage::kmod`]) |
//!
//! A `file:` path is one SSD of the array (several are striped); its bytes are the data.
//! It is opened read-only through the page cache unless `rw` (writes), `size=SIZE`
//! (create or grow the files to SIZE) or `fill=pattern` asks to write; `direct` reads
//! with `O_DIRECT`. `workers` is the number of CPU service threads (4), `sms` the SMs
//! the forwarder kernel keeps (by default enough for the queue pairs, at least 4).
//!
//! `sms` is the number of SMs the simulated controllers keep (16 by default); `fill` is
//! what fresh simulated or modelled media hold: zeros (the default) or the verification
//! pattern (`fill=pattern`, written over the whole capacity when the array is built, for
//! runs that check data nobody wrote). A simulated SSD holds 1 GiB unless `capacity=`
//! says otherwise, a modelled one 256 MiB. Sizes take binary suffixes (`K`,
//! `M`, `G`, `T`). A device string prints as it parses ([`std::fmt::Display`]), with the
//! options that differ from their defaults.
//!
//! ```
//! use bam::storage::GpuDevice;
//! let d: GpuDevice = "hostctl:ssds=2,capacity=64M".parse().unwrap();
//! assert_eq!(d.ssds(), 2);
//! assert_eq!(d.to_string(), "hostctl:ssds=2,capacity=64M");
//! assert_eq!(d.to_string().parse::<GpuDevice>().unwrap(), d);
//! ```

use crate::cuda::Gpu;
use crate::error::{Error, Result};
use crate::io::IoConfig;
use crate::storage::file::{FileArray, FileConfig, FileMode};
use crate::storage::hostctl::{HostCtlArray, HostCtlConfig, HostMedia};
use crate::storage::kmod::{KmodArray, KmodConfig};
use crate::storage::sim::{DriveProfile, Media, SimArray, SimConfig};
use crate::storage::Storage;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

/// The forms a GPU device string takes, for messages.
pub const GPU_DEVICE_FORMS: &str =
    "sim[:PRESET][,ssds=N][,media=hbm|host|file:PATH][,capacity=SIZE][,sms=N][,fill=pattern|zero], \
     hostctl[:ssds=N][,capacity=SIZE][,lba=BYTES][,media=ram|file:PATH][,workers=N][,fill=pattern|zero], \
     file:PATH[,PATH...][,direct|buffered][,rw][,size=SIZE][,workers=N][,sms=N][,staging=SIZE][,fill=pattern|zero], \
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
        /// SMs the controller kernel keeps.
        sms: u32,
        /// Fresh media hold the verification pattern (else zeros, the default).
        fill_pattern: bool,
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
        /// Fresh RAM media hold the verification pattern (else zeros, the default).
        fill_pattern: bool,
    },
    /// Files and block devices through io_uring.
    File {
        /// One per SSD.
        paths: Vec<PathBuf>,
        /// Page cache or `O_DIRECT`.
        mode: FileMode,
        /// Opened for writing.
        writable: bool,
        /// Create or grow the files to this size.
        size: Option<u64>,
        /// CPU service threads.
        workers: u32,
        /// SMs of the forwarder kernel.
        sms: u32,
        /// Pinned host memory for staging, shared by the queue pairs.
        staging: u64,
        /// Write the verification pattern over the files first.
        fill_pattern: bool,
    },
    /// Real controllers bound to the kernel module.
    Kmod {
        /// Device nodes or PCI addresses.
        devices: Vec<String>,
    },
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

/// Defaults of the options a device string may leave out.
const SIM_CAPACITY: u64 = 1 << 30;
const SIM_SMS: u32 = 16;
const HOSTCTL_CAPACITY: u64 = 256 << 20;
const HOSTCTL_LBA: u32 = 512;
const HOSTCTL_WORKERS: u32 = 4;
const FILE_WORKERS: u32 = crate::storage::file::DEFAULT_WORKERS;
const FILE_SMS: u32 = crate::storage::file::DEFAULT_SMS;
const FILE_STAGING: u64 = crate::storage::file::DEFAULT_STAGING;

fn parse_fill(v: &str) -> Result<bool> {
    match v {
        "pattern" => Ok(true),
        "zero" => Ok(false),
        _ => bad(format!("fill={v}: pattern or zero")),
    }
}

fn parse_sim(rest: &str) -> Result<GpuDevice> {
    let (mut model, mut ssds, mut media, mut capacity) =
        (DriveProfile::ideal(), 1, Media::Hbm, SIM_CAPACITY);
    let (mut sms, mut fill_pattern) = (SIM_SMS, false);
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
            Some(("sms", v)) => sms = parse_count("sms", v, 1024)?,
            Some(("fill", v)) => fill_pattern = parse_fill(v)?,
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
                    "unknown sim option `{part}` (ssds=N, media=hbm|host|file:PATH, capacity=SIZE, \
                     sms=N, fill=pattern|zero)"
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
        sms,
        fill_pattern,
    })
}

fn parse_hostctl(rest: &str) -> Result<GpuDevice> {
    let (mut ssds, mut capacity, mut lba, mut media, mut workers) = (
        1,
        HOSTCTL_CAPACITY,
        HOSTCTL_LBA,
        HostMedia::Ram,
        HOSTCTL_WORKERS,
    );
    let mut fill_pattern = false;
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
            Some(("fill", v)) => fill_pattern = parse_fill(v)?,
            _ => {
                return bad(format!(
                    "unknown hostctl option `{part}` (ssds=N, capacity=SIZE, lba=BYTES, \
                     media=ram|file:PATH, workers=N, fill=pattern|zero)"
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
        fill_pattern,
    })
}

fn parse_file(rest: &str) -> Result<GpuDevice> {
    let (mut paths, mut mode, mut writable, mut size) =
        (Vec::new(), FileMode::Buffered, false, None);
    let (mut workers, mut sms, mut fill_pattern) = (FILE_WORKERS, FILE_SMS, false);
    let mut staging = FILE_STAGING;
    for part in rest.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some(("size", v)) => {
                let n = parse_size(v)?;
                if n == 0 {
                    return bad("size=0: the files need room for one block".into());
                }
                size = Some(n)
            }
            Some(("workers", v)) => workers = parse_count("workers", v, 256)?,
            Some(("sms", v)) => sms = parse_count("sms", v, 64)?,
            Some(("staging", v)) => {
                staging = parse_size(v)?;
                if !(1 << 20..=64 << 30).contains(&staging) {
                    return bad(format!("staging={v}: from 1M to 64G of pinned host memory"));
                }
            }
            Some(("fill", v)) => fill_pattern = parse_fill(v)?,
            Some((k, _)) => {
                return bad(format!(
                    "unknown file option `{k}=` (size=SIZE, workers=N, sms=N, staging=SIZE, \
                     fill=pattern|zero)"
                ))
            }
            None => match part {
                "direct" => mode = FileMode::Direct,
                "buffered" => mode = FileMode::Buffered,
                "rw" => writable = true,
                path => paths.push(PathBuf::from(path)),
            },
        }
    }
    if paths.is_empty() {
        return bad(
            "file: needs at least one path, e.g. file:/data/edges.bin or file:/dev/nvme1n1,direct"
                .into(),
        );
    }
    Ok(GpuDevice::File {
        paths,
        mode,
        writable,
        size,
        workers,
        sms,
        staging,
        fill_pattern,
    })
}

fn parse_kmod(rest: &str) -> Result<GpuDevice> {
    let devices: Vec<String> = rest
        .split(',')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    if devices.is_empty() {
        return bad(
            "kmod: needs the module's device nodes, e.g. kmod:/dev/bam-nvme0,/dev/bam-nvme1".into(),
        );
    }
    // Each one a node, or a PCI address as the CPU-side grammar takes it.
    for d in &devices {
        if !d.starts_with('/') {
            bam_nvme::device::parse_bdf(d).map_err(|e| {
                Error::InvalidArgument(format!("kmod:{d}: {e} (or a /dev/bam-nvmeN node)"))
            })?;
        }
    }
    Ok(GpuDevice::Kmod { devices })
}

impl FromStr for GpuDevice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        match kind {
            "sim" => parse_sim(rest),
            "hostctl" => parse_hostctl(rest),
            "kmod" => parse_kmod(rest),
            "file" => parse_file(rest),
            "" => bad(format!("empty device string; use {GPU_DEVICE_FORMS}")),
            other => bad(format!(
                "unknown device kind `{other}`; use {GPU_DEVICE_FORMS}"
            )),
        }
    }
}

/// A size as the grammar writes it: the largest binary suffix that divides it.
fn size_text(n: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n != 0 && n.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", n >> shift);
        }
    }
    n.to_string()
}

impl fmt::Display for GpuDevice {
    /// The device string, with the options that differ from their defaults (it parses
    /// back to the same device when the model is a preset).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fill = |f: &mut fmt::Formatter<'_>, pattern: bool| {
            if pattern {
                write!(f, ",fill=pattern")
            } else {
                Ok(())
            }
        };
        match self {
            GpuDevice::Sim {
                model,
                ssds,
                media,
                capacity,
                sms,
                fill_pattern,
            } => {
                write!(f, "sim:{},ssds={ssds}", model.name)?;
                match media {
                    Media::Hbm => {}
                    Media::Host => write!(f, ",media=host")?,
                    Media::File(p) => write!(f, ",media=file:{}", p.display())?,
                }
                if *capacity != SIM_CAPACITY {
                    write!(f, ",capacity={}", size_text(*capacity))?;
                }
                if *sms != SIM_SMS {
                    write!(f, ",sms={sms}")?;
                }
                fill(f, *fill_pattern)
            }
            GpuDevice::HostCtl {
                ssds,
                capacity,
                lba,
                media,
                workers,
                fill_pattern,
            } => {
                write!(f, "hostctl:ssds={ssds}")?;
                if *capacity != HOSTCTL_CAPACITY {
                    write!(f, ",capacity={}", size_text(*capacity))?;
                }
                if *lba != HOSTCTL_LBA {
                    write!(f, ",lba={}", size_text(*lba as u64))?;
                }
                if let HostMedia::File(p) = media {
                    write!(f, ",media=file:{}", p.display())?;
                }
                if *workers != HOSTCTL_WORKERS {
                    write!(f, ",workers={workers}")?;
                }
                fill(f, *fill_pattern)
            }
            GpuDevice::File {
                paths,
                mode,
                writable,
                size,
                workers,
                sms,
                staging,
                fill_pattern,
            } => {
                let p: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                write!(f, "file:{}", p.join(","))?;
                if *mode == FileMode::Direct {
                    write!(f, ",direct")?;
                }
                if *writable {
                    write!(f, ",rw")?;
                }
                if let Some(n) = size {
                    write!(f, ",size={}", size_text(*n))?;
                }
                if *workers != FILE_WORKERS {
                    write!(f, ",workers={workers}")?;
                }
                if *sms != FILE_SMS {
                    write!(f, ",sms={sms}")?;
                }
                if *staging != FILE_STAGING {
                    write!(f, ",staging={}", size_text(*staging))?;
                }
                fill(f, *fill_pattern)
            }
            GpuDevice::Kmod { devices } => write!(f, "kmod:{}", devices.join(",")),
        }
    }
}

impl GpuDevice {
    /// SSDs (controllers) the device string names.
    pub fn ssds(&self) -> u32 {
        match self {
            GpuDevice::Sim { ssds, .. } | GpuDevice::HostCtl { ssds, .. } => *ssds,
            GpuDevice::File { paths, .. } => paths.len() as u32,
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
            GpuDevice::File { paths, .. } if paths.len() as u32 == n => Ok(()),
            GpuDevice::File { paths, .. } => bad(format!(
                "file: names {} files; list the ones to use instead of --ssds {n}",
                paths.len()
            )),
            GpuDevice::Kmod { devices } if devices.len() as u32 == n => Ok(()),
            GpuDevice::Kmod { devices } => bad(format!(
                "kmod: names {} controllers; list the ones to use instead of --ssds {n}",
                devices.len()
            )),
        }
    }

    /// Whether fresh media are filled with the verification pattern (simulated and
    /// modelled arrays; real SSDs hold what they hold).
    pub fn set_fill_pattern(&mut self, pattern: bool) {
        match self {
            GpuDevice::Sim { fill_pattern, .. }
            | GpuDevice::HostCtl { fill_pattern, .. }
            | GpuDevice::File { fill_pattern, .. } => *fill_pattern = pattern,
            GpuDevice::Kmod { .. } => {}
        }
    }

    /// Sets the SMs the simulated controllers keep (simulated arrays only; the others
    /// keep none).
    pub fn set_sim_sms(&mut self, n: u32) {
        if let GpuDevice::Sim { sms, .. } = self {
            *sms = n;
        }
    }

    /// The performance model the SSDs follow (simulated arrays only).
    pub fn model(&self) -> Option<&DriveProfile> {
        match self {
            GpuDevice::Sim { model, .. } => Some(model),
            _ => None,
        }
    }

    /// The media are a file the user named (simulated or modelled arrays).
    pub fn media_file(&self) -> Option<&std::path::Path> {
        match self {
            GpuDevice::Sim {
                media: Media::File(p),
                ..
            }
            | GpuDevice::HostCtl {
                media: HostMedia::File(p),
                ..
            } => Some(p),
            _ => None,
        }
    }

    /// Builds the backend with the I/O layer `io`.
    pub fn open(&self, gpu: &Arc<Gpu>, io: &IoConfig) -> Result<Box<dyn Storage>> {
        self.open_on(std::slice::from_ref(gpu), io)
    }

    /// Builds the backend once, serving every GPU of `gpus` (one I/O layer each with the
    /// queues of `io`, over the same controllers: [`Storage::ios`]). A simulated array
    /// runs its controllers on the first GPU and serves the others through peer access.
    pub fn open_on(&self, gpus: &[Arc<Gpu>], io: &IoConfig) -> Result<Box<dyn Storage>> {
        Ok(match self.clone() {
            GpuDevice::Sim {
                model,
                ssds,
                media,
                capacity,
                sms,
                fill_pattern,
            } => Box::new(SimArray::on_gpus(
                gpus,
                SimConfig {
                    ssds,
                    media,
                    capacity_bytes: capacity,
                    sim_sms: sms,
                    io: io.clone(),
                    fill_pattern,
                    ..SimConfig::new(model)
                },
            )?),
            GpuDevice::HostCtl {
                ssds,
                capacity,
                lba,
                media,
                workers,
                fill_pattern,
            } => Box::new(HostCtlArray::on_gpus(
                gpus,
                HostCtlConfig {
                    ssds,
                    capacity_bytes: capacity,
                    lba_size: lba,
                    media,
                    workers,
                    io: io.clone(),
                    fill_pattern,
                    ..HostCtlConfig::new()
                },
            )?),
            GpuDevice::File {
                paths,
                mode,
                writable,
                size,
                workers,
                sms,
                staging,
                fill_pattern,
            } => Box::new(FileArray::on_gpus(
                gpus,
                FileConfig {
                    mode,
                    writable,
                    size,
                    workers,
                    sms,
                    staging_bytes: staging,
                    fill_pattern,
                    io: io.clone(),
                    ..FileConfig::new(paths)
                },
            )?),
            GpuDevice::Kmod { devices } => Box::new(KmodArray::on_gpus(
                gpus,
                KmodConfig {
                    devices,
                    io: io.clone(),
                },
            )?),
        })
    }
}

/// Parses a list of GPU ordinals (`0,1`): distinct, in the order given.
///
/// ```
/// assert_eq!(bam::storage::parse_gpus("1,0").unwrap(), vec![1, 0]);
/// assert!(bam::storage::parse_gpus("0,0").is_err());
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
        let d = p("sim:optane-p5800x,ssds=8,media=host,capacity=2G,sms=8,fill=pattern").unwrap();
        let GpuDevice::Sim {
            model,
            ssds,
            media,
            capacity,
            sms,
            fill_pattern,
        } = d
        else {
            panic!("not sim")
        };
        assert_eq!(
            (
                model.name.as_str(),
                ssds,
                media,
                capacity,
                sms,
                fill_pattern
            ),
            ("optane-p5800x", 8, Media::Host, 2 << 30, 8, true)
        );
        assert_eq!(
            p("sim:ideal,media=file:/tmp/x").unwrap().media_file(),
            Some(std::path::Path::new("/tmp/x"))
        );
        for s in [
            "sim:nope",
            "sim:ideal,ssds=0",
            "sim:ideal,media=x",
            "sim:ideal,capacity=1Q",
            "sim:ideal,foo=1",
            "sim:ideal,sms=0",
            "sim:ideal,fill=ones",
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
                workers: 8,
                fill_pattern: false,
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
    fn file_strings() {
        let d =
            p("file:/data/a.bin,/data/b.bin,direct,rw,size=1G,workers=8,sms=3,staging=1G").unwrap();
        assert_eq!(
            d,
            GpuDevice::File {
                paths: vec!["/data/a.bin".into(), "/data/b.bin".into()],
                mode: FileMode::Direct,
                writable: true,
                size: Some(1 << 30),
                workers: 8,
                sms: 3,
                staging: 1 << 30,
                fill_pattern: false,
            }
        );
        assert_eq!(d.ssds(), 2);
        let d = p("file:/data/m.txt").unwrap();
        assert_eq!(d.to_string(), "file:/data/m.txt");
        for s in [
            "file:",
            "file:direct",
            "file:/a,size=0",
            "file:/a,workers=0",
            "file:/a,staging=4K",
            "file:/a,x=1",
        ] {
            assert!(p(s).is_err(), "{s}");
        }
    }

    /// What a device prints parses back to the same device; defaults are left out.
    #[test]
    fn strings_print_as_they_parse() {
        for (given, printed) in [
            ("sim", "sim:ideal,ssds=1"),
            ("sim:ideal,ssds=8,capacity=1G", "sim:ideal,ssds=8"),
            (
                "sim:optane-p5800x,media=host,capacity=3072M,sms=4,fill=pattern",
                "sim:optane-p5800x,ssds=1,media=host,capacity=3G,sms=4,fill=pattern",
            ),
            (
                "sim:ideal,media=file:/dev/shm/m",
                "sim:ideal,ssds=1,media=file:/dev/shm/m",
            ),
            ("hostctl", "hostctl:ssds=1"),
            (
                "hostctl:workers=8,lba=4096,capacity=1000K,media=file:/tmp/i,fill=pattern",
                "hostctl:ssds=1,capacity=1000K,lba=4K,media=file:/tmp/i,workers=8,fill=pattern",
            ),
            (
                "kmod:/dev/bam-nvme0,0000:41:00.0",
                "kmod:/dev/bam-nvme0,0000:41:00.0",
            ),
            (
                "file:/d/a,buffered,workers=4,size=2048M,fill=pattern",
                "file:/d/a,size=2G,fill=pattern",
            ),
            (
                "file:/d/a,staging=1024M,workers=8",
                "file:/d/a,workers=8,staging=1G",
            ),
        ] {
            let d = p(given).unwrap();
            assert_eq!(d.to_string(), printed, "{given}");
            assert_eq!(p(printed).unwrap(), d, "{printed}");
        }
    }

    /// The GPU grammar knows its own kinds only: a CPU-side controller string is an
    /// unknown kind here (the `bam` command adds the hint).
    #[test]
    fn other_kinds_are_unknown() {
        for s in ["vfio:0000:01:00.0", "model:ram:1G", "nvme:x"] {
            let e = p(s).unwrap_err().to_string();
            assert!(e.contains("unknown device kind"), "{s}: {e}");
        }
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
