//! VFIO transport: BAR0 mapped through `/dev/vfio`, host memory mapped for DMA in the
//! device's IOMMU domain (type1 v2). For CPU-side use without the bam kernel module.
//!
//! Setup the user does once (or `bam bind --vfio`):
//! ```text
//! modprobe vfio-pci
//! echo vfio-pci > /sys/bus/pci/devices/0000:01:00.0/driver_override
//! echo 0000:01:00.0 > /sys/bus/pci/drivers/nvme/unbind
//! echo 0000:01:00.0 > /sys/bus/pci/drivers_probe
//! ```

use super::dma::HostPages;
use super::mmio::BarMapping;
use super::{DmaBuffer, Transport};
use crate::spec::PAGE_SIZE;
use crate::{Error, Result};
use parking_lot::Mutex;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vfio_bindings::bindings::vfio as sys;

/// The VFIO ioctls, through nix's ioctl macros (which return the result or the errno).
/// linux/vfio.h numbers them `_IO(';', 100 + n)` (no direction, no size) and passes
/// their arguments by pointer or by value.
mod ioctls {
    use super::sys;
    use nix::sys::ioctl::ioctl_num_type;
    use nix::{
        ioctl_none_bad, ioctl_readwrite_bad, ioctl_write_int_bad, ioctl_write_ptr_bad,
        request_code_none,
    };

    pub const GET_API_VERSION: ioctl_num_type = request_code_none!(b';', 100);
    pub const CHECK_EXTENSION: ioctl_num_type = request_code_none!(b';', 101);
    pub const SET_IOMMU: ioctl_num_type = request_code_none!(b';', 102);
    pub const GROUP_GET_STATUS: ioctl_num_type = request_code_none!(b';', 103);
    pub const GROUP_SET_CONTAINER: ioctl_num_type = request_code_none!(b';', 104);
    pub const GROUP_GET_DEVICE_FD: ioctl_num_type = request_code_none!(b';', 106);
    pub const DEVICE_GET_REGION_INFO: ioctl_num_type = request_code_none!(b';', 108);
    pub const IOMMU_MAP_DMA: ioctl_num_type = request_code_none!(b';', 113);
    pub const IOMMU_UNMAP_DMA: ioctl_num_type = request_code_none!(b';', 114);

    ioctl_none_bad!(get_api_version, GET_API_VERSION);
    ioctl_write_int_bad!(check_extension, CHECK_EXTENSION);
    ioctl_write_int_bad!(set_iommu, SET_IOMMU);
    ioctl_readwrite_bad!(group_get_status, GROUP_GET_STATUS, sys::vfio_group_status);
    ioctl_write_ptr_bad!(group_set_container, GROUP_SET_CONTAINER, libc::c_int);
    ioctl_write_ptr_bad!(group_get_device_fd, GROUP_GET_DEVICE_FD, libc::c_char);
    ioctl_readwrite_bad!(
        device_get_region_info,
        DEVICE_GET_REGION_INFO,
        sys::vfio_region_info
    );
    ioctl_write_ptr_bad!(iommu_map_dma, IOMMU_MAP_DMA, sys::vfio_iommu_type1_dma_map);
    ioctl_readwrite_bad!(
        iommu_unmap_dma,
        IOMMU_UNMAP_DMA,
        sys::vfio_iommu_type1_dma_unmap
    );
}

/// An ioctl's result, or its errno as an error saying which ioctl failed.
fn ioctl_result(r: nix::Result<libc::c_int>, what: &str) -> Result<libc::c_int> {
    r.map_err(|errno| Error::os(what.to_string(), std::io::Error::from(errno)))
}

/// Parses and normalises a PCI address: `dddd:bb:dd.f` or `bb:dd.f` (domain 0000).
///
/// ```
/// use bam_nvme::transport::vfio::parse_bdf;
/// assert_eq!(parse_bdf("01:00.0").unwrap(), "0000:01:00.0");
/// assert!(parse_bdf("0000:01:00").is_err());
/// ```
pub fn parse_bdf(s: &str) -> Result<String> {
    crate::pci::parse_bdf(s).map_err(Error::InvalidArgument)
}

