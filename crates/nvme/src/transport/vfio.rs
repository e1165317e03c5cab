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
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vfio_bindings::bindings::vfio as sys;

const VFIO_TYPE: u8 = b';';
const VFIO_BASE: u8 = 100;

fn vfio_io(nr: u8) -> libc::c_ulong {
    nix::request_code_none!(VFIO_TYPE, VFIO_BASE + nr) as libc::c_ulong
}

// ioctl numbers from linux/vfio.h: _IO(VFIO_TYPE, VFIO_BASE + n).
fn get_api_version() -> libc::c_ulong {
    vfio_io(0)
}
fn check_extension() -> libc::c_ulong {
    vfio_io(1)
}
fn set_iommu() -> libc::c_ulong {
    vfio_io(2)
}
fn group_get_status() -> libc::c_ulong {
    vfio_io(3)
}
fn group_set_container() -> libc::c_ulong {
    vfio_io(4)
}
fn group_get_device_fd() -> libc::c_ulong {
    vfio_io(6)
}
fn device_get_region_info() -> libc::c_ulong {
    vfio_io(8)
}
fn iommu_map_dma() -> libc::c_ulong {
    vfio_io(13)
}
fn iommu_unmap_dma() -> libc::c_ulong {
    vfio_io(14)
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

fn ioctl_ptr<T>(fd: RawFd, req: libc::c_ulong, arg: *mut T, what: &str) -> Result<libc::c_int> {
    // SAFETY: `arg` points to a live, correctly sized argument struct for this request
    // (each caller passes the struct linux/vfio.h defines for it).
    let r = unsafe { libc::ioctl(fd, req, arg) };
    if r < 0 {
        return Err(Error::os(what.to_string(), std::io::Error::last_os_error()));
    }
    Ok(r)
}

fn ioctl_val(fd: RawFd, req: libc::c_ulong, arg: libc::c_ulong, what: &str) -> Result<libc::c_int> {
    // SAFETY: requests taking an integer argument by value; no memory is passed.
    let r = unsafe { libc::ioctl(fd, req, arg) };
    if r < 0 {
        return Err(Error::os(what.to_string(), std::io::Error::last_os_error()));
    }
    Ok(r)
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
    _device: File,
}

fn sysfs_device(bdf: &str) -> PathBuf {
    Path::new("/sys/bus/pci/devices").join(bdf)
}

impl VfioTransport {
    /// Opens the controller at PCI address `bdf` (see [`parse_bdf`]).
    pub fn open(bdf: &str) -> Result<Arc<Self>> {
        let bdf = parse_bdf(bdf)?;
        let name = format!("vfio:{bdf}");
        let unavailable = |reason: String| Error::DeviceUnavailable {
            device: name.clone(),
            reason,
        };
        let dev = sysfs_device(&bdf);
        if !dev.exists() {
            return Err(unavailable(format!(
                "no PCI device at {bdf} (see `lspci -D` or `bam list`)"
            )));
        }
        let driver = std::fs::read_link(dev.join("driver"))
            .ok()
            .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
        if driver.as_deref() != Some("vfio-pci") {
            return Err(unavailable(format!(
                "the device is bound to {}, not vfio-pci; bind it with `bam bind --vfio {bdf}`",
                driver.as_deref().unwrap_or("no driver")
            )));
        }
        let group = std::fs::read_link(dev.join("iommu_group")).map_err(|_| {
            unavailable(
                "the device has no IOMMU group: enable the IOMMU (intel_iommu=on / amd_iommu=on)"
                    .into(),
            )
        })?;
        let group = group
            .file_name()
            .map(|g| g.to_string_lossy().into_owned())
            .unwrap_or_default();

        let open = |p: &str| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(p)
                .map_err(|e| Error::os(format!("{name}: opening {p}"), e))
        };
        let container = open("/dev/vfio/vfio")?;
        let cfd = container.as_raw_fd();
        if ioctl_val(cfd, get_api_version(), 0, "VFIO_GET_API_VERSION")?
            != sys::VFIO_API_VERSION as i32
        {
            return Err(unavailable("unsupported VFIO API version".into()));
        }
        if ioctl_val(
            cfd,
            check_extension(),
            sys::VFIO_TYPE1v2_IOMMU as _,
            "VFIO_CHECK_EXTENSION",
        )? == 0
        {
            return Err(unavailable(
                "the kernel's VFIO lacks the type1v2 IOMMU backend".into(),
            ));
        }
        let group_file = open(&format!("/dev/vfio/{group}"))?;
        let gfd = group_file.as_raw_fd();
        let mut status = sys::vfio_group_status {
            argsz: std::mem::size_of::<sys::vfio_group_status>() as u32,
            flags: 0,
        };
        ioctl_ptr(
            gfd,
            group_get_status(),
            &mut status,
            "VFIO_GROUP_GET_STATUS",
        )?;
        if status.flags & sys::VFIO_GROUP_FLAGS_VIABLE == 0 {
            return Err(unavailable(format!(
                "IOMMU group {group} is not viable: bind every device in it to vfio-pci"
            )));
        }
        let mut cfd_arg = cfd;
        ioctl_ptr(
            gfd,
            group_set_container(),
            &mut cfd_arg,
            "VFIO_GROUP_SET_CONTAINER",
        )?;
        ioctl_val(
            cfd,
            set_iommu(),
            sys::VFIO_TYPE1v2_IOMMU as _,
            "VFIO_SET_IOMMU",
        )?;
        let cname = CString::new(bdf.clone()).expect("BDF has no NUL");
        let dfd = ioctl_ptr(
            gfd,
            group_get_device_fd(),
            cname.as_ptr() as *mut libc::c_char,
            "VFIO_GROUP_GET_DEVICE_FD",
        )?;
        // SAFETY: the ioctl returned a new file descriptor that we now own.
        let device = unsafe { File::from_raw_fd(dfd) };

        let region = |index: u32| -> Result<sys::vfio_region_info> {
            let mut info = sys::vfio_region_info {
                argsz: std::mem::size_of::<sys::vfio_region_info>() as u32,
                index,
                ..Default::default()
            };
            ioctl_ptr(
                dfd,
                device_get_region_info(),
                &mut info,
                "VFIO_DEVICE_GET_REGION_INFO",
            )?;
            Ok(info)
        };
        let bar0 = region(sys::VFIO_PCI_BAR0_REGION_INDEX)?;
        if bar0.flags & sys::VFIO_REGION_INFO_FLAG_MMAP == 0 || bar0.size < 0x2000 {
            return Err(unavailable(
                "BAR0 cannot be memory-mapped or is too small for an NVMe controller".into(),
            ));
        }
        let bar = BarMapping::map(
            std::os::fd::AsFd::as_fd(&device),
            bar0.offset,
            bar0.size as usize,
            &name,
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

        Ok(Arc::new(VfioTransport {
            name,
            files: Arc::new(VfioFiles {
                container,
                _group: group_file,
                _device: device,
            }),
            bar,
            next_iova: Mutex::new(1 << 32),
        }))
    }
}

impl Transport for VfioTransport {
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn read32(&self, offset: usize) -> u32 {
        self.bar.read32(offset)
    }
    fn write32(&self, offset: usize, value: u32) {
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
        let mut map = sys::vfio_iommu_type1_dma_map {
            argsz: std::mem::size_of::<sys::vfio_iommu_type1_dma_map>() as u32,
            flags: sys::VFIO_DMA_MAP_FLAG_READ | sys::VFIO_DMA_MAP_FLAG_WRITE,
            vaddr: pages.ptr.as_ptr() as u64,
            iova,
            size: pages.len as u64,
        };
        let cfd = self.files.container.as_raw_fd();
        if let Err(e) = ioctl_ptr(cfd, iommu_map_dma(), &mut map, "VFIO_IOMMU_MAP_DMA") {
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
            if let Err(e) = ioctl_ptr(
                files.container.as_raw_fd(),
                iommu_unmap_dma(),
                &mut unmap,
                "VFIO_IOMMU_UNMAP_DMA",
            ) {
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
        assert_eq!(get_api_version(), 0x3B64);
        assert_eq!(group_get_device_fd(), 0x3B6A);
        assert_eq!(iommu_map_dma(), 0x3B71);
        assert_eq!(iommu_unmap_dma(), 0x3B72);
    }

    #[test]
    fn absent_device_is_a_clear_error() {
        let err = VfioTransport::open("ffff:ff:1f.7").err().unwrap();
        assert!(matches!(err, Error::DeviceUnavailable { .. }), "{err}");
        assert!(err.to_string().contains("no PCI device"), "{err}");
    }
}
