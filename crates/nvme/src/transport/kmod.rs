//! The bam kernel module transport: `kmod:/dev/bam-nvmeN` (or `kmod:BDF`).
//!
//! A controller bound to the `bam_nvme` module (see `kernel-module/` and
//! `docs/kernel-module.md`) appears as a char device. This transport maps its BAR0 with
//! `mmap`, and makes host memory DMA-able with the module's `MAP_HOST` ioctl (pinned and
//! DMA-mapped by the kernel, through the IOMMU if there is one) and GPU memory with
//! `MAP_GPU` (nvidia_p2p). The structures below mirror
//! `kernel-module/include/bam_nvme_ioctl.h` field for field; the tests check sizes,
//! offsets, ioctl numbers and constants against that header.

use super::dma::{GpuMapping, HostPages, Release};
use super::mmio::BarMapping;
use super::{DmaBuffer, Transport};
use crate::spec::PAGE_SIZE;
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The ABI version this transport speaks (`BAM_NVME_ABI_VERSION`).
pub const ABI_VERSION: u32 = 1;

/// `BAM_NVME_INFO_IOMMU_DMA`: DMA is translated by an IOMMU.
pub const INFO_IOMMU_DMA: u32 = 1 << 0;
/// `BAM_NVME_INFO_IOMMU_PASSTHROUGH`: an IOMMU in identity mode.
pub const INFO_IOMMU_PASSTHROUGH: u32 = 1 << 1;
/// `BAM_NVME_INFO_P2P_BUILT`: the module was built with nvidia_p2p support.
pub const INFO_P2P_BUILT: u32 = 1 << 2;
/// `BAM_NVME_INFO_P2P_AVAILABLE`: the nvidia_p2p symbols resolve now.
pub const INFO_P2P_AVAILABLE: u32 = 1 << 3;
/// `BAM_NVME_INFO_REVOKED`: the NVIDIA driver revoked a GPU mapping of this file; the
/// module stopped the controller and refuses new mappings (close and reopen).
pub const INFO_REVOKED: u32 = 1 << 4;
/// `BAM_NVME_INFO_IOMMU_LAZY`: the IOMMU invalidates lazily (unmapped pages may stay
/// reachable for a while; `iommu.strict=1` makes it strict).
pub const INFO_IOMMU_LAZY: u32 = 1 << 5;
/// `BAM_NVME_MAP_GPU_PERSISTENT`: use `nvidia_p2p_get_pages_persistent`.
pub const MAP_GPU_PERSISTENT: u32 = 1 << 0;
/// `BAM_NVME_UNMAP_REVOKED`: the GPU memory had been freed before the unmap.
pub const UNMAP_REVOKED: u32 = 1 << 0;
/// `BAM_NVME_UNMAP_QUIESCED` (in): no command can reach the mapping any more, release it
/// at once.
pub const UNMAP_QUIESCED: u32 = 1 << 0;
/// GPU page size of the nvidia_p2p interface.
pub const GPU_PAGE_SIZE: usize = 64 << 10;

/// `struct bam_nvme_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Info {
    /// ABI version of the module.
    pub abi_version: u32,
    /// `INFO_*` flags.
    pub flags: u32,
    /// PCI domain.
    pub pci_domain: u32,
    /// PCI bus.
    pub pci_bus: u8,
    /// PCI device (slot).
    pub pci_device: u8,
    /// PCI function.
    pub pci_function: u8,
    /// Reserved, zero.
    pub reserved0: u8,
    /// PCI vendor id.
    pub vendor_id: u16,
    /// PCI device id.
    pub device_id: u16,
    /// 24-bit class code (0x010802).
    pub class_code: u32,
    /// BAR0 size in bytes.
    pub bar0_size: u64,
    /// Largest length one MAP ioctl accepts.
    pub max_map_bytes: u64,
    /// Most mappings one open file may hold.
    pub max_mappings: u32,
    /// Host page size.
    pub page_size: u32,
    /// Mappings held by this file now.
    pub nr_mappings: u32,
    /// Mappings unmapped while the controller was enabled without strict IOMMU
    /// translation: still pinned and DMA-mapped until the controller is stopped.
    pub deferred_mappings: u32,
    /// Host bytes pinned by this file now.
    pub pinned_bytes: u64,
    /// The device's DMA mask.
    pub dma_mask: u64,
}