/// An NVMe controller bound to `vfio-pci`.
pub struct VfioTransport {
    name: String,
    /// Shared with every DMA buffer's release: the IOMMU mappings live in the container,
    /// and the container keeps its IOMMU only while the group is attached, so the group
    /// (and device) must stay open until the last buffer is unmapped.
    files: Arc<VfioFiles>,
    bar: BarMapping,
    next_iova: Mutex<u64>,
}

/// The open VFIO files of one device.
struct VfioFiles {
    container: File,
    _group: File,
    device: File,
}

fn sysfs_device(bdf: &str) -> PathBuf {
    Path::new("/sys/bus/pci/devices").join(bdf)
}

impl VfioTransport {
    /// Opens the controller at PCI address `bdf` (see [`parse_bdf`]).
    pub fn open(bdf: &str) -> Result<Arc<Self>> {
        let bdf = parse_bdf(bdf)?;
        let name = format!("vfio:{bdf}");
        let group = iommu_group(&name, &bdf)?;
        let files = VfioFiles::open(&name, &bdf, &group)?;
        let bar = map_bar0(&name, &files.device)?;
        Ok(Arc::new(VfioTransport {
            name,
            files: Arc::new(files),
            bar,
            next_iova: Mutex::new(1 << 32),
        }))
    }
}

/// The error of the device `name` that cannot be used, for `reason`.
fn unavailable(name: &str, reason: String) -> Error {
    Error::DeviceUnavailable {
        device: name.to_string(),
        reason,
    }
}

/// Checks in sysfs that the PCI device `bdf` exists and is bound to vfio-pci, and returns
/// its IOMMU group.
fn iommu_group(name: &str, bdf: &str) -> Result<String> {
    let dev = sysfs_device(bdf);
    if !dev.exists() {
        return Err(unavailable(
            name,
            format!("no PCI device at {bdf} (see `lspci -D` or `bam list`)"),
        ));
    }
    let driver = std::fs::read_link(dev.join("driver"))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
    if driver.as_deref() != Some("vfio-pci") {
        return Err(unavailable(
            name,
            format!(
                "the device is bound to {}, not vfio-pci; bind it with `bam bind --vfio {bdf}`",
                driver.as_deref().unwrap_or("no driver")
            ),
        ));
    }
    let group = std::fs::read_link(dev.join("iommu_group")).map_err(|_| {
        unavailable(
            name,
            "the device has no IOMMU group: enable the IOMMU (intel_iommu=on / amd_iommu=on)"
                .into(),
        )
    })?;
    Ok(group
        .file_name()
        .map(|g| g.to_string_lossy().into_owned())
        .unwrap_or_default())
}

