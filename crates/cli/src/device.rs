//! Device strings for the CPU-side commands: the grammar lives in the library
//! (`bam_nvme::device`, the forms below); this module turns its errors into the command's
//! usage errors and brings the controller up.
//!
//! | form | meaning |
//! |---|---|
//! | `model:PATH[,size=SIZE][,lba=BYTES]` | the in-process controller model, data in the model image PATH; `size=` creates a missing image at SIZE (without it a missing image is an error); `lba=` is a new image's block size (default 512); an existing image keeps its geometry, which `size=`/`lba=`, when given, must match |
//! | `model:ram:SIZE[,lba=BYTES]` | a throwaway controller model in RAM |
//! | `vfio:DDDD:BB:DD.F` or `vfio:BB:DD.F` | a PCI NVMe controller bound to `vfio-pci` (domain 0000 when omitted) |
//! | `kmod:/dev/bam-nvmeN` or `kmod:BDF` | a controller bound to the bam kernel module |
//!
//! Sizes are binary (`K`, `M`, `G`, `T`). PATH must not contain a comma. The GPU
//! backends (`sim:`, `hostctl:`, lists of `kmod:` controllers) are `bam bench`'s, with a
//! grammar of their own in the GPU runtime (`bam::storage::GpuDevice`). The two grammars
//! know nothing of each other: this module alone tells a user who gives one where the
//! other belongs which command takes it ([`parse`], [`parse_gpu`]).
//!
//! Commands that only read (`info`, `read`) open a model read-only ([`open_read_only`]):
//! its image under a shared lock, so they run beside each other but not beside a writer.

use crate::error::{CliError, CliResult, NvmeContext};
pub use bam_nvme::device::{DeviceParseError, DeviceSpec, DEFAULT_DEVICE, DEVICE_FORMS};
use bam_nvme::{Controller, ControllerOptions, Transport};
use std::sync::Arc;

/// A device string's parse error as a usage error of the command.
pub fn usage_error(e: DeviceParseError, input: &str) -> CliError {
    CliError::usage("invalid device string", e.0)
        .on(input)
        .hint(format!("use {DEVICE_FORMS} (see `bam --help`)"))
}

/// Opens the transport to the device; `name` is the device as the user wrote it.
/// `read_only`: a model is write protected and its image opened read-only.
pub fn open_transport(
    spec: &DeviceSpec,
    name: &str,
    read_only: bool,
) -> CliResult<Arc<dyn Transport>> {
    let t = if read_only {
        spec.open_transport_read_only()
    } else {
        spec.open_transport()
    };
    t.during("cannot open the device", name)
}

/// A device string from the command line, parsed, with the controller brought up.
pub struct OpenDevice {
    /// The device string as the user gave it.
    pub name: String,
    /// The parsed form.
    pub spec: DeviceSpec,
    /// The controller.
    pub ctrl: Controller,
}

/// Parses a device string (a usage error if malformed; one that names a GPU backend
/// says so).
pub fn parse(device: &str) -> CliResult<DeviceSpec> {
    device
        .parse()
        .map_err(|e: DeviceParseError| match gpu_backend(device) {
            Some(why) => usage_error(DeviceParseError(why), device),
            None => usage_error(e, device),
        })
}

/// Why `device`, refused by the CPU-side grammar, is a GPU backend (`sim:`, `hostctl:`,
/// or a list of `kmod:` controllers), if it is one.
fn gpu_backend(device: &str) -> Option<String> {
    let (kind, rest) = device.split_once(':').unwrap_or((device, ""));
    let gpu = matches!(kind, "sim" | "hostctl") || (kind == "kmod" && rest.contains(','));
    gpu.then(|| {
        format!(
            "'{device}' is a GPU backend: GPU threads drive it (bam bench, bam bench cache, the \
             Rust API's bam::storage::GpuDevice); CPU-side commands take {DEVICE_FORMS}"
        )
    })
}

