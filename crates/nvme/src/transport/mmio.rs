//! A memory-mapped BAR0: the registers and doorbells of a PCI NVMe controller.

use crate::{Error, Result};
use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};
use std::num::NonZeroUsize;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;

/// BAR0 mapped into this process, uncached (the kernel maps device memory so).
pub(crate) struct BarMapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this object and valid until drop; register accesses are
// single aligned volatile loads/stores, which are safe from any thread (the controller
// protocol, not memory safety, orders them).
unsafe impl Send for BarMapping {}
// SAFETY: as above; &self only performs volatile MMIO.
unsafe impl Sync for BarMapping {}

impl BarMapping {
    /// Maps `len` bytes of the device file `fd` at `offset`, shared and read/write.
    pub fn map(fd: BorrowedFd<'_>, offset: u64, len: usize, what: &str) -> Result<Self> {
        let n = NonZeroUsize::new(len).ok_or_else(|| Error::ZeroLength {
            what: format!("{what}: BAR0 mapping"),
        })?;
        let off = libc::off_t::try_from(offset).map_err(|_| {
            Error::InvalidArgument(format!("{what}: BAR offset {offset} too large"))
        })?;
        // SAFETY: a fresh shared mapping with no address hint (it aliases nothing of ours);
        // the kernel validates the length and offset against the BAR.
        let p = unsafe {
            mmap(
                None,
                n,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd,
                off,
            )
        }
        .map_err(|e| Error::os(format!("{what}: mmap of BAR0"), e.into()))?;
        Ok(BarMapping {
            ptr: p.as_ptr() as *mut u8,
            len,
        })
    }

    fn reg(&self, offset: usize) -> Option<*mut u32> {
        (offset.is_multiple_of(4) && offset.checked_add(4).is_some_and(|end| end <= self.len)).then(
            || {
                // SAFETY: in bounds of the mapping (checked).
                unsafe { self.ptr.add(offset) as *mut u32 }
            },
        )
    }

    /// Reads the 32-bit register at `offset`; all ones when out of range (as a PCI read
    /// of nothing returns).
    pub fn read32(&self, offset: usize) -> u32 {
        match self.reg(offset) {
            // SAFETY: aligned, in-bounds MMIO register of the live mapping.
            Some(p) => unsafe { std::ptr::read_volatile(p) },
            None => u32::MAX,
        }
    }

    /// Writes the 32-bit register at `offset`; ignored when out of range.
    pub fn write32(&self, offset: usize, value: u32) {
        if let Some(p) = self.reg(offset) {
            // SAFETY: aligned, in-bounds MMIO register of the live mapping.
            unsafe { std::ptr::write_volatile(p, value) }
        }
    }

    /// The mapping's address and length.
    pub fn raw(&self) -> (*mut u8, usize) {
        (self.ptr, self.len)
    }
}

impl Drop for BarMapping {
    fn drop(&mut self) {
        if let Some(p) = NonNull::new(self.ptr as *mut libc::c_void) {
            // SAFETY: the mapping made in `map`; nothing uses it after the owner is dropped.
            let _ = unsafe { munmap(p, self.len) };
        }
    }
}
