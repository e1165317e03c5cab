//! GPU memory, pinned host memory and copies.
//!
//! Memory is managed as raw device pointers rather than cudarc's `CudaSlice`, on
//! purpose: persistent kernels (a simulated array's controllers, a cache's fill service)
//! run for the life of their owner and share memory with user kernels on other streams,
//! so cudarc's per-allocation stream synchronisation would serialise (and deadlock) them.

use super::Gpu;
use crate::abi::Pod;
use crate::error::{Error, Result};
use cudarc::driver::{result, sys};
use std::sync::Arc;

/// Copies `out.len()` bytes from device address `src` (GPU memory or mapped host memory).
pub(crate) fn read_device(gpu: &Gpu, src: u64, out: &mut [u8]) -> Result<()> {
    gpu.bind()?;
    // SAFETY: the caller names a readable device range of out.len() bytes.
    unsafe { result::memcpy_dtoh_sync(out, src) }?;
    Ok(())
}

/// Copies `data` to device address `dst` on the GPU's copy stream, which runs beside
/// persistent kernels (a controller kernel polls what is written).
pub(crate) fn write_device_beside(gpu: &Gpu, dst: u64, data: &[u8]) -> Result<()> {
    gpu.bind()?;
    // SAFETY: the caller names a writable device range of data.len() bytes; `data`
    // outlives the synchronisation below.
    unsafe { result::memcpy_htod_async(dst, data, gpu.copy.cu_stream()) }?;
    gpu.copy.synchronize()?;
    Ok(())
}

/// Copies from device address `src` on the GPU's copy stream (beside persistent kernels).
pub(crate) fn read_device_beside(gpu: &Gpu, src: u64, out: &mut [u8]) -> Result<()> {
    gpu.bind()?;
    // SAFETY: the caller names a readable device range of out.len() bytes; `out`
    // outlives the synchronisation below.
    unsafe { result::memcpy_dtoh_async(out, src, gpu.copy.cu_stream()) }?;
    gpu.copy.synchronize()?;
    Ok(())
}

/// GPU memory (cuMemAlloc), freed on drop.
pub struct DeviceBuffer {
    gpu: Arc<Gpu>,
    ptr: u64,
    len: usize,
    leaked: bool,
}

impl DeviceBuffer {
    /// `len` bytes of zeroed GPU memory. The memory is zero when this returns.
    pub fn zeroed(gpu: &Arc<Gpu>, len: usize) -> Result<Self> {
        gpu.bind()?;
        let len = len.max(1);
        // SAFETY: plain allocation; freed in Drop.
        let ptr = unsafe { result::malloc_sync(len) }?;
        // The memset goes on the copy stream and is waited for. cuMemsetD8 (the
        // "synchronous" form) is asynchronous with respect to the host for device memory
        // and runs on the legacy default stream, which is not ordered with our
        // non-blocking streams: queued behind large memsets (media), it used to land
        // *after* the copies that filled queue tables and result buffers, zeroing them
        // again (null queue pointers -> illegal address in the controller kernel;
        // t_start_ns = 0 in benchmark results).
        // SAFETY: `ptr` has `len` bytes.
        unsafe { result::memset_d8_async(ptr, 0, len, gpu.copy.cu_stream()) }?;
        gpu.copy.synchronize()?;
        Ok(DeviceBuffer {
            gpu: gpu.clone(),
            ptr,
            len,
            leaked: false,
        })
    }

    /// Device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The GPU it lives on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: allocations are at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` to byte offset `off`.
    pub fn write<T: Pod>(&self, off: usize, data: &[T]) -> Result<()> {
        let bytes = crate::abi::as_bytes(data);
        check_bounds(off, bytes.len(), self.len, "write to a GPU buffer")?;
        self.gpu.bind()?;
        // SAFETY: the range was checked against the allocation; `bytes` outlives the
        // stream synchronisation below.
        unsafe {
            result::memcpy_htod_async(self.ptr + off as u64, bytes, self.gpu.copy.cu_stream())
        }?;
        self.gpu.copy.synchronize()?;
        Ok(())
    }

    /// Copies from byte offset `off` into `out`.
    pub fn read<T: Pod>(&self, off: usize, out: &mut [T]) -> Result<()> {
        // Pod: whatever bytes the GPU holds are a valid `T`.
        let dst = crate::abi::as_bytes_mut(out);
        check_bounds(off, dst.len(), self.len, "read of a GPU buffer")?;
        self.gpu.bind()?;
        // SAFETY: the source range was checked against the allocation; `dst` is
        // `out`'s bytes and outlives the synchronisation below.
        unsafe {
            result::memcpy_dtoh_async(dst, self.ptr + off as u64, self.gpu.copy.cu_stream())
        }?;
        self.gpu.copy.synchronize()?;
        Ok(())
    }

    /// Never frees the memory: for memory a kernel that could not be stopped may still
    /// use (freeing it could hand it to another allocation under that kernel).
    pub fn leak(&mut self) {
        self.leaked = true;
    }

