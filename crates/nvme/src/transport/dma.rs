//! DMA-able memory handed out by transports.

use crate::spec::PAGE_SIZE;
use crate::{Error, Result};
use std::ptr::NonNull;

/// Releases a DMA mapping and frees its memory when the buffer is dropped.
pub type Release = Box<dyn FnOnce() + Send + Sync>;

/// Host memory that a controller can reach by DMA: page-aligned, a whole number of
/// 4 KiB pages, each with its bus address.
///
/// The controller may write into the buffer while a command that names it is in flight;
/// the queue code only hands out slices when no such command is.
pub struct DmaBuffer {
    ptr: NonNull<u8>,
    len: usize,
    pages: Vec<u64>,
    release: Option<Release>,
}

// SAFETY: the buffer exclusively owns its memory (a private anonymous mapping), so it can
// move between threads; shared access goes through &self methods that only read.
unsafe impl Send for DmaBuffer {}
// SAFETY: &DmaBuffer allows only reads of the memory (and of the page table).
unsafe impl Sync for DmaBuffer {}

impl DmaBuffer {
    /// Wraps memory a transport has mapped.
    ///
    /// # Safety
    /// `ptr` must be page-aligned and valid for reads and writes of `len` bytes until
    /// `release` runs, nothing else may access it meanwhile, `len` must be a multiple of
    /// 4096, and `pages[i]` must be the bus address of the i-th 4 KiB page.
    pub unsafe fn from_raw_parts(
        ptr: NonNull<u8>,
        len: usize,
        pages: Vec<u64>,
        release: Release,
    ) -> Self {
        debug_assert_eq!(len % PAGE_SIZE, 0);
        debug_assert_eq!(pages.len(), len / PAGE_SIZE);
        DmaBuffer {
            ptr,
            len,
            pages,
            release: Some(release),
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Host address.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    /// Host address, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    /// Bus address of each 4 KiB page.
    pub fn pages(&self) -> &[u64] {
        &self.pages
    }
    /// Bus address of byte `offset`.
    pub fn bus_addr(&self, offset: usize) -> u64 {
        assert!(
            offset < self.len,
            "offset {offset} beyond DMA buffer of {} bytes",
            self.len
        );
        self.pages[offset / PAGE_SIZE] + (offset % PAGE_SIZE) as u64
    }
    /// The contents.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (constructor contract); &self excludes writers.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    /// The contents, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Volatile read of a `T` at byte `offset` (for entries the device writes, e.g. CQEs).
    pub fn read_volatile<T: Copy>(&self, offset: usize) -> T {
        assert!(offset + std::mem::size_of::<T>() <= self.len);
        assert_eq!(offset % std::mem::align_of::<T>(), 0);
        // SAFETY: in bounds and aligned (checked above); T is Copy plain data.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(offset) as *const T) }
    }

    /// Volatile write of a `T` at byte `offset` (for entries the device reads, e.g. SQEs).
    pub fn write_volatile<T: Copy>(&self, offset: usize, value: T) {
        assert!(offset + std::mem::size_of::<T>() <= self.len);
        assert_eq!(offset % std::mem::align_of::<T>(), 0);
        // SAFETY: in bounds and aligned; the memory is owned by this buffer and written
        // only through volatile stores at entry granularity, never through a reference
        // that is alive at the same time (queue memory is never sliced).
        unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(offset) as *mut T, value) }
    }
}

impl Drop for DmaBuffer {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl std::fmt::Debug for DmaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaBuffer")
            .field("len", &self.len)
            .field("first_page", &self.pages.first())
            .finish()
    }
}

/// GPU memory made reachable by a controller.
pub struct GpuMapping {
    /// Device address of the mapped range.
    pub dev_ptr: u64,
    /// Length in bytes.
    pub len: usize,
    /// Bus address of each GPU page.
    pub pages: Vec<u64>,
    /// GPU page size in bytes (64 KiB on NVIDIA GPUs).
    pub page_size: usize,
    release: Option<Release>,
}