impl Info {
    /// The PCI address, `DDDD:BB:DD.F`.
    pub fn bdf(&self) -> String {
        format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.pci_domain, self.pci_bus, self.pci_device, self.pci_function
        )
    }
    /// Whether a GPU mapping of this file was revoked (the controller is stopped).
    pub fn revoked(&self) -> bool {
        self.flags & INFO_REVOKED != 0
    }

    /// "dma", "passthrough" or "none".
    pub fn iommu(&self) -> &'static str {
        if self.flags & INFO_IOMMU_DMA != 0 {
            "dma"
        } else if self.flags & INFO_IOMMU_PASSTHROUGH != 0 {
            "passthrough"
        } else {
            "none"
        }
    }
}

/// `struct bam_nvme_map`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapReq {
    /// In: user (or GPU) virtual address.
    pub vaddr: u64,
    /// In: length in bytes.
    pub length: u64,
    /// In: user pointer to the `u64` array receiving bus addresses.
    pub addrs: u64,
    /// In: capacity of `addrs` in entries.
    pub addrs_len: u32,
    /// In: `MAP_*` flags.
    pub flags: u32,
    /// Out: handle for `UNMAP`.
    pub handle: u64,
    /// Out: addresses written.
    pub entries: u32,
    /// Out: bytes covered by each address.
    pub page_size: u32,
}

/// `struct bam_nvme_unmap`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnmapReq {
    /// In: handle from a MAP ioctl.
    pub handle: u64,
    /// Out: `UNMAP_*` flags.
    pub flags_out: u32,
    /// In: `UNMAP_QUIESCED` or 0.
    pub flags: u32,
}

mod ioctls {
    use super::{Info, MapReq, UnmapReq};
    nix::ioctl_read!(info, b'B', 0x00, Info);
    nix::ioctl_readwrite!(map_host, b'B', 0x01, MapReq);
    nix::ioctl_readwrite!(map_gpu, b'B', 0x02, MapReq);
    nix::ioctl_readwrite!(unmap, b'B', 0x03, UnmapReq);
}

/// The open char device, shared by the transport and every mapping made through it
/// (a mapping's release needs the file; the module releases whatever is left when the
/// last reference closes it).
struct Device {
    file: File,
    name: String,
}

impl Device {
    /// UNMAP of `handle`; `flags`: `UNMAP_QUIESCED` or 0.
    fn unmap(&self, handle: u64, flags: u32) -> Result<u32> {
        let mut req = UnmapReq {
            handle,
            flags,
            ..Default::default()
        };
        // SAFETY: UNMAP reads and writes exactly one UnmapReq, which lives on our stack.
        unsafe { ioctls::unmap(self.file.as_raw_fd(), &mut req) }.map_err(|e| {
            Error::os(
                format!("{}: unmapping handle {handle}", self.name),
                e.into(),
            )
        })?;
        Ok(req.flags_out)
    }
}

/// A controller bound to the bam kernel module.
pub struct KmodTransport {
    dev: Arc<Device>,
    info: Info,
    bar: BarMapping,
}

/// The char device of a controller bound to the module, from its PCI address.
pub fn device_node_for_bdf(bdf: &str) -> Result<PathBuf> {
    let bdf = super::vfio::parse_bdf(bdf)?;
    let dir = PathBuf::from(format!("/sys/bus/pci/devices/{bdf}/bam-nvme"));
    let unavailable = |reason: String| Error::DeviceUnavailable {
        device: format!("kmod:{bdf}"),
        reason,
    };
    let rd = std::fs::read_dir(&dir).map_err(|_| {
        unavailable("not bound to the bam_nvme module (load it and run `bam bind BDF`)".into())
    })?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("bam-nvme") {
            return Ok(PathBuf::from("/dev").join(name));
        }
    }
    Err(unavailable(
        "bound to bam_nvme but it has no device node".into(),
    ))
}

impl KmodTransport {
    /// Opens `/dev/bam-nvmeN`, or the device of a PCI address bound to the module
    /// (anything not starting with `/` is taken as a BDF).
    pub fn open(path_or_bdf: &str) -> Result<Arc<Self>> {
        let path = if path_or_bdf.starts_with('/') {
            PathBuf::from(path_or_bdf)
        } else {
            device_node_for_bdf(path_or_bdf)?
        };
        Self::open_path(&path)
    }