    /// `sync`'s result, with every buffer of `keep` leaked when it failed: a wait for a
    /// kernel that failed or timed out leaves the kernel possibly running, and freeing
    /// what it writes would hand that memory to the next allocation under it. Says so
    /// (tracing warning) with the bytes kept.
    pub fn keep_unless_synced(sync: Result<()>, keep: &mut [&mut DeviceBuffer]) -> Result<()> {
        if let Err(e) = &sync {
            let bytes: usize = keep.iter().map(|b| b.len).sum();
            for b in keep.iter_mut() {
                b.leak();
            }
            tracing::warn!(
                "{e}: {bytes} B of GPU memory the kernel may still touch are never freed"
            );
        }
        sync
    }

    /// Sets every byte to zero.
    pub fn zero(&self) -> Result<()> {
        self.gpu.bind()?;
        // SAFETY: whole allocation.
        unsafe { result::memset_d8_async(self.ptr, 0, self.len, self.gpu.copy.cu_stream()) }?;
        self.gpu.copy.synchronize()?;
        Ok(())
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.leaked {
            return;
        }
        let _ = self.gpu.bind();
        // SAFETY: allocated by cuMemAlloc, freed once, stream-ordered after every copy
        // and memset (all of which were synchronised on this stream). cuMemFree would
        // wait for the persistent controller kernel.
        let _ = unsafe { result::free_async(self.ptr, self.gpu.copy.cu_stream()) };
        let _ = self.gpu.copy.synchronize();
    }
}

/// Checks that `len` bytes at byte offset `off` lie inside a buffer of `cap` bytes,
/// without wrapping: `off + len` is computed with `checked_add` (an unchecked sum could
/// wrap around in release builds and pass, turning the copy into one outside the
/// allocation). `what`: the access, for the error ("write to a pinned buffer").
fn check_bounds(off: usize, len: usize, cap: usize, what: &str) -> Result<()> {
    match off.checked_add(len) {
        Some(end) if end <= cap => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "{what} of {len} bytes at offset {off} is past its end ({cap} bytes)"
        ))),
    }
}

/// GPU memory whose first byte sits on an `align` boundary (64 KiB GPU pages for
/// nvidia_p2p), carved out of a slightly larger allocation.
pub struct AlignedBuffer {
    buf: DeviceBuffer,
    off: usize,
    len: usize,
}

impl AlignedBuffer {
    /// `len` zeroed bytes starting on a multiple of `align` (a power of two).
    pub fn zeroed(gpu: &Arc<Gpu>, len: usize, align: usize) -> Result<Self> {
        if !align.is_power_of_two() {
            return Err(Error::InvalidArgument(format!(
                "alignment {align} is not a power of two"
            )));
        }
        let total = len
            .checked_add(align)
            .ok_or_else(|| Error::InvalidArgument(format!("{len} bytes of GPU memory")))?;
        let buf = DeviceBuffer::zeroed(gpu, total)?;
        let off = (buf.ptr().next_multiple_of(align as u64) - buf.ptr()) as usize;
        Ok(AlignedBuffer { buf, off, len })
    }

    /// Device address of the aligned start.
    pub fn ptr(&self) -> u64 {
        self.buf.ptr() + self.off as u64
    }

