//! One GPU: its context (cudarc, dynamic loading), the modules loaded into it, peer
//! access between GPUs, bounded waits for streams.

use super::Module;
use crate::error::{Error, Result};
/// A CUDA stream (cudarc's), as [`Gpu::stream`] and a cache hand them out: kernels are
/// launched on one ([`super::Module::launch`]).
pub use cudarc::driver::CudaStream;
use cudarc::driver::{result, sys, CudaContext};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// True when the CUDA driver library can be loaded and reports at least one GPU.
pub fn gpu_available() -> bool {
    // SAFETY: only probes for the library; no CUDA call is made if it is absent.
    if !unsafe { sys::is_culib_present() } {
        return false;
    }
    result::init().is_ok() && CudaContext::device_count().map(|n| n > 0).unwrap_or(false)
}

/// The ordinal of the GPU that owns device address `ptr`, and the allocation's range
/// (start, bytes): for a copy engine that must pick the right GPU by address.
pub fn owner_of(ptr: u64) -> Result<(usize, u64, u64)> {
    let mut ordinal: std::ffi::c_int = -1;
    let mut start: sys::CUdeviceptr = 0;
    let mut size: usize = 0;
    let attr = |a, out: *mut std::ffi::c_void| {
        // SAFETY: `out` points at a value of the type the attribute returns (int for the
        // ordinal, CUdeviceptr for the start, size_t for the size).
        unsafe { sys::cuPointerGetAttribute(out, a, ptr) }.result()
    };
    use sys::CUpointer_attribute as A;
    attr(
        A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        (&mut ordinal as *mut std::ffi::c_int).cast(),
    )?;
    attr(
        A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        (&mut start as *mut u64).cast(),
    )?;
    attr(
        A::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        (&mut size as *mut usize).cast(),
    )?;
    let ordinal = usize::try_from(ordinal)
        .map_err(|_| Error::InvalidArgument(format!("{ptr:#x} is not GPU memory")))?;
    Ok((ordinal, start, size as u64))
}

/// One GPU, with the runtime's kernels loaded ([`crate::runtime`]): its context, the
/// modules loaded into it, and a stream for allocations and copies.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    /// Multiprocessors.
    pub sms: u32,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Largest dynamic shared memory a block may opt into.
    pub smem_optin: u32,
    /// Device name.
    pub name: String,
    /// Modules loaded with [`Gpu::module`] (the runtime's when the GPU was opened), by
    /// image address.
    modules: std::sync::Mutex<Vec<(usize, Arc<Module>)>>,
    /// Persistent kernels running now (simulated arrays' controllers, caches' fill
    /// services): a module load meanwhile could wait for them forever, so it is refused.
    pub(crate) persistent: std::sync::atomic::AtomicU32,
    /// Non-blocking stream for allocations and copies. Everything goes through
    /// stream-ordered calls on it: cuMemFree and the legacy default stream would wait
    /// for persistent kernels, which never end on their own.
    pub(super) copy: Arc<CudaStream>,
}

