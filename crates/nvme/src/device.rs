//! Device strings: which controller a CPU-side command talks to, and how to reach it.
//!
//! One grammar for every CPU-side `--device` of the `bam` command and for library users:
//! the forms that reach one controller from the CPU. (The GPU path has a grammar of its
//! own in the GPU runtime; the `bam` command tells a user who mixes them up which is
//! which.)
//!
//! | form | meaning |
//! |---|---|
//! | `model:PATH[,size=SIZE][,lba=BYTES]` | the in-process controller model, data in the model image PATH; `size=` creates PATH at SIZE if it is missing (without it a missing image is an error); `lba=` is the block size of a new image (default 512); an existing image keeps its geometry, and `size=`/`lba=`, when given, must match it |
//! | `model:ram:SIZE[,lba=BYTES]` | a throwaway controller model in RAM |
//! | `vfio:DDDD:BB:DD.F` or `vfio:BB:DD.F` | a PCI NVMe controller bound to `vfio-pci` (domain 0000 when omitted) |
//! | `kmod:/dev/bam-nvmeN` or `kmod:BDF` | a controller bound to the bam kernel module |
//!
//! Sizes are binary (`K`, `M`, `G`, `T`). PATH must not contain a comma.
//!
//! A model image is a file with a 4 KiB header (magic, format version, block size, block
//! count, checksum; [`crate::model::ImageHeader`]) and the blocks after it. It is locked
//! while open: one read-write opener, or any number of read-only ones
//! ([`DeviceSpec::open_transport_read_only`]). A raw disk image (no header) is refused;
//! import it with `bam load FILE --device model:NEW.img,size=SIZE`.

use crate::model::ModelConfig;
use crate::transport::{kmod::KmodTransport, vfio::VfioTransport};
use crate::{Result, Transport};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

/// The device used when `--device` is not given: an existing model image in the current
/// directory. It is never created implicitly; `model:./bam-model.img,size=1G` creates it.
pub const DEFAULT_DEVICE: &str = "model:./bam-model.img";

/// Block size of a model without `lba=`.
pub const DEFAULT_LBA_SIZE: u32 = 512;

/// The forms a device string can take, for messages.
pub const DEVICE_FORMS: &str =
    "model:PATH[,size=SIZE][,lba=BYTES], model:ram:SIZE, vfio:[DDDD:]BB:DD.F or kmod:/dev/bam-nvmeN";

/// A parsed device string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// A file-backed controller model.
    ModelFile {
        /// The image file.
        path: PathBuf,
        /// `size=`: create a missing image with this capacity; an existing one must have it.
        size: Option<u64>,
        /// `lba=`: the block size of a new image ([`DEFAULT_LBA_SIZE`] when not given);
        /// an existing one must have it.
        lba: Option<u32>,
    },
    /// A RAM-backed controller model.
    ModelRam {
        /// Capacity in bytes.
        size: u64,
        /// Logical block size.
        lba: u32,
    },
    /// A PCI function bound to vfio-pci.
    Vfio {
        /// Normalized address, `dddd:bb:dd.f` in lower case.
        bdf: String,
    },
    /// A controller bound to the bam kernel module.
    Kmod {
        /// Its character device.
        path: PathBuf,
    },
}

/// Why a device string was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeviceParseError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, DeviceParseError> {
    Err(DeviceParseError(msg.into()))
}

/// Parses a PCI address `dddd:bb:dd.f` or `bb:dd.f` and returns it normalized
/// ([`crate::pci::parse_bdf`]).
pub fn parse_bdf(s: &str) -> Result<String, DeviceParseError> {
    crate::pci::parse_bdf(s).map_err(DeviceParseError)
}

fn parse_lba_size(v: &str) -> Result<u32, DeviceParseError> {
    let n = parse_size(v).map_err(|e| DeviceParseError(format!("lba={v}: {e}")))?;
    if !n.is_power_of_two() || !(512..=65536).contains(&n) {
        return err(format!(
            "lba={v}: the block size must be a power of two from 512 to 65536 bytes"
        ));
    }
    Ok(n as u32)
}

fn parse_model_size(v: &str, key: &str) -> Result<u64, DeviceParseError> {
    let n = parse_size(v).map_err(|e| DeviceParseError(format!("{key}{v}: {e}")))?;
    if n == 0 {
        return err(format!("{key}{v}: the size must not be zero"));
    }
    Ok(n)
}

