//! DMA-able memory handed out by transports.

use crate::spec::PAGE_SIZE;
use crate::{Error, Result};
use nix::sys::mman::{mmap_anonymous, munmap, MapFlags, ProtFlags};
use std::num::NonZeroUsize;
use std::ptr::NonNull;

/// Releases a DMA mapping and frees its memory when the buffer is dropped.
pub type Release = Box<dyn FnOnce() + Send + Sync>;

/// Host memory that a controller can reach by DMA: page-aligned, a whole number of
/// 4 KiB pages, each with its bus address.
///
/// # Access rules
///
/// * Reads of typed values from the memory ([`DmaBuffer::read_volatile`]) require
///   [`bytemuck::Pod`]: every bit pattern the device may have written is a valid value,
///   so a hostile device cannot make the driver hold an invalid `bool`, enum or
///   reference.
/// * Writes from the host ([`DmaBuffer::write_volatile`], [`DmaBuffer::as_mut_slice`])
///   take `&mut self`, so they can never overlap a live `&[u8]` from
///   [`DmaBuffer::as_slice`] on another thread: `&DmaBuffer` is read-only, which is what
///   makes the type `Sync`.
/// * Bounds are checked with `checked_add` (an offset near `usize::MAX` cannot wrap).
/// * The controller itself may write into the buffer while a command that names it is in
///   flight, outside Rust's knowledge, like any DMA. The queue code only hands out slices
///   when no such command is, and quarantines buffers whose commands timed out;
///   callers that point the device at a buffer themselves (e.g.
///   [`crate::Controller::admin_command`]) take that obligation on in an `unsafe` block.
pub struct DmaBuffer {
    ptr: NonNull<u8>,
    len: usize,
    pages: Vec<u64>,
    release: Option<Release>,
}