impl VfioFiles {
    /// Opens a VFIO container, checks its API version and type1v2 IOMMU backend, attaches
    /// IOMMU group `group` to it (the group must be viable), sets the IOMMU and opens the
    /// device `bdf` of the group.
    fn open(name: &str, bdf: &str, group: &str) -> Result<Self> {
        let open = |p: &str| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(p)
                .map_err(|e| Error::os(format!("{name}: opening {p}"), e))
        };
        let container = open("/dev/vfio/vfio")?;
        let cfd = container.as_raw_fd();
        // SAFETY (every ioctl below): each request gets the argument linux/vfio.h defines
        // for it, by value or as a pointer to a live, correctly sized struct (argsz set).
        if ioctl_result(
            unsafe { ioctls::get_api_version(cfd) },
            "VFIO_GET_API_VERSION",
        )? != sys::VFIO_API_VERSION as i32
        {
            return Err(unavailable(name, "unsupported VFIO API version".into()));
        }
        if ioctl_result(
            // SAFETY: see above.
            unsafe { ioctls::check_extension(cfd, sys::VFIO_TYPE1v2_IOMMU as _) },
            "VFIO_CHECK_EXTENSION",
        )? == 0
        {
            return Err(unavailable(
                name,
                "the kernel's VFIO lacks the type1v2 IOMMU backend".into(),
            ));
        }
        let group_file = open(&format!("/dev/vfio/{group}"))?;
        let gfd = group_file.as_raw_fd();
        let mut status = sys::vfio_group_status {
            argsz: std::mem::size_of::<sys::vfio_group_status>() as u32,
            flags: 0,
        };
        ioctl_result(
            // SAFETY: see above.
            unsafe { ioctls::group_get_status(gfd, &mut status) },
            "VFIO_GROUP_GET_STATUS",
        )?;
        if status.flags & sys::VFIO_GROUP_FLAGS_VIABLE == 0 {
            return Err(unavailable(
                name,
                format!("IOMMU group {group} is not viable: bind every device in it to vfio-pci"),
            ));
        }
        let cfd_arg = cfd;
        ioctl_result(
            // SAFETY: see above.
            unsafe { ioctls::group_set_container(gfd, &cfd_arg) },
            "VFIO_GROUP_SET_CONTAINER",
        )?;
        ioctl_result(
            // SAFETY: see above.
            unsafe { ioctls::set_iommu(cfd, sys::VFIO_TYPE1v2_IOMMU as _) },
            "VFIO_SET_IOMMU",
        )?;
        let cname = CString::new(bdf).expect("BDF has no NUL");
        let dfd = ioctl_result(
            // SAFETY: see above (a NUL-terminated device name that outlives the call).
            unsafe { ioctls::group_get_device_fd(gfd, cname.as_ptr()) },
            "VFIO_GROUP_GET_DEVICE_FD",
        )?;
        // SAFETY: the ioctl returned a new file descriptor that we now own.
        let device = unsafe { File::from_raw_fd(dfd) };
        Ok(VfioFiles {
            container,
            _group: group_file,
            device,
        })
    }
}

/// Maps BAR0 of the VFIO `device` and enables memory space and bus mastering in its PCI
/// command register.
fn map_bar0(name: &str, device: &File) -> Result<BarMapping> {
    let dfd = device.as_raw_fd();
    let region = |index: u32| -> Result<sys::vfio_region_info> {
        let mut info = sys::vfio_region_info {
            argsz: std::mem::size_of::<sys::vfio_region_info>() as u32,
            index,
            ..Default::default()
        };
        ioctl_result(
            // SAFETY: VFIO_DEVICE_GET_REGION_INFO gets a pointer to a live, correctly
            // sized vfio_region_info (argsz set), as linux/vfio.h defines.
            unsafe { ioctls::device_get_region_info(dfd, &mut info) },
            "VFIO_DEVICE_GET_REGION_INFO",
        )?;
        Ok(info)
    };
    let bar0 = region(sys::VFIO_PCI_BAR0_REGION_INDEX)?;
    if bar0.flags & sys::VFIO_REGION_INFO_FLAG_MMAP == 0 || bar0.size < 0x2000 {
        return Err(unavailable(
            name,
            "BAR0 cannot be memory-mapped or is too small for an NVMe controller".into(),
        ));
    }
    let bar = BarMapping::map(
        std::os::fd::AsFd::as_fd(device),
        bar0.offset,
        bar0.size as usize,
        name,
    )?;
    // Enable memory space and bus mastering in the PCI command register.
    let config = region(sys::VFIO_PCI_CONFIG_REGION_INDEX)?;
    let mut cmd = [0u8; 2];
    device
        .read_exact_at(&mut cmd, config.offset + 4)
        .map_err(|e| Error::os(format!("{name}: reading PCI command"), e))?;
    let v = u16::from_le_bytes(cmd) | 0x6;
    device
        .write_all_at(&v.to_le_bytes(), config.offset + 4)
        .map_err(|e| Error::os(format!("{name}: enabling bus mastering"), e))?;
    Ok(bar)
}

