//! Device strings for the CPU-side commands: the grammar lives in the library
//! (`bam_nvme::device`, the forms below); this module turns its errors into the command's
//! usage errors and brings the controller up.
//!
//! | form | meaning |
//! |---|---|
//! | `model:PATH[,size=SIZE][,lba=BYTES]` | the in-process controller model, data in the file PATH (created at SIZE, default 1G, if missing; an existing file keeps its size); logical blocks of BYTES (default 512) |
//! | `model:ram:SIZE[,lba=BYTES]` | a throwaway controller model in RAM |
//! | `vfio:DDDD:BB:DD.F` or `vfio:BB:DD.F` | a PCI NVMe controller bound to `vfio-pci` (domain 0000 when omitted) |
//! | `kmod:/dev/bam-nvmeN` or `kmod:BDF` | a controller bound to the bam kernel module |
//!
//! Sizes are binary (`K`, `M`, `G`, `T`). PATH must not contain a comma. The GPU
//! backends (`sim:`, `hostctl:`, lists of `kmod:` controllers) are `bam bench`'s.

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
pub fn open_transport(spec: &DeviceSpec, name: &str) -> CliResult<Arc<dyn Transport>> {
    spec.open_transport().during("cannot open the device", name)
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

/// Parses `device`, opens its transport and brings the controller up, asking for
/// `io_queue_pairs` I/O queue pairs.
pub fn open(device: &str, io_queue_pairs: u16) -> CliResult<OpenDevice> {
    let spec = parse(device)?;
    tracing::debug!(?spec, "opening device");
    let transport = open_transport(&spec, device)?;
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
    fn ram_model_opens() {
        let d = open("model:ram:1M,lba=4096", 2).unwrap();
        assert_eq!(d.ctrl.namespace(1).unwrap().blocks, 256);
    }
}