impl Gpu {
    /// Opens GPU `ordinal` and loads the runtime's kernels (all of them, now: see
    /// [`Module`]).
    pub fn new(ordinal: usize) -> Result<Arc<Gpu>> {
        if !gpu_available() {
            return Err(Error::NoGpu(
                "the CUDA driver (libcuda.so) is missing or sees no GPU".into(),
            ));
        }
        let ctx = CudaContext::new(ordinal)?;
        ctx.bind_to_thread()?;
        // SAFETY: we manage synchronisation ourselves (raw pointers, explicit streams);
        // no cudarc-tracked allocation is used by this crate.
        unsafe { ctx.disable_event_tracking() };
        let copy = ctx.new_stream()?;
        let (major, minor) = ctx.compute_capability()?;
        let built = env!("BAM_CUDA_ARCHS_BUILT");
        if major < 8 {
            return Err(Error::NoGpu(format!(
                "compute capability {major}.{minor}: the kernels need sm_80 or newer \
                 (this build has images for sm_{})",
                built.replace(',', ", sm_")
            )));
        }
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            as u32;
        let smem_optin = ctx.attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )? as u32;
        let name = ctx.name()?;
        let no_image = |e: Error| {
            match e {
            Error::Driver(d) if d.0 == sys::CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU => {
                Error::NoGpu(format!(
                    "compute capability {major}.{minor}: this build has images for sm_{} and \
                     PTX for the newest; rebuild with BAM_CUDA_ARCHS={major}{minor} (see the README)",
                    built.replace(',', ", sm_")
                ))
            }
            e => e,
        }
        };
        // The runtime's kernels are loaded now, while no persistent kernel can run yet
        // (see `module`).
        let mut modules = Vec::new();
        for image in crate::runtime::images() {
            let m = Module::load_into(&ctx, image).map_err(no_image)?;
            modules.push((image.as_ptr() as usize, Arc::new(m)));
        }
        Ok(Arc::new(Gpu {
            ctx,
            sms,
            compute_capability: (major as u32, minor as u32),
            smem_optin,
            name,
            modules: std::sync::Mutex::new(modules),
            persistent: std::sync::atomic::AtomicU32::new(0),
            copy,
        }))
    }

    /// The module of a fatbin embedded in the program (`static` bytes), loaded on first
    /// use and kept for the life of this GPU: test, benchmark and user kernels. Load it
    /// before starting a simulated array or building a cache (see [`Module`]).
    pub fn module(&self, image: &'static [u8]) -> Result<Arc<Module>> {
        let mut v = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        let key = image.as_ptr() as usize;
        if let Some((_, m)) = v.iter().find(|(k, _)| *k == key) {
            return Ok(m.clone());
        }
        self.check_no_persistent_kernel()?;
        let m = Arc::new(Module::load_into(&self.ctx, image)?);
        v.push((key, m.clone()));
        Ok(m)
    }

    /// A module load while a simulated array's controllers run can wait for them
    /// forever (CUDA may need the context idle to load code): refuse it with an error
    /// that says what to do instead of hanging.
    pub(crate) fn check_no_persistent_kernel(&self) -> Result<()> {
        let n = self.persistent.load(std::sync::atomic::Ordering::Acquire);
        if n > 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot load a CUDA module while {n} persistent kernel(s) run on this GPU \
                 (simulated SSD controllers, cache fill services: the load could wait for them \
                 forever): load modules (bam::Module::load, Gpu::module, a crate's kernels()) \
                 before building the array or the cache"
            )));
        }
        Ok(())
    }

    /// The cudarc context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// A new non-blocking stream.
    pub fn stream(&self) -> Result<Arc<CudaStream>> {
        Ok(self.ctx.new_stream()?)
    }

    /// Makes the context current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        Ok(self.ctx.bind_to_thread()?)
    }

    /// The CUDA device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// Lets this GPU's kernels load and store `peer`'s memory (and only that direction).
    /// A clear error when the two GPUs cannot reach each other (no NVLink and no PCIe
    /// peer-to-peer path between them).
    pub fn enable_peer_access(&self, peer: &Gpu) -> Result<()> {
        if self.ordinal() == peer.ordinal() {
            return Ok(());
        }
        let mut can: std::ffi::c_int = 0;
        // SAFETY: `can` is a valid out-pointer; both devices are open.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), peer.ctx.cu_device()) }
            .result()?;
        if can == 0 {
            return Err(Error::Platform {
                what: format!(
                    "GPU {} cannot reach GPU {}'s memory (no peer-to-peer path between them)",
                    self.ordinal(),
                    peer.ordinal()
                ),
                fix: "give each GPU its own simulated array, or use GPUs on one NVLink or PCIe switch \
                      (`nvidia-smi topo -m`)"
                    .into(),
            });
        }
        self.bind()?;
        // SAFETY: the peer's context is alive (held by `peer`); flags must be 0.
        match unsafe { sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) }.result() {
            Ok(()) => Ok(()),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits for `stream` with a bound; a stream that does not drain in time is an error
    /// (the GPU is left to finish on its own).
    pub fn sync_timeout(&self, stream: &CudaStream, timeout: Duration) -> Result<()> {
        self.bind()?;
        let t0 = Instant::now();
        loop {
            // SAFETY: valid stream handle.
            match unsafe { sys::cuStreamQuery(stream.cu_stream()) } {
                sys::CUresult::CUDA_SUCCESS => return Ok(()),
                sys::CUresult::CUDA_ERROR_NOT_READY => {}
                e => return Err(Error::Driver(cudarc::driver::DriverError(e))),
            }
            if t0.elapsed() > timeout {
                return Err(Error::Timeout(format!(
                    "GPU work did not finish within {timeout:?}"
                )));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}
