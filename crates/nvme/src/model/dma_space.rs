//! The controller model's view of DMA: which bus addresses are registered, and where they
//! point. Anything outside a registered region is a bus error, as under an IOMMU.

use crate::spec::status::GenericStatus;
use crate::spec::PAGE_SIZE;
use crate::transport::dma::HostPages;
use crate::transport::{DmaBuffer, GpuMapping};
use crate::{Error, Result};
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a registered region's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// Host memory at this address, readable and writable by the model.
    Host(usize),
    /// GPU memory. The model reaches it only through an [`ExternalMemory`] (a copy
    /// engine across PCIe), when one is set; otherwise it is valid only as a queue or
    /// data address for queues served elsewhere (the simulated array on the GPU).
    External,
}

/// How the model reaches external (GPU) memory: its DMA engine when the controller runs
/// on the CPU and its queues and buffers live in GPU memory. Addresses are the bus
/// addresses of the registered regions (device addresses, for the model's transport).
pub trait ExternalMemory: Send + Sync {
    /// Copies `out.len()` bytes at `addr` into `out`.
    fn read(&self, addr: u64, out: &mut [u8]) -> std::result::Result<(), String>;
    /// Copies `data` to `addr`; the bytes are visible to the memory's users when it
    /// returns, and two writes become visible in the order they were made.
    fn write(&self, addr: u64, data: &[u8]) -> std::result::Result<(), String>;
}

#[derive(Clone, Copy, Debug)]
struct Region {
    len: u64,
    kind: RegionKind,
}

/// First bus address handed out for host DMA buffers; regions are separated by an
/// unregistered guard page so overruns fault.
const HOST_IOVA_BASE: u64 = 0x10_0000_0000;

/// The model's table of DMA regions.
pub struct DmaSpace {
    regions: RwLock<BTreeMap<u64, Region>>,
    next_iova: Mutex<u64>,
    external: RwLock<Option<Arc<dyn ExternalMemory>>>,
    /// Test hook: every device access fails, as when a mapping is revoked under a
    /// running controller ([`Self::set_revoked`]).
    revoked: std::sync::atomic::AtomicBool,
}