    /// Usable bytes from [`Self::ptr`].
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` to byte offset `off` (from the aligned start).
    pub fn write<T: Pod>(&self, off: usize, data: &[T]) -> Result<()> {
        check_bounds(
            off,
            std::mem::size_of_val(data),
            self.len,
            "write to a GPU buffer",
        )?;
        // Cannot overflow: off + len <= self.len, and self.off + self.len fits in the
        // allocation (checked_add at allocation).
        self.buf.write(self.off + off, data)
    }

    /// Copies from byte offset `off` (from the aligned start) into `out`.
    pub fn read<T: Pod>(&self, off: usize, out: &mut [T]) -> Result<()> {
        check_bounds(
            off,
            std::mem::size_of_val(out),
            self.len,
            "read of a GPU buffer",
        )?;
        // Cannot overflow: as in `write`.
        self.buf.read(self.off + off, out)
    }

    /// Never frees the memory (see [`DeviceBuffer::leak`]).
    pub fn leak(&mut self) {
        self.buf.leak();
    }

    /// Sets `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` on the allocation, as GPUDirect RDMA asks
    /// of memory that a third-party device reads or writes: CUDA copies and kernels that
    /// touch it are then synchronous with respect to that device's DMA.
    pub fn set_sync_memops(&self) -> Result<()> {
        self.buf.gpu.bind()?;
        let mut one: u32 = 1;
        // SAFETY: a live allocation of ours; the attribute takes a pointer to an unsigned
        // int that is read during the call.
        unsafe {
            sys::cuPointerSetAttribute(
                (&mut one as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                self.buf.ptr(),
            )
        }
        .result()?;
        Ok(())
    }
}

/// Page-locked host memory mapped into the GPU's address space (zero-copy): kernels read
/// and write it at [`PinnedBuffer::dev_ptr`] over PCIe, the host through
/// [`PinnedBuffer::read`] / [`PinnedBuffer::write`] without a copy. The baseline every
/// "from host memory" figure of the docs is compared with (`zerocopy` in the kernel
/// suite), and a place for a kernel's small outputs.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use bam::cuda::PinnedBuffer;
/// let gpu = bam::Gpu::new(0)?;
/// let mut data = PinnedBuffer::new(&gpu, 1 << 20)?;
/// data.write(0, &vec![1.5f32; 1 << 18])?; // typed: any plain-old-data slice
/// // launch a kernel with `const float*` = data.dev_ptr() ... then, after it finished:
/// let mut back = vec![0f32; 4];
/// data.read(0, &mut back)?;
/// # Ok(()) }
/// ```
pub struct PinnedBuffer {
    gpu: Arc<Gpu>,
    host: *mut u8,
    dev: u64,
    len: usize,
}

// SAFETY: the buffer is plain memory; access from threads is the user's business
// through the raw pointers it hands out.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// `len` bytes of pinned, zeroed host memory, mapped for the GPU.
    pub fn new(gpu: &Arc<Gpu>, len: usize) -> Result<Self> {
        gpu.bind()?;
        let len = len.max(1);
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: plain allocation, freed in Drop.
        let host = unsafe { result::malloc_host(len, flags) }?.cast::<u8>();
        // SAFETY: `host` has `len` writable bytes.
        unsafe { std::ptr::write_bytes(host, 0, len) };
        let mut dev: sys::CUdeviceptr = 0;
        // SAFETY: `host` was allocated with DEVICEMAP.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host.cast(), 0) }.result()?;
        Ok(PinnedBuffer {
            gpu: gpu.clone(),
            host,
            dev,
            len,
        })
    }

    /// Host address.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }

    /// Device address.
    pub fn dev_ptr(&self) -> u64 {
        self.dev
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` to byte offset `off` (host to host). A kernel reading the range
    /// meanwhile sees some mix of old and new bytes. It takes `&mut self`: two threads
    /// writing one buffer through shared references were a data race reachable from safe
    /// code (the buffer is `Sync`).
    ///
    /// ```compile_fail
    /// // A buffer shared between threads cannot be written through `&`:
    /// fn racy(b: &bam::cuda::PinnedBuffer) {
    ///     b.write(0, &[1u8]).unwrap();
    /// }
    /// ```
    pub fn write<T: Pod>(&mut self, off: usize, data: &[T]) -> Result<()> {
        let data = crate::abi::as_bytes(data);
        check_bounds(off, data.len(), self.len, "write to a pinned buffer")?;
        self.as_mut_bytes()[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Copies `out.len()` elements from byte offset `off` (host memory: no transfer). Read
    /// after the kernels that write the range have finished; meanwhile `out` gets some mix
    /// of old and new bytes.
    pub fn read<T: Pod>(&self, off: usize, out: &mut [T]) -> Result<()> {
        let out = crate::abi::as_bytes_mut(out);
        check_bounds(off, out.len(), self.len, "read from a pinned buffer")?;
        // SAFETY: `off + out.len()` lies inside the allocation (checked above), which
        // lives as long as `self`; a raw copy makes no Rust reference to the bytes a
        // kernel may be writing.
        unsafe { std::ptr::copy_nonoverlapping(self.host.add(off), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// The buffer's bytes as the host sees them, to fill (in parallel: split the slice)
    /// or read. Use it between the kernels that touch the buffer: a kernel writing it
    /// meanwhile races with the slice.
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        // SAFETY: `host` has `len` bytes allocated by us for the buffer's lifetime, and
        // `&mut self` makes this the only host reference to them while it lives.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: allocated by malloc_host, freed once.
        let _ = unsafe { result::free_host(self.host.cast()) };
    }
}

#[cfg(test)]
mod bounds_tests {
    use super::check_bounds;

    /// DeviceBuffer and AlignedBuffer read/write bound `off + len` without overflow: a
    /// plain `off + len > cap` wraps with `off` near usize::MAX (release builds) and the
    /// check would pass. CPU-only: the check is a pure function.
    #[test]
    fn bounds_check_does_not_wrap() {
        assert!(check_bounds(0, 16, 16, "read").is_ok());
        assert!(check_bounds(8, 8, 16, "read").is_ok());
        assert!(check_bounds(16, 0, 16, "read").is_ok());
        assert!(check_bounds(9, 8, 16, "write").is_err());
        assert!(check_bounds(17, 0, 16, "write").is_err());
        assert!(check_bounds(usize::MAX, 1, 16, "write").is_err());
        assert!(check_bounds(usize::MAX - 3, 8, 16, "read").is_err());
        assert!(check_bounds(8, usize::MAX, 16, "read").is_err());
        assert!(check_bounds(usize::MAX, usize::MAX, usize::MAX, "read").is_err());
    }
}