/// Parses `,key=value` options of a model device; returns (size, lba).
fn model_options(
    opts: &[&str],
    allow_size: bool,
) -> Result<(Option<u64>, Option<u32>), DeviceParseError> {
    let mut size = None;
    let mut lba = None;
    for opt in opts {
        let Some((k, v)) = opt.split_once('=') else {
            return err(format!(
                "model option '{opt}' is not key=value (options: size=SIZE, lba=BYTES)"
            ));
        };
        match k {
            "size" if allow_size => {
                if size.replace(parse_model_size(v, "size=")?).is_some() {
                    return err("size= is given twice");
                }
            }
            "lba" => {
                if lba.replace(parse_lba_size(v)?).is_some() {
                    return err("lba= is given twice");
                }
            }
            "size" => return err("model:ram:SIZE takes its size after 'ram:', not as size="),
            _ => {
                return err(format!(
                    "unknown model option '{k}' (options: size=SIZE, lba=BYTES)"
                ))
            }
        }
    }
    if let Some(size) = size {
        let block = lba.unwrap_or(DEFAULT_LBA_SIZE) as u64;
        if size % block != 0 {
            return err(format!(
                "size={size}: an image holds whole {block}-byte blocks; use a multiple of {block}"
            ));
        }
    }
    Ok((size, lba))
}

impl FromStr for DeviceSpec {
    type Err = DeviceParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return err("the device string is empty");
        }
        let guess = || {
            if s.starts_with("/dev/") {
                format!("; did you mean kmod:{s}?")
            } else if parse_bdf(s).is_ok() {
                format!("; did you mean vfio:{s}?")
            } else {
                format!("; did you mean model:{s}?")
            }
        };
        let Some((kind, rest)) = s.split_once(':') else {
            return err(format!("'{s}' has no transport prefix{}", guess()));
        };
        match kind {
            "model" => {
                let mut parts = rest.split(',');
                let head = parts.next().unwrap_or_default();
                let opts: Vec<&str> = parts.collect();
                if let Some(size) = head.strip_prefix("ram:") {
                    let size = parse_model_size(size, "ram:")?;
                    let (_, lba) = model_options(&opts, false)?;
                    Ok(DeviceSpec::ModelRam {
                        size,
                        lba: lba.unwrap_or(DEFAULT_LBA_SIZE),
                    })
                } else if head == "ram" {
                    err("model:ram needs a size, e.g. model:ram:1G")
                } else if head.is_empty() {
                    err("model: needs the path of an image file, e.g. model:./bam-model.img")
                } else {
                    let (size, lba) = model_options(&opts, true)?;
                    Ok(DeviceSpec::ModelFile {
                        path: PathBuf::from(head),
                        size,
                        lba,
                    })
                }
            }
            "vfio" => Ok(DeviceSpec::Vfio {
                bdf: parse_bdf(rest)?,
            }),
            "kmod" => {
                if rest.is_empty() {
                    return err("kmod: needs the module's device node, e.g. kmod:/dev/bam-nvme0");
                }
                if rest.contains(',') {
                    return err(format!(
                        "'{s}' names several controllers; a device string names one, e.g. kmod:{}",
                        rest.split(',').next().unwrap_or_default()
                    ));
                }
                Ok(DeviceSpec::Kmod {
                    path: PathBuf::from(rest),
                })
            }
            other => err(format!("unknown transport '{other}:'{}", guess())),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::ModelFile { path, .. } => write!(f, "model:{}", path.display()),
            DeviceSpec::ModelRam { size, .. } => write!(f, "model:ram:{size}"),
            DeviceSpec::Vfio { bdf } => write!(f, "vfio:{bdf}"),
            DeviceSpec::Kmod { path } => write!(f, "kmod:{}", path.display()),
        }
    }
}

