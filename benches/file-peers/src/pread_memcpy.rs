//! The `pread-memcpy` peer: what a user writes first. Each thread `pread`s a piece into
//! its pinned host buffer (`cuMemHostAlloc`) and copies it into GPU memory with one
//! synchronous `cuMemcpyHtoD`, one piece after the other.

use crate::run::{Counts, Job, Worker};
use anyhow::{anyhow, Context, Result};
use cudarc::driver::{result, sys, CudaContext};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// GPU 0's primary context, or why there is none (the case is then SKIPPED).
pub fn gpu() -> std::result::Result<Arc<CudaContext>, String> {
    // SAFETY: only tries to load the driver library; no CUDA call is made without it.
    if !unsafe { sys::is_culib_present() } {
        return Err("the CUDA driver library libcuda.so cannot be loaded".into());
    }
    result::init().map_err(|e| format!("cuInit: {e}"))?;
    match CudaContext::device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) => return Err("the driver sees no GPU".into()),
        Err(e) => return Err(format!("cuDeviceGetCount: {e}")),
    }
    CudaContext::new(0).map_err(|e| format!("a context on GPU 0: {e}"))
}

/// Page-locked host memory from `cuMemHostAlloc`, freed on drop.
struct Pinned {
    ptr: *mut u8,
    len: usize,
}

impl Pinned {
    fn new(len: usize) -> Result<Pinned> {
        // SAFETY: FFI allocation in the context bound to this thread; flags 0 is plain
        // page-locked memory (cudaMallocHost's), which the CPU reads at full speed.
        let ptr = unsafe { result::malloc_host(len, 0) }
            .map_err(|e| anyhow!("cuMemHostAlloc of {len} B: {e}"))?;
        let ptr = ptr as *mut u8;
        // SAFETY: `len` bytes just allocated, written before anything reads them.
        unsafe { ptr.write_bytes(0, len) };
        Ok(Pinned { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `len` initialized bytes owned by self; no copy reads or writes them
        // outside the synchronous calls below.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc in `new`, freed once; no copy is pending
        // (every copy is synchronous).
        let _ = unsafe { result::free_host(self.ptr.cast()) };
    }
}

/// GPU memory from `cuMemAlloc`, freed on drop.
struct DeviceMem(sys::CUdeviceptr);

impl DeviceMem {
    fn new(len: usize) -> Result<DeviceMem> {
        // SAFETY: FFI allocation in the context bound to this thread.
        let p = unsafe { result::malloc_sync(len) }
            .map_err(|e| anyhow!("cuMemAlloc of {len} B: {e}"))?;
        Ok(DeviceMem(p))
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in `new`, freed once, no copy pending.
        let _ = unsafe { result::free_sync(self.0) };
    }
}

/// A thread's pinned buffer and its piece of GPU memory.
pub struct PreadWorker<'f> {
    file: &'f File,
    pinned: Pinned,
    dev: DeviceMem,
    _ctx: Arc<CudaContext>,
}

impl<'f> PreadWorker<'f> {
    /// Binds `ctx` to this thread and allocates one piece of `bs` on each side.
    pub fn new(ctx: &Arc<CudaContext>, file: &'f File, bs: u64) -> Result<PreadWorker<'f>> {
        let bs = usize::try_from(bs).context("--bs too large")?;
        ctx.bind_to_thread()
            .map_err(|e| anyhow!("binding the CUDA context: {e}"))?;
        Ok(PreadWorker {
            file,
            pinned: Pinned::new(bs)?,
            dev: DeviceMem::new(bs)?,
            _ctx: ctx.clone(),
        })
    }

    /// Copies the GPU's piece back and checks it against the pattern at `off`.
    fn check_device(&self, off: u64, counts: &mut Counts) -> Result<()> {
        let mut back = vec![0u8; self.pinned.len];
        // SAFETY: `dev` holds `len` bytes in this thread's context; the copy is
        // synchronous into a buffer of the same length.
        unsafe { result::memcpy_dtoh_sync(&mut back, self.dev.0) }
            .map_err(|e| anyhow!("cuMemcpyDtoH: {e}"))?;
        counts.checked(&back, off);
        Ok(())
    }
}

impl Worker for PreadWorker<'_> {
    fn run(&mut self, job: &Job) -> Result<Counts> {
        let mut counts = Counts::default();
        let mut last = None;
        let mut k = 0;
        while job.more(k) {
            let off = job.plan.offset(job.thread, k);
            let len = self.pinned.len;
            self.file
                .read_exact_at(self.pinned.bytes_mut(), off)
                .with_context(|| format!("pread of {len} B at offset {off}"))?;
            if job.verify {
                counts.checked(self.pinned.bytes(), off);
            }
            // SAFETY: `dev` holds as many bytes as the pinned source in this thread's
            // context; the copy is synchronous, so the source stays put throughout.
            unsafe { result::memcpy_htod_sync(self.dev.0, self.pinned.bytes()) }
                .map_err(|e| anyhow!("cuMemcpyHtoD of {len} B: {e}"))?;
            counts.ops += 1;
            last = Some(off);
            k += 1;
        }
        if let (true, Some(off)) = (job.verify, last) {
            self.check_device(off, &mut counts)?;
        }
        Ok(counts)
    }
}