impl Transport for VfioTransport {
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn read32(&self, offset: usize) -> u32 {
        self.bar.read32(offset)
    }
    unsafe fn write32(&self, offset: usize, value: u32) {
        // The MMIO store itself is sound (an in-bounds register of the live BAR mapping);
        // what the controller does with the value is the caller's contract.
        self.bar.write32(offset, value)
    }
    fn alloc_dma(&self, len: usize) -> Result<DmaBuffer> {
        let pages = HostPages::alloc(len)?;
        let iova = {
            let mut next = self.next_iova.lock();
            let iova = *next;
            *next += (pages.len + PAGE_SIZE) as u64;
            iova
        };
        let map = sys::vfio_iommu_type1_dma_map {
            argsz: std::mem::size_of::<sys::vfio_iommu_type1_dma_map>() as u32,
            flags: sys::VFIO_DMA_MAP_FLAG_READ | sys::VFIO_DMA_MAP_FLAG_WRITE,
            vaddr: pages.ptr.as_ptr() as u64,
            iova,
            size: pages.len as u64,
        };
        let cfd = self.files.container.as_raw_fd();
        // SAFETY: the struct linux/vfio.h defines for the request, live for the call.
        let mapped = unsafe { ioctls::iommu_map_dma(cfd, &map) };
        if let Err(e) = ioctl_result(mapped, "VFIO_IOMMU_MAP_DMA") {
            drop(pages.release_after(|| {}));
            return Err(e);
        }
        let files = Arc::clone(&self.files);
        let size = pages.len as u64;
        let release = pages.release_after(move || {
            let mut unmap = sys::vfio_iommu_type1_dma_unmap {
                argsz: std::mem::size_of::<sys::vfio_iommu_type1_dma_unmap>() as u32,
                flags: 0,
                iova,
                size,
                data: Default::default(),
            };
            // SAFETY: the struct linux/vfio.h defines for the request, live for the call.
            let r = unsafe { ioctls::iommu_unmap_dma(files.container.as_raw_fd(), &mut unmap) };
            if let Err(e) = ioctl_result(r, "VFIO_IOMMU_UNMAP_DMA") {
                tracing::error!("{e}");
            }
        });
        let bus = (0..pages.len / PAGE_SIZE)
            .map(|i| iova + (i * PAGE_SIZE) as u64)
            .collect();
        // SAFETY: fresh private mapping, mapped in the IOMMU at `iova` contiguously; the
        // release unmaps the IOMMU entry before unmapping the memory.
        Ok(unsafe { DmaBuffer::from_raw_parts(pages.ptr, pages.len, bus, release) })
    }
    fn bar0(&self) -> Option<(*mut u8, usize)> {
        Some(self.bar.raw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_forms() {
        assert_eq!(parse_bdf("0000:3B:00.1").unwrap(), "0000:3b:00.1");
        assert_eq!(parse_bdf("3b:1f.7").unwrap(), "0000:3b:1f.7");
        for bad in [
            "",
            "0000:01:00",
            "01.00.0",
            "0000:01:20.0",
            "0000:01:00.8",
            "g000:01:00.0",
            "0000:01:00.0.1",
            "/dev/nvme0",
        ] {
            assert!(parse_bdf(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ioctl_numbers_match_linux() {
        // _IO(';', 100) = 0x3B64 etc. (no direction, no size).
        assert_eq!(ioctls::GET_API_VERSION, 0x3B64);
        assert_eq!(ioctls::GROUP_GET_DEVICE_FD, 0x3B6A);
        assert_eq!(ioctls::IOMMU_MAP_DMA, 0x3B71);
        assert_eq!(ioctls::IOMMU_UNMAP_DMA, 0x3B72);
    }

    #[test]
    fn absent_device_is_a_clear_error() {
        let err = VfioTransport::open("ffff:ff:1f.7").err().unwrap();
        assert!(matches!(err, Error::DeviceUnavailable { .. }), "{err}");
        assert!(err.to_string().contains("no PCI device"), "{err}");
    }
}
