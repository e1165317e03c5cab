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
//! backends (`sim:`, `hostctl:`, lists of `kmod:` controllers) are `bam bench`'s.
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

/// Parses a device string (a usage error if malformed).
pub fn parse(device: &str) -> CliResult<DeviceSpec> {
    device
        .parse()
        .map_err(|e: DeviceParseError| usage_error(e, device))
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