// SAFETY: the buffer exclusively owns its memory (a private anonymous mapping), so it can
// move between threads; shared access goes through &self methods that only read.
unsafe impl Send for DmaBuffer {}
// SAFETY: &DmaBuffer allows only reads of the memory (and of the page table): every
// host-side write (`write_volatile`, `as_mut_slice`, `as_mut_ptr`) takes &mut self.
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

    /// Panics unless `[offset, offset + size_of::<T>())` lies in the buffer (without
    /// wrapping) and `offset` is aligned for `T`.
    fn check_access<T>(&self, what: &str, offset: usize) {
        let size = std::mem::size_of::<T>();
        assert!(
            offset.checked_add(size).is_some_and(|end| end <= self.len),
            "{what} of {size} bytes at offset {offset} beyond DMA buffer of {} bytes",
            self.len
        );
        assert!(
            offset.is_multiple_of(std::mem::align_of::<T>()),
            "{what} at offset {offset} is not aligned to {}",
            std::mem::align_of::<T>()
        );
    }

    /// Volatile read of a `T` at byte `offset` (for entries the device writes, e.g. CQEs).
    ///
    /// `T` is plain old data: any bytes the device wrote are a valid `T`. A type with
    /// invalid bit patterns does not compile:
    ///
    /// ```compile_fail
    /// # fn f(buf: &bam_nvme::DmaBuffer) {
    /// let b: bool = buf.read_volatile(0); // bool is not Pod
    /// # }
    /// ```
    ///
    /// # Panics
    /// If the read is out of bounds or misaligned (a caller bug, never device input).
    pub fn read_volatile<T: bytemuck::Pod>(&self, offset: usize) -> T {
        self.check_access::<T>("read", offset);
        // SAFETY: [offset, offset + size_of::<T>()) lies in the buffer (checked without
        // overflow above) and is aligned; ptr is valid for len bytes (constructor
        // contract); T is Pod, so whatever bytes the device wrote form a valid T.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(offset) as *const T) }
    }

    /// Volatile write of a `T` at byte `offset` (for entries the device reads, e.g. SQEs).
    ///
    /// Takes `&mut self`: no slice of the buffer can be alive meanwhile.
    ///
    /// ```compile_fail
    /// # fn f(buf: &bam_nvme::DmaBuffer) {
    /// buf.write_volatile::<u64>(0, 1); // needs &mut
    /// # }
    /// ```
    ///
    /// # Panics
    /// If the write is out of bounds or misaligned.
    pub fn write_volatile<T: bytemuck::Pod>(&mut self, offset: usize, value: T) {
        self.check_access::<T>("write", offset);
        // SAFETY: in bounds and aligned (checked above without overflow); &mut self makes
        // this the only host access; the memory is owned by this buffer.
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
    /// Undoes the mapping when the caller knows that no command can reach it any more
    /// ([`GpuMapping::release_quiesced`]); `None`: the same as `release`.
    release_quiesced: Option<Release>,
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
            release_quiesced: None,
        }
    }

    /// The same mapping, with another way to undo it for [`Self::release_quiesced`]
    /// (the kernel module releases such a mapping at once instead of deferring the
    /// release until the controller stops).
    pub fn with_quiesced_release(mut self, release: Release) -> Self {
        self.release_quiesced = Some(release);
        self
    }

    /// Undoes the mapping, stating that no command can still reach it: the queues that
    /// used it were deleted, or every command on it completed. Dropping the mapping
    /// instead lets the transport decide (the kernel module keeps memory pinned while
    /// the controller runs, unless a strict IOMMU protects it).
    pub fn release_quiesced(mut self) {
        if let Some(r) = self.release_quiesced.take() {
            self.release = None;
            r();
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
        let n = NonZeroUsize::new(len).ok_or_else(|| Error::ZeroLength {
            what: "DMA buffer allocation".into(),
        })?;
        // SAFETY: an anonymous private mapping with no address hint: it aliases nothing.
        let p = unsafe {
            mmap_anonymous(
                None,
                n,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_POPULATE,
            )
        }
        .map_err(|e| Error::os(format!("mmap of {len} bytes for DMA"), e.into()))?;
        Ok(HostPages {
            ptr: p.cast::<u8>(),
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
            if let Some(p) = NonNull::new(addr as *mut libc::c_void) {
                let _ = unsafe { munmap(p, len) };
            }
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
        let mut buf =
            unsafe { DmaBuffer::from_raw_parts(hp.ptr, hp.len, vec![0x1000, 0x5000], release) };
        assert!(buf.as_slice().iter().all(|&b| b == 0));
        assert_eq!(buf.bus_addr(4096 + 12), 0x500C);
        buf.write_volatile::<u64>(8, 77);
        assert_eq!(buf.read_volatile::<u64>(8), 77);
    }

    fn small_buffer() -> DmaBuffer {
        let hp = HostPages::alloc(4096).unwrap();
        let release = hp.release_after(|| {});
        // SAFETY: freshly mapped, valid for len bytes, unmapped by `release` on drop.
        unsafe { DmaBuffer::from_raw_parts(hp.ptr, hp.len, vec![0x1000], release) }
    }

    /// Finding: `offset + size_of::<T>() <= len` wrapped for offsets near usize::MAX
    /// (an out-of-bounds read in release builds, an overflow panic in debug builds).
    #[test]
    #[should_panic(expected = "beyond DMA buffer")]
    fn read_bounds_do_not_wrap() {
        let buf = small_buffer();
        let _: u64 = buf.read_volatile(usize::MAX - 7);
    }

    #[test]
    #[should_panic(expected = "beyond DMA buffer")]
    fn write_bounds_do_not_wrap() {
        let mut buf = small_buffer();
        buf.write_volatile::<u32>(usize::MAX - 1, 1);
    }

    #[test]
    #[should_panic(expected = "beyond DMA buffer")]
    fn read_at_the_end_is_out_of_bounds() {
        let buf = small_buffer();
        let _: u64 = buf.read_volatile(4096 - 4);
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