    fn open_path(path: &Path) -> Result<Arc<Self>> {
        let name = format!("kmod:{}", path.display());
        let unavailable = |reason: String| Error::DeviceUnavailable {
            device: name.clone(),
            reason,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::ENODEV) => unavailable(format!(
                    "no such device ({e}); is bam_nvme loaded and the controller bound (`bam list`, `bam bind BDF`)?"
                )),
                Some(libc::EBUSY) => unavailable(format!(
                    "in use by another process (pid {}); the module allows one owner at a time",
                    owner_pid(path).map_or_else(|| "?".into(), |p| p.to_string())
                )),
                // The node's mode: opening needs CAP_SYS_RAWIO as well, so a wider
                // mode alone never lets an ordinary user in.
                Some(libc::EACCES) => unavailable(format!(
                    "permission denied ({e}); run as root: the module requires CAP_SYS_RAWIO, whatever the node's mode"
                )),
                // The module's own refusals (its log says which one applied).
                Some(libc::EPERM) => unavailable(format!(
                    "the module refused the open ({e}): it requires CAP_SYS_RAWIO (run as root), refuses under kernel lockdown, refuses a controller whose DMA no IOMMU translates unless allow_unsafe_noiommu=1, and one whose IOMMU group holds a device bound to another driver unless allow_shared_iommu_group=1; the kernel log (`dmesg | grep bam_nvme`) names the reason"
                )),
                _ => Error::os(format!("{name}: open"), e),
            })?;
        let dev = Arc::new(Device {
            file,
            name: name.clone(),
        });
        let mut info = Info::default();
        // SAFETY: INFO writes exactly one Info into the struct we pass.
        unsafe { ioctls::info(dev.file.as_raw_fd(), &mut info) }
            .map_err(|e| Error::os(format!("{name}: BAM_NVME_IOC_INFO"), e.into()))?;
        if info.abi_version != ABI_VERSION {
            return Err(unavailable(format!(
                "the module speaks ABI version {}, this bam speaks {ABI_VERSION}; rebuild one of them",
                info.abi_version
            )));
        }
        let bar_len = usize::try_from(info.bar0_size).map_err(|_| {
            unavailable(format!("BAR0 of {} bytes cannot be mapped", info.bar0_size))
        })?;
        if bar_len < 0x1000 {
            return Err(unavailable(format!(
                "BAR0 of {bar_len} bytes is too small for NVMe"
            )));
        }
        let bar = BarMapping::map(std::os::fd::AsFd::as_fd(&dev.file), 0, bar_len, &name)?;
        tracing::debug!(%name, bdf = %info.bdf(), iommu = info.iommu(), bar_len, "opened kmod transport");
        Ok(Arc::new(KmodTransport { dev, info, bar }))
    }

    /// What the module reported when the device was opened.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// Current facts from the module (mapping count, pinned bytes).
    pub fn query(&self) -> Result<Info> {
        let mut info = Info::default();
        // SAFETY: INFO writes exactly one Info into the struct we pass.
        unsafe { ioctls::info(self.dev.file.as_raw_fd(), &mut info) }
            .map_err(|e| Error::os(format!("{}: BAM_NVME_IOC_INFO", self.dev.name), e.into()))?;
        Ok(info)
    }

    /// MAP_GPU with explicit flags (e.g. [`MAP_GPU_PERSISTENT`]).
    pub fn map_gpu_with_flags(&self, dev_ptr: u64, len: usize, flags: u32) -> Result<GpuMapping> {
        if len == 0 {
            return Err(Error::ZeroLength {
                what: "GPU mapping".into(),
            });
        }
        let page = GPU_PAGE_SIZE as u64;
        let start = dev_ptr & !(page - 1);
        let end = dev_ptr
            .checked_add(len as u64)
            .and_then(|e| e.checked_next_multiple_of(page))
            .ok_or_else(|| {
                Error::InvalidArgument(format!("GPU range {dev_ptr:#x}+{len} overflows"))
            })?;
        let entries = ((end - start) / page) as usize;
        let mut addrs = vec![0u64; entries];
        let mut req = MapReq {
            vaddr: start,
            length: end - start,
            addrs: addrs.as_mut_ptr() as u64,
            addrs_len: u32::try_from(entries).map_err(|_| {
                Error::InvalidArgument(format!("GPU range of {len} bytes is too large"))
            })?,
            flags,
            ..Default::default()
        };
        // SAFETY: MAP_GPU reads/writes one MapReq and writes at most addrs_len u64 into
        // `addrs`, which has exactly that many entries and outlives the call.
        let r = unsafe { ioctls::map_gpu(self.dev.file.as_raw_fd(), &mut req) };
        if let Err(e) = r {
            if e == nix::errno::Errno::EOPNOTSUPP {
                return Err(Error::Unsupported {
                    transport: self.describe(),
                    what: "mapping GPU memory (the NVIDIA driver's nvidia_p2p interface is not available; see dmesg)".into(),
                });
            }
            return Err(map_ioctl_error(
                self.describe(),
                format!("{}: MAP_GPU {start:#x}+{}", self.dev.name, end - start),
                e,
            ));
        }
        addrs.truncate(req.entries as usize);
        let handle = req.handle;
        let unmap = |flags: u32| -> Release {
            let dev = Arc::clone(&self.dev);
            Box::new(move || match dev.unmap(handle, flags) {
                Ok(f) if f & UNMAP_REVOKED != 0 => {
                    tracing::warn!("{}: GPU memory was freed while still mapped", dev.name)
                }
                Ok(_) => {}
                Err(e) => tracing::error!("{e}"),
            })
        };
        Ok(
            GpuMapping::new(dev_ptr, len, addrs, req.page_size as usize, unmap(0))
                .with_quiesced_release(unmap(UNMAP_QUIESCED)),
        )
    }
}