impl DeviceSpec {
    /// The transport's name: `model`, `vfio` or `kmod`.
    pub fn transport(&self) -> &'static str {
        match self {
            DeviceSpec::ModelFile { .. } | DeviceSpec::ModelRam { .. } => "model",
            DeviceSpec::Vfio { .. } => "vfio",
            DeviceSpec::Kmod { .. } => "kmod",
        }
    }

    /// The controller model's configuration, for the model forms (`None` for hardware).
    /// `read_only` write-protects the namespace and opens an image read-only, under a
    /// shared lock.
    pub fn model_config(&self, read_only: bool) -> Option<ModelConfig> {
        let mut cfg = match self {
            DeviceSpec::ModelFile { path, size, lba } => {
                let mut cfg = ModelConfig::open_file(path.clone());
                cfg.lba_size = lba.unwrap_or(DEFAULT_LBA_SIZE);
                cfg.image.check_lba = lba.is_some();
                if let Some(size) = size {
                    cfg.capacity_bytes = *size;
                    cfg.image.create = true;
                    cfg.image.check_capacity = true;
                }
                cfg
            }
            DeviceSpec::ModelRam { size, lba } => {
                let mut cfg = ModelConfig::ram(*size);
                cfg.lba_size = *lba;
                cfg
            }
            DeviceSpec::Vfio { .. } | DeviceSpec::Kmod { .. } => return None,
        };
        cfg.read_only = read_only;
        Some(cfg)
    }

    /// Opens the transport to the device, for reading and writing. A model image is
    /// locked exclusively while the transport lives.
    pub fn open_transport(&self) -> Result<Arc<dyn Transport>> {
        self.open(false)
    }

    /// Opens the transport to the device for reading: a model's namespace is write
    /// protected (writes fail with Namespace Is Write Protected) and its image is opened
    /// read-only under a shared lock, so several readers can share it. Hardware is opened
    /// as by [`open_transport`](Self::open_transport).
    pub fn open_transport_read_only(&self) -> Result<Arc<dyn Transport>> {
        self.open(true)
    }

    fn open(&self, read_only: bool) -> Result<Arc<dyn Transport>> {
        if let Some(cfg) = self.model_config(read_only) {
            return cfg.build_transport();
        }
        Ok(match self {
            DeviceSpec::Vfio { bdf } => VfioTransport::open(bdf)?,
            DeviceSpec::Kmod { path } => KmodTransport::open(&path.to_string_lossy())?,
            DeviceSpec::ModelFile { .. } | DeviceSpec::ModelRam { .. } => {
                return Err(crate::Error::InvalidArgument(format!(
                    "{self}: no model configuration"
                )))
            }
        })
    }
}