impl GpuMapping {
    /// A mapping whose `release` undoes it when dropped.
    pub fn new(
        dev_ptr: u64,
        len: usize,
        pages: Vec<u64>,
        page_size: usize,
        release: Release,
    ) -> Self {
        GpuMapping {
            dev_ptr,
            len,
            pages,
            page_size,
            release: Some(release),
        }
    }
    /// Bus address of byte `offset` of the range.
    pub fn bus_addr(&self, offset: usize) -> u64 {
        assert!(offset < self.len);
        let abs = (self.dev_ptr % self.page_size as u64) as usize + offset;
        self.pages[abs / self.page_size] + (abs % self.page_size) as u64
    }
}

impl Drop for GpuMapping {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl std::fmt::Debug for GpuMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMapping")
            .field("dev_ptr", &self.dev_ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// Anonymous, zeroed, page-aligned host memory, locked into RAM.
pub(crate) struct HostPages {
    pub ptr: NonNull<u8>,
    pub len: usize,
}

impl HostPages {
    /// Maps `len` bytes rounded up to whole pages.
    pub fn alloc(len: usize) -> Result<Self> {
        if len == 0 {
            return Err(Error::ZeroLength {
                what: "DMA buffer allocation".into(),
            });
        }
        let len = len.checked_next_multiple_of(PAGE_SIZE).ok_or_else(|| {
            Error::InvalidArgument(format!("DMA buffer of {len} bytes is too large"))
        })?;
        // SAFETY: anonymous private mapping with no address hint; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::os(
                format!("mmap of {len} bytes for DMA"),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(HostPages {
            ptr: NonNull::new(p as *mut u8).expect("mmap returned null"),
            len,
        })
    }

    /// A release action that unmaps the memory, after `before` (which undoes the DMA
    /// mapping) has run. Hand it to [`DmaBuffer::from_raw_parts`].
    pub fn release_after(&self, before: impl FnOnce() + Send + Sync + 'static) -> Release {
        let (addr, len) = (self.ptr.as_ptr() as usize, self.len);
        Box::new(move || {
            before();
            // SAFETY: (addr, len) is the mapping made by `alloc`; the DmaBuffer that owns
            // this release is being dropped, so nothing uses the memory any more, and
            // `before` has removed the device's access to it.
            unsafe { libc::munmap(addr as *mut libc::c_void, len) };
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_pages_are_zeroed_and_aligned() {
        let hp = HostPages::alloc(5000).unwrap();
        assert_eq!(hp.len, 8192);
        assert_eq!(hp.ptr.as_ptr() as usize % PAGE_SIZE, 0);
        let release = hp.release_after(|| {});
        // SAFETY: freshly mapped, valid for len bytes, unmapped by `release` on drop.
        let buf =
            unsafe { DmaBuffer::from_raw_parts(hp.ptr, hp.len, vec![0x1000, 0x5000], release) };
        assert!(buf.as_slice().iter().all(|&b| b == 0));
        assert_eq!(buf.bus_addr(4096 + 12), 0x500C);
        buf.write_volatile::<u64>(8, 77);
        assert_eq!(buf.read_volatile::<u64>(8), 77);
    }

    #[test]
    fn zero_allocation_is_an_error() {
        assert!(matches!(HostPages::alloc(0), Err(Error::ZeroLength { .. })));
    }

    #[test]
    fn gpu_mapping_bus_addresses() {
        let m = GpuMapping::new(
            0x7f00_0001_0000 + 0x100,
            0x20000,
            vec![0xA_0000, 0xC_0000, 0xE_0000],
            0x10000,
            Box::new(|| {}),
        );
        assert_eq!(m.bus_addr(0), 0xA_0100);
        assert_eq!(m.bus_addr(0x10000 - 0x100), 0xC_0000);
    }
}