/// The error of a failed MAP_HOST / MAP_GPU ioctl on `device`: the module's errnos that
/// have a cause the caller can act on get a typed error saying what to do; any other one
/// stays an OS error with `what` as its context.
fn map_ioctl_error(device: String, what: String, e: nix::errno::Errno) -> Error {
    use nix::errno::Errno;
    match e {
        // The module revoked this open file (the controller was unbound, removed or
        // reset, or GPU memory it mapped was freed): it stopped the controller first.
        Errno::ENOTRECOVERABLE => Error::DeviceUnavailable {
            device,
            reason: format!(
                "{what}: the device was revoked (unbound from bam_nvme, removed, reset, or GPU \
                 memory it mapped was freed) and its controller stopped; close it and open it again"
            ),
        },
        Errno::ENOSPC => Error::DeviceUnavailable {
            device,
            reason: format!(
                "{what}: this open file has as many DMA mappings as the module allows \
                 (bam_nvme parameter max_mappings); free some or raise it"
            ),
        },
        // The module failed the open file after a PCIe error (AER) on the controller, or
        // the IOMMU mapped the memory in pieces smaller than a page.
        Errno::EIO => Error::DeviceUnavailable {
            device,
            reason: format!(
                "{what}: I/O error from bam_nvme: after a PCIe error on the controller (dmesg: \
                 \"PCIe error reported\") every call on this open file fails: close it and open \
                 the device again; or the IOMMU mapped the memory in pieces smaller than a page \
                 (dmesg: \"not page-granular\")"
            ),
        },
        e => Error::os(what, e.into()),
    }
}