/// Parses a GPU device string (`bam bench`'s `--device`); the error text says what is
/// wrong, and for a controller of the CPU-side commands (`model:`, `vfio:`) that GPU
/// threads cannot reach it.
#[cfg(feature = "gpu")]
pub fn parse_gpu(device: &str) -> Result<bam::storage::GpuDevice, String> {
    use bam::storage::device::GPU_DEVICE_FORMS;
    device.parse().map_err(|e: bam::Error| {
        let kind = device.split_once(':').map_or(device, |(k, _)| k);
        if !matches!(kind, "model" | "vfio") {
            return e.to_string();
        }
        // A malformed one gets the CPU-side grammar's precise message first.
        if let Err(cpu) = device.parse::<DeviceSpec>() {
            return cpu.0;
        }
        let why = if kind == "vfio" {
            ": vfio-pci cannot map GPU memory for the controller's DMA (bind it to bam_nvme and \
             use kmod:)"
        } else {
            " (the same model serves GPU queues as hostctl:)"
        };
        format!(
            "`{device}` is a controller for the CPU-side commands (info, read, write, load); GPU \
             threads cannot reach it{why}. For the GPU path use {GPU_DEVICE_FORMS}"
        )
    })
}

/// Parses `device`, opens its transport for reading and writing and brings the
/// controller up, asking for `io_queue_pairs` I/O queue pairs.
pub fn open(device: &str, io_queue_pairs: u16) -> CliResult<OpenDevice> {
    open_with(device, io_queue_pairs, false)
}

/// As [`open`], for a command that only reads: a model's namespace is write protected
/// and its image is opened read-only, under a shared lock.
pub fn open_read_only(device: &str, io_queue_pairs: u16) -> CliResult<OpenDevice> {
    open_with(device, io_queue_pairs, true)
}

fn open_with(device: &str, io_queue_pairs: u16, read_only: bool) -> CliResult<OpenDevice> {
    let spec = parse(device)?;
    tracing::debug!(?spec, read_only, "opening device");
    let transport = open_transport(&spec, device, read_only)?;
    let options = ControllerOptions {
        io_queue_pairs: io_queue_pairs.max(1),
        ..ControllerOptions::default()
    };
    let ctrl =
        Controller::new(transport, options).during("cannot bring up the controller", device)?;
    Ok(OpenDevice {
        name: device.to_string(),
        spec,
        ctrl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each grammar refuses the other's strings; the command says where they belong.
    #[test]
    fn strings_of_the_other_path_say_where_they_belong() {
        let msg = |d: &str| match parse(d) {
            Err(e) => format!("{e:?}"),
            Ok(s) => panic!("{d} parsed as {s:?}"),
        };
        assert!(msg("sim:ideal").contains("GPU backend"));
        assert!(msg("hostctl:ssds=2").contains("GPU backend"));
        assert!(msg("kmod:/dev/bam-nvme0,/dev/bam-nvme1").contains("GPU backend"));
        assert!(msg("nvme:x").contains("unknown transport"));
        #[cfg(feature = "gpu")]
        {
            let e = parse_gpu("vfio:0000:01:00.0").unwrap_err();
            assert!(
                e.contains("cannot map GPU memory") && e.contains("kmod:"),
                "{e}"
            );
            let e = parse_gpu("model:ram:1G").unwrap_err();
            assert!(e.contains("hostctl"), "{e}");
            let e = parse_gpu("model:ram:1GB").unwrap_err();
            assert!(e.contains("binary"), "{e}");
            assert!(parse_gpu("nvme:x")
                .unwrap_err()
                .contains("unknown device kind"));
        }
    }

    #[test]
    fn absent_kmod_device_is_a_clear_error() {
        let e = open("kmod:/dev/bam-nvme-absent", 1).err().unwrap();
        assert!(e.to_string().contains("bam bind"), "{e}");
        assert!(!e.usage);
        let e = open("kmod:0000:ff:1f.7", 1).err().unwrap();
        assert!(e.to_string().contains("not bound"), "{e}");
    }

    #[test]
    fn absent_vfio_device() {
        let e = open("vfio:ffff:ff:1f.7", 1).err().unwrap();
        assert!(e.cause.contains("ffff:ff:1f.7"), "{e}");
        assert!(
            e.hint.as_deref().unwrap_or_default().contains("lspci"),
            "{e}"
        );
        assert_eq!(e.device.as_deref(), Some("vfio:ffff:ff:1f.7"));
    }

    #[test]
    fn read_only_model_refuses_writes() {
        let d = open_read_only("model:ram:1M", 1).unwrap();
        let ns = d.ctrl.namespace(1).unwrap();
        let e = d
            .ctrl
            .create_io_queue_pair(4)
            .unwrap()
            .write_from(&ns, 0, &[0; 512])
            .unwrap_err();
        assert!(e.to_string().contains("Write Protected"), "{e}");
    }

    #[test]
    fn ram_model_opens() {
        let d = open("model:ram:1M,lba=4096", 2).unwrap();
        assert_eq!(d.ctrl.namespace(1).unwrap().blocks, 256);
    }
}