/// Parses a size such as `4096`, `64K`, `512M`, `1G`, `2GiB` or `1T` (binary units).
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("the size is empty".into());
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    if digits.is_empty() {
        return Err("a size starts with a whole number (examples: 4096, 64K, 512M, 1G)".into());
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| "the size is too large".to_string())?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        "kb" | "mb" | "gb" | "tb" => {
            return Err(format!(
                "sizes are binary here; write {}{} or {}{}iB",
                digits,
                &suffix[..1].to_ascii_uppercase(),
                digits,
                &suffix[..1].to_ascii_uppercase()
            ))
        }
        _ => {
            return Err(format!(
                "unknown unit '{suffix}' (use K, M, G or T, binary)"
            ))
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| "the size is too large".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<DeviceSpec, DeviceParseError> {
        s.parse()
    }

    #[test]
    fn model_file() {
        assert_eq!(
            p("model:disk.img").unwrap(),
            DeviceSpec::ModelFile {
                path: "disk.img".into(),
                size: None,
                lba: None
            }
        );
        assert_eq!(
            p("model:/tmp/a b.img,size=64M,lba=4096").unwrap(),
            DeviceSpec::ModelFile {
                path: "/tmp/a b.img".into(),
                size: Some(64 << 20),
                lba: Some(4096)
            }
        );
        assert_eq!(
            p("model:x,lba=4K,size=2G").unwrap(),
            DeviceSpec::ModelFile {
                path: "x".into(),
                size: Some(2 << 30),
                lba: Some(4096)
            }
        );
        assert_eq!(
            p(DEFAULT_DEVICE).unwrap().to_string(),
            "model:./bam-model.img"
        );
    }

    #[test]
    fn model_ram() {
        assert_eq!(
            p("model:ram:64M").unwrap(),
            DeviceSpec::ModelRam {
                size: 64 << 20,
                lba: 512
            }
        );
        assert_eq!(
            p("model:ram:1G,lba=4096").unwrap(),
            DeviceSpec::ModelRam {
                size: 1 << 30,
                lba: 4096
            }
        );
    }

    #[test]
    fn bad_model_strings() {
        for s in [
            "model:",
            "model:ram",
            "model:ram:",
            "model:ram:0",
            "model:ram:12Q",
            "model:ram:1G,size=2G",
            "model:x,size=0",
            "model:x,size=1GB",
            "model:x,lba=1000",
            "model:x,lba=256",
            "model:x,lba=128K",
            "model:x,foo=1",
            "model:x,size",
            "model:x,size=1G,size=2G",
            "model:x,size=1000",
            "model:x,size=6K,lba=4K",
        ] {
            assert!(p(s).is_err(), "{s} should be rejected");
        }
        assert!(p("model:x,size=1GB").unwrap_err().0.contains("binary"));
    }

    #[test]
    fn vfio() {
        assert_eq!(
            p("vfio:0000:01:00.0").unwrap(),
            DeviceSpec::Vfio {
                bdf: "0000:01:00.0".into()
            }
        );
        assert_eq!(
            p("vfio:3B:1f.7").unwrap(),
            DeviceSpec::Vfio {
                bdf: "0000:3b:1f.7".into()
            }
        );
        assert_eq!(
            p("vfio:ABCD:ef:00.1").unwrap().to_string(),
            "vfio:abcd:ef:00.1"
        );
        for s in [
            "vfio:",
            "vfio:1:00.0",
            "vfio:01:00",
            "vfio:01:00.8",
            "vfio:01:20.0",
            "vfio:0000:01:00.0.1",
            "vfio:000:01:00.0",
            "vfio:0000:0g:00.0",
            "vfio:x:0000:01:00.0",
            "vfio:01:+0.0",
        ] {
            assert!(p(s).is_err(), "{s} should be rejected");
        }
    }

    #[test]
    fn lists_and_other_kinds_are_refused() {
        assert!(p("sim:ideal").unwrap_err().0.contains("unknown transport"));
        assert!(p("hostctl:ssds=2")
            .unwrap_err()
            .0
            .contains("unknown transport"));
        let e = p("kmod:/dev/bam-nvme0,/dev/bam-nvme1").unwrap_err().0;
        assert!(
            e.contains("kmod:/dev/bam-nvme0") && e.contains("several controllers"),
            "{e}"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("1GB").unwrap_err().contains("binary"));
        assert!(parse_size("30000000000000G").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn ram_model_opens() {
        let t = p("model:ram:1M,lba=4096")
            .unwrap()
            .open_transport()
            .unwrap();
        assert!(t.describe().starts_with("model:ram"));
    }

    /// A RAM model of any size the grammar accepts opens at once and takes no memory for
    /// what is not written (a chunk table allocated up front would take 24 GiB for
    /// `model:ram:1024T`).
    #[test]
    fn huge_ram_models_open_at_once() {
        for size in ["64T", "1024T", "16383T"] {
            let t0 = std::time::Instant::now();
            let spec = p(&format!("model:ram:{size}")).unwrap();
            let ctrl = crate::Controller::new(
                spec.open_transport().unwrap(),
                crate::ControllerOptions::default(),
            )
            .unwrap();
            let ns = ctrl.namespace(1).unwrap();
            let mut qp = ctrl.create_io_queue_pair(16).unwrap();
            let last = ns.blocks - 1;
            let data = vec![0x5au8; ns.block_size as usize];
            qp.write_from(&ns, last, &data).unwrap();
            let mut back = vec![0u8; data.len()];
            qp.read_into(&ns, last, &mut back).unwrap();
            assert_eq!(back, data, "{size}");
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(2),
                "{size}: {:?}",
                t0.elapsed()
            );
        }
    }

    #[test]
    fn kmod_and_others() {
        assert_eq!(
            p("kmod:/dev/bam-nvme0").unwrap(),
            DeviceSpec::Kmod {
                path: "/dev/bam-nvme0".into()
            }
        );
        assert!(p("kmod:").is_err());
        assert!(p("").is_err());
        assert!(p("nvme:/dev/nvme0")
            .unwrap_err()
            .0
            .contains("unknown transport"));
        assert!(p("/dev/bam-nvme0")
            .unwrap_err()
            .0
            .contains("kmod:/dev/bam-nvme0"));
        assert!(p("01:00.0").unwrap_err().0.contains("vfio:01:00.0"));
        assert!(p("disk.img").unwrap_err().0.contains("model:disk.img"));
    }
}