fn owner_pid(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    std::fs::read_to_string(format!("/sys/class/bam-nvme/{name}/owner_pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl Transport for KmodTransport {
    fn describe(&self) -> String {
        self.dev.name.clone()
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
        let n = pages.len / PAGE_SIZE;
        let mut addrs = vec![0u64; n];
        let mut req = MapReq {
            vaddr: pages.ptr.as_ptr() as u64,
            length: pages.len as u64,
            addrs: addrs.as_mut_ptr() as u64,
            addrs_len: u32::try_from(n).map_err(|_| {
                Error::InvalidArgument(format!("DMA buffer of {len} bytes is too large"))
            })?,
            ..Default::default()
        };
        // SAFETY: MAP_HOST reads/writes one MapReq and writes at most addrs_len u64 into
        // `addrs` (exactly that long); vaddr/length describe our own fresh mapping.
        let r = unsafe { ioctls::map_host(self.dev.file.as_raw_fd(), &mut req) };
        if let Err(e) = r {
            drop(pages.release_after(|| {}));
            return Err(map_ioctl_error(
                self.describe(),
                format!("{}: MAP_HOST of {} bytes", self.dev.name, pages.len),
                e,
            ));
        }
        if req.entries as usize != n || req.page_size as usize != PAGE_SIZE {
            let _ = self.dev.unmap(req.handle, 0);
            drop(pages.release_after(|| {}));
            return Err(Error::DeviceUnavailable {
                device: self.describe(),
                reason: format!(
                    "module returned {} addresses of {} bytes for {n} pages of {PAGE_SIZE}",
                    req.entries, req.page_size
                ),
            });
        }
        let dev = Arc::clone(&self.dev);
        let handle = req.handle;
        let release = pages.release_after(move || {
            if let Err(e) = dev.unmap(handle, 0) {
                tracing::error!("{e}");
            }
        });
        // SAFETY: fresh private mapping of pages.len bytes, pinned and DMA-mapped by the
        // module with addrs[i] the bus address of page i; the release unmaps the DMA
        // mapping (UNMAP) before the memory is unmapped.
        Ok(unsafe { DmaBuffer::from_raw_parts(pages.ptr, pages.len, addrs, release) })
    }
    fn map_gpu(&self, dev_ptr: u64, len: usize) -> Result<GpuMapping> {
        self.map_gpu_with_flags(dev_ptr, len, 0)
    }
    fn bar0(&self) -> Option<(*mut u8, usize)> {
        Some(self.bar.raw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    const HEADER: &str = include_str!("../../../../kernel-module/include/bam_nvme_ioctl.h");

    /// The value of `#define NAME value` in the C header (decimal, hex or `(1U << n)`).
    fn define(name: &str) -> u64 {
        let line = HEADER
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name) && l.starts_with("#define"))
            .unwrap_or_else(|| panic!("{name} not in the header"));
        let v = line.split_whitespace().skip(2).collect::<String>();
        let v = v.trim_start_matches('(').trim_end_matches(')');
        if let Some((a, b)) = v.split_once("<<") {
            let a: u64 = a.trim_end_matches('U').parse().unwrap();
            return a << b.parse::<u64>().unwrap();
        }
        if let Some(h) = v.strip_prefix("0x") {
            return u64::from_str_radix(h, 16).unwrap();
        }
        v.parse().unwrap()
    }

    /// Field names of `struct NAME` in the header, in order.
    fn fields(name: &str) -> Vec<String> {
        let start = HEADER
            .find(&format!("struct {name} {{"))
            .expect("struct in header");
        let body = &HEADER[start..start + HEADER[start..].find("};").unwrap()];
        body.lines()
            .skip(1)
            .filter_map(|l| {
                let l = l.split("/*").next().unwrap().trim();
                l.strip_suffix(';')
                    .map(|d| d.split_whitespace().last().unwrap().to_string())
            })
            .collect()
    }

    #[test]
    fn struct_layout_matches_the_c_abi() {
        assert_eq!(size_of::<Info>(), 72);
        assert_eq!(offset_of!(Info, pci_bus), 12);
        assert_eq!(offset_of!(Info, vendor_id), 16);
        assert_eq!(offset_of!(Info, class_code), 20);
        assert_eq!(offset_of!(Info, bar0_size), 24);
        assert_eq!(offset_of!(Info, max_mappings), 40);
        assert_eq!(offset_of!(Info, pinned_bytes), 56);
        assert_eq!(offset_of!(Info, dma_mask), 64);
        assert_eq!(size_of::<MapReq>(), 48);
        assert_eq!(offset_of!(MapReq, addrs_len), 24);
        assert_eq!(offset_of!(MapReq, handle), 32);
        assert_eq!(offset_of!(MapReq, page_size), 44);
        assert_eq!(size_of::<UnmapReq>(), 16);
        assert_eq!(offset_of!(UnmapReq, flags_out), 8);
    }

    #[test]
    fn field_order_matches_the_header() {
        assert_eq!(
            fields("bam_nvme_info"),
            [
                "abi_version",
                "flags",
                "pci_domain",
                "pci_bus",
                "pci_device",
                "pci_function",
                "reserved0",
                "vendor_id",
                "device_id",
                "class_code",
                "bar0_size",
                "max_map_bytes",
                "max_mappings",
                "page_size",
                "nr_mappings",
                "deferred_mappings",
                "pinned_bytes",
                "dma_mask"
            ]
        );
        assert_eq!(
            fields("bam_nvme_map"),
            [
                "vaddr",
                "length",
                "addrs",
                "addrs_len",
                "flags",
                "handle",
                "entries",
                "page_size"
            ]
        );
        assert_eq!(fields("bam_nvme_unmap"), ["handle", "flags_out", "flags"]);
    }

    #[test]
    fn constants_match_the_header() {
        assert_eq!(define("BAM_NVME_ABI_VERSION"), ABI_VERSION as u64);
        assert_eq!(define("BAM_NVME_INFO_IOMMU_DMA"), INFO_IOMMU_DMA as u64);
        assert_eq!(
            define("BAM_NVME_INFO_IOMMU_PASSTHROUGH"),
            INFO_IOMMU_PASSTHROUGH as u64
        );
        assert_eq!(define("BAM_NVME_INFO_P2P_BUILT"), INFO_P2P_BUILT as u64);
        assert_eq!(
            define("BAM_NVME_INFO_P2P_AVAILABLE"),
            INFO_P2P_AVAILABLE as u64
        );
        assert_eq!(
            define("BAM_NVME_MAP_GPU_PERSISTENT"),
            MAP_GPU_PERSISTENT as u64
        );
        assert_eq!(define("BAM_NVME_UNMAP_REVOKED"), UNMAP_REVOKED as u64);
        assert_eq!(define("BAM_NVME_UNMAP_QUIESCED"), UNMAP_QUIESCED as u64);
        assert_eq!(define("BAM_NVME_INFO_REVOKED"), INFO_REVOKED as u64);
        assert_eq!(define("BAM_NVME_INFO_IOMMU_LAZY"), INFO_IOMMU_LAZY as u64);
    }

    #[test]
    fn ioctl_numbers() {
        // _IOR('B', 0, 72), _IOWR('B', 1..3, 48 / 16) as the kernel computes them
        assert_eq!(
            nix::request_code_read!(b'B', 0x00, size_of::<Info>()) as u64,
            0x8048_4200
        );
        assert_eq!(
            nix::request_code_readwrite!(b'B', 0x01, size_of::<MapReq>()) as u64,
            0xC030_4201
        );
        assert_eq!(
            nix::request_code_readwrite!(b'B', 0x02, size_of::<MapReq>()) as u64,
            0xC030_4202
        );
        assert_eq!(
            nix::request_code_readwrite!(b'B', 0x03, size_of::<UnmapReq>()) as u64,
            0xC010_4203
        );
        assert!(HEADER.contains("_IOR(BAM_NVME_IOC_MAGIC, 0x00, struct bam_nvme_info)"));
        assert!(HEADER.contains("_IOWR(BAM_NVME_IOC_MAGIC, 0x01, struct bam_nvme_map)"));
        assert!(HEADER.contains("_IOWR(BAM_NVME_IOC_MAGIC, 0x02, struct bam_nvme_map)"));
        assert!(HEADER.contains("_IOWR(BAM_NVME_IOC_MAGIC, 0x03, struct bam_nvme_unmap)"));
        assert!(HEADER.contains("#define BAM_NVME_IOC_MAGIC 'B'"));
    }

    #[test]
    fn missing_device_is_a_clear_error() {
        let e = KmodTransport::open("/dev/bam-nvme-does-not-exist")
            .err()
            .unwrap();
        assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e}");
        assert!(e.to_string().contains("bam bind"), "{e}");
        let e = KmodTransport::open("0000:ff:1f.7").err().unwrap();
        assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e}");
    }

    #[test]
    fn info_helpers() {
        let i = Info {
            pci_domain: 1,
            pci_bus: 2,
            pci_device: 3,
            pci_function: 4,
            flags: INFO_IOMMU_DMA,
            ..Default::default()
        };
        assert_eq!(i.bdf(), "0001:02:03.4");
        assert_eq!(i.iommu(), "dma");
        assert_eq!(Info::default().iommu(), "none");
    }

    #[test]
    fn map_errnos_with_a_remedy_are_typed() {
        use nix::errno::Errno;
        let e = map_ioctl_error(
            "kmod:bam0".into(),
            "bam0: MAP_GPU".into(),
            Errno::ENOTRECOVERABLE,
        );
        match e {
            Error::DeviceUnavailable { device, reason } => {
                assert_eq!(device, "kmod:bam0");
                assert!(
                    reason.starts_with("bam0: MAP_GPU: the device was revoked"),
                    "{reason}"
                );
                assert!(reason.contains("open it again"), "{reason}");
            }
            e => panic!("expected DeviceUnavailable, got {e:?}"),
        }
        let e = map_ioctl_error("kmod:bam0".into(), "bam0: MAP_HOST".into(), Errno::ENOSPC);
        assert!(
            matches!(&e, Error::DeviceUnavailable { reason, .. } if reason.contains("max_mappings")),
            "{e:?}"
        );
        let e = map_ioctl_error("kmod:bam0".into(), "bam0: MAP_GPU".into(), Errno::EIO);
        assert!(
            matches!(&e, Error::DeviceUnavailable { reason, .. } if reason.contains("PCIe error")),
            "{e:?}"
        );
        let e = map_ioctl_error("kmod:bam0".into(), "bam0: MAP_HOST".into(), Errno::EFAULT);
        assert!(matches!(e, Error::Os { .. }), "{e:?}");
    }
}