impl DmaSpace {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(DmaSpace {
            regions: RwLock::new(BTreeMap::new()),
            next_iova: Mutex::new(HOST_IOVA_BASE),
            external: RwLock::new(None),
            revoked: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Fault injection for tests: while `revoked`, every DMA access of the controller
    /// ([`Self::read`], [`Self::write`]) fails with Data Transfer Error, as when the memory
    /// behind the bus addresses was unmapped (revoked) under a running controller. The
    /// model reacts as to any unreachable queue memory: it sets CSTS.CFS.
    pub fn set_revoked(&self, revoked: bool) {
        self.revoked
            .store(revoked, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_revoked(&self) -> bool {
        self.revoked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Lets the model read and write external regions through `mem` (a controller on
    /// the CPU serving queues in GPU memory).
    pub fn set_external_memory(&self, mem: Arc<dyn ExternalMemory>) {
        *self.external.write() = Some(mem);
    }

    /// Whether external regions are reachable ([`Self::set_external_memory`]).
    pub fn external_reachable(&self) -> bool {
        self.external.read().is_some()
    }

    fn external_access(
        &self,
        what: &str,
        addr: u64,
        len: usize,
        f: impl FnOnce(&dyn ExternalMemory) -> std::result::Result<(), String>,
    ) -> Result<(), GenericStatus> {
        let ext = self.external.read().clone();
        let Some(ext) = ext else {
            return Err(GenericStatus::DataTransferError);
        };
        f(&*ext).map_err(|e| {
            tracing::warn!(target: "bam_nvme::model", "DMA {what} of {len} B at {addr:#x} failed: {e}");
            GenericStatus::DataTransferError
        })
    }

    fn insert(&self, start: u64, len: u64, kind: RegionKind) -> Result<()> {
        let mut regions = self.regions.write();
        let end = start
            .checked_add(len)
            .ok_or_else(|| Error::InvalidArgument("DMA region wraps".into()))?;
        let overlaps_prev = regions
            .range(..end)
            .next_back()
            .is_some_and(|(&s, r)| s + r.len > start);
        if overlaps_prev {
            return Err(Error::InvalidArgument(format!(
                "DMA region {start:#x}+{len:#x} overlaps a registered one"
            )));
        }
        regions.insert(start, Region { len, kind });
        Ok(())
    }

    fn remove(&self, start: u64) {
        self.regions.write().remove(&start);
    }

    /// Allocates host memory and registers it at a fresh bus address.
    pub(crate) fn alloc_host(self: &Arc<Self>, len: usize) -> Result<DmaBuffer> {
        let pages = HostPages::alloc(len)?;
        let iova = {
            let mut next = self.next_iova.lock();
            let iova = *next;
            *next += (pages.len + PAGE_SIZE) as u64;
            iova
        };
        self.insert(
            iova,
            pages.len as u64,
            RegionKind::Host(pages.ptr.as_ptr() as usize),
        )?;
        let space = Arc::clone(self);
        let release = pages.release_after(move || space.remove(iova));
        let bus = (0..pages.len / PAGE_SIZE)
            .map(|i| iova + (i * PAGE_SIZE) as u64)
            .collect();
        // SAFETY: `pages` is a fresh private mapping of pages.len bytes, unmapped by
        // `release` only after its region is unregistered (so the model stops touching it).
        Ok(unsafe { DmaBuffer::from_raw_parts(pages.ptr, pages.len, bus, release) })
    }

    /// Registers an external (GPU) range; its bus address is its device address.
    pub(crate) fn register_external(
        self: &Arc<Self>,
        dev_ptr: u64,
        len: usize,
    ) -> Result<GpuMapping> {
        if len == 0 {
            return Err(Error::ZeroLength {
                what: "GPU memory registration".into(),
            });
        }
        self.insert(dev_ptr, len as u64, RegionKind::External)?;
        let space = Arc::clone(self);
        let page = 1usize << 16;
        let first = dev_ptr & !(page as u64 - 1);
        let n = ((dev_ptr - first) as usize + len).div_ceil(page);
        let pages = (0..n).map(|i| first + (i * page) as u64).collect();
        Ok(GpuMapping::new(
            dev_ptr,
            len,
            pages,
            page,
            Box::new(move || space.remove(dev_ptr)),
        ))
    }

    /// The kind of region that wholly contains `[addr, addr + len)`, if any.
    pub fn lookup(&self, addr: u64, len: u64) -> Option<RegionKind> {
        lookup_in(&self.regions.read(), addr, len)
    }

    /// Copies from bus memory into `out`.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), GenericStatus> {
        if self.is_revoked() {
            return Err(GenericStatus::DataTransferError);
        }
        let regions = self.regions.read(); // held so the region cannot be unmapped meanwhile
        match lookup_in(&regions, addr, out.len() as u64) {
            Some(RegionKind::Host(p)) => {
                // SAFETY: [p, p+len) lies inside a live registered host mapping (the read
                // lock keeps it registered and mapped). The driver may write other bytes of
                // the buffer concurrently, as with real DMA; we copy raw bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(p as *const u8, out.as_mut_ptr(), out.len())
                };
                Ok(())
            }
            Some(RegionKind::External) => {
                let len = out.len();
                self.external_access("read", addr, len, |e| e.read(addr, out))
            }
            None => Err(GenericStatus::DataTransferError),
        }
    }

    /// Copies `data` into bus memory.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), GenericStatus> {
        if self.is_revoked() {
            return Err(GenericStatus::DataTransferError);
        }
        let regions = self.regions.read();
        match lookup_in(&regions, addr, data.len() as u64) {
            Some(RegionKind::Host(p)) => {
                // SAFETY: as in `read`; the destination is device-writable DMA memory.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p as *mut u8, data.len()) };
                Ok(())
            }
            Some(RegionKind::External) => {
                self.external_access("write", addr, data.len(), |e| e.write(addr, data))
            }
            None => Err(GenericStatus::DataTransferError),
        }
    }
}

fn lookup_in(regions: &BTreeMap<u64, Region>, addr: u64, len: u64) -> Option<RegionKind> {
    let (&start, r) = regions.range(..=addr).next_back()?;
    let end = addr.checked_add(len)?;
    (end <= start + r.len).then(|| match r.kind {
        RegionKind::Host(p) => RegionKind::Host(p + (addr - start) as usize),
        RegionKind::External => RegionKind::External,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_memory_only() {
        let space = DmaSpace::new();
        let mut buf = space.alloc_host(8192).unwrap();
        buf.as_mut_slice()[4095] = 7;
        let base = buf.bus_addr(0);
        let mut one = [0u8; 1];
        space.read(base + 4095, &mut one).unwrap();
        assert_eq!(one[0], 7);
        assert_eq!(
            space.read(base + 8191, &mut [0u8; 2]),
            Err(GenericStatus::DataTransferError)
        );
        assert_eq!(
            space.write(base - 1, &[0]),
            Err(GenericStatus::DataTransferError)
        );
        space.write(base + 100, &[9, 9]).unwrap();
        assert_eq!(&buf.as_slice()[100..102], &[9, 9]);
        drop(buf);
        assert_eq!(
            space.read(base, &mut one),
            Err(GenericStatus::DataTransferError),
            "freed memory is unregistered"
        );
    }

    #[test]
    fn external_regions() {
        let space = DmaSpace::new();
        let m = space.register_external(0x7000_0000_0000, 1 << 20).unwrap();
        assert_eq!(
            space.lookup(0x7000_0000_1000, 64),
            Some(RegionKind::External)
        );
        assert_eq!(
            space.read(0x7000_0000_1000, &mut [0u8; 4]),
            Err(GenericStatus::DataTransferError)
        );
        assert!(
            space.register_external(0x7000_0000_8000, 4096).is_err(),
            "overlap rejected"
        );
        drop(m);
        assert_eq!(space.lookup(0x7000_0000_1000, 64), None);
    }

    /// A stand-in for GPU memory: a byte vector at a fixed base address.
    struct FakeGpu {
        base: u64,
        bytes: Mutex<Vec<u8>>,
    }

    impl ExternalMemory for FakeGpu {
        fn read(&self, addr: u64, out: &mut [u8]) -> std::result::Result<(), String> {
            let o = (addr - self.base) as usize;
            out.copy_from_slice(&self.bytes.lock()[o..o + out.len()]);
            Ok(())
        }
        fn write(&self, addr: u64, data: &[u8]) -> std::result::Result<(), String> {
            let o = (addr - self.base) as usize;
            self.bytes.lock()[o..o + data.len()].copy_from_slice(data);
            Ok(())
        }
    }

    #[test]
    fn external_regions_through_a_copy_engine() {
        let space = DmaSpace::new();
        let _m = space.register_external(0x7000_0000_0000, 1 << 16).unwrap();
        assert!(!space.external_reachable());
        let gpu = Arc::new(FakeGpu {
            base: 0x7000_0000_0000,
            bytes: Mutex::new(vec![0; 1 << 16]),
        });
        space.set_external_memory(gpu.clone());
        assert!(space.external_reachable());
        space.write(0x7000_0000_0010, &[1, 2, 3]).unwrap();
        assert_eq!(&gpu.bytes.lock()[0x10..0x13], &[1, 2, 3]);
        let mut back = [0u8; 3];
        space.read(0x7000_0000_0010, &mut back).unwrap();
        assert_eq!(back, [1, 2, 3]);
        assert_eq!(
            space.read(0x7000_0000_0000 + (1 << 16) - 1, &mut [0u8; 2]),
            Err(GenericStatus::DataTransferError),
            "past the region"
        );
    }
}
