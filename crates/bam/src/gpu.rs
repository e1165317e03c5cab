//! The CUDA driver through cudarc (dynamic loading): context, the embedded kernels,
//! GPU memory, mapped host memory and launches.
//!
//! Memory is managed as raw device pointers rather than cudarc's `CudaSlice`, on
//! purpose: the simulated controller kernel runs for the whole life of an array and
//! shares its queues with user kernels on other streams, so cudarc's per-allocation
//! stream synchronisation would serialise (and deadlock) them.

use crate::abi::Pod;
use crate::error::{Error, Result};
use crate::module::{Function, Module};
/// A CUDA stream (cudarc's), as [`Gpu::stream`] and a cache hand them out: kernels are
/// launched on one ([`crate::Module::launch`]).
pub use cudarc::driver::CudaStream;
use cudarc::driver::{result, sys, CudaContext};
use nix::sys::mman::{self, MapFlags, ProtFlags};
use std::sync::Arc;
use std::time::{Duration, Instant};

static SIM_FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sim.fatbin"));
static CACHE_FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cache.fatbin"));
static SCAN_FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/scan.fatbin"));

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

/// One GPU with the runtime's kernels loaded: the simulated controller (and the pattern
/// fill), the cache's service kernels (flush, bulk load and read of arrays) and the
/// scan kernel (bulk writes onto spans).
pub struct Gpu {
    ctx: Arc<CudaContext>,
    sim_module: Module,
    cache_module: Module,
    scan_module: Module,
    /// Multiprocessors.
    pub sms: u32,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Largest dynamic shared memory a block may opt into.
    pub smem_optin: u32,
    /// Dynamic shared memory the controller kernel's blocks ask for: its staging area
    /// when one 512-thread block already takes the whole register file (no other block
    /// can share the SM, and the SM keeps the rest as L1 cache), else all of it (so
    /// that no other block fits). 0 when the GPU has too little for the simulated array.
    pub sim_smem: u32,
    /// Device name.
    pub name: String,
    /// The simulated controller kernel for an array of this GPU alone.
    pub(crate) sim_controller: Function,
    /// The same for an array shared with other GPUs (their queues at system scope).
    pub(crate) sim_controller_shared: Function,
    pub(crate) fill_pattern: Function,
    /// Modules loaded with [`Gpu::module`], by image address.
    modules: std::sync::Mutex<Vec<(usize, Arc<Module>)>>,
    /// Persistent kernels running now (simulated arrays' controllers, caches' fill
    /// services): a module load meanwhile could wait for them forever, so it is refused.
    pub(crate) persistent: std::sync::atomic::AtomicU32,
    /// Non-blocking stream for allocations and copies. Everything goes through
    /// stream-ordered calls on it: cuMemFree and the legacy default stream would wait
    /// for the persistent controller kernel, which never ends on its own.
    copy: Arc<CudaStream>,
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
                    "compute capability {major}.{minor}: this build has images for sm_{} and PTX for \
                     the newest; rebuild with BAM_CUDA_ARCHS={major}{minor} (see the README)",
                    built.replace(',', ", sm_")
                ))
            }
            e => e,
        }
        };
        let sim_module = Module::load_into(&ctx, SIM_FATBIN).map_err(no_image)?;
        let cache_module = Module::load_into(&ctx, CACHE_FATBIN).map_err(no_image)?;
        let scan_module = Module::load_into(&ctx, SCAN_FATBIN).map_err(no_image)?;
        // The controller of a single GPU's array, and the one of an array shared by
        // several GPUs (system-scope ordering for the other GPUs' queues); both are
        // given the same launch configuration, from the larger of their needs.
        let sim_controller = sim_module.function("bam_sim_controller")?;
        let sim_controller_shared = sim_module.function("bam_sim_controller_shared")?;
        let fill_pattern = sim_module.function("bam_fill_pattern")?;
        let attribute = |f: &Function, a: sys::CUfunction_attribute| -> Result<u32> {
            // SAFETY: valid function handle and attribute.
            Ok(unsafe { result::function::get_function_attribute(f.handle(), a) }? as u32)
        };
        let controllers = [&sim_controller, &sim_controller_shared];
        let mut sim_regs = 0;
        // The controller's own static shared memory (a few words) counts against the
        // opt-in limit too.
        let mut sim_static_smem = 0;
        for f in controllers {
            use sys::CUfunction_attribute as A;
            sim_regs = sim_regs.max(attribute(f, A::CU_FUNC_ATTRIBUTE_NUM_REGS)?);
            sim_static_smem =
                sim_static_smem.max(attribute(f, A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?);
        }
        let regs_per_sm = ctx.attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
        )? as u32;
        // GPUs with less shared memory per block than the simulated controller's staging
        // area (consumer parts) run every backend but the simulated array: sim_smem stays
        // 0 and SimArray::new says why.
        let sim_fits = smem_optin >= crate::abi::BAM_SIM_SMEM_BYTES + sim_static_smem;
        let dyn_optin = smem_optin.saturating_sub(sim_static_smem);
        let sim_smem = if !sim_fits {
            0
        } else if sim_regs * 512 >= regs_per_sm {
            crate::abi::BAM_SIM_SMEM_BYTES
        } else {
            dyn_optin
        };
        if sim_fits {
            for f in controllers {
                // SAFETY: valid function handle and attribute.
                unsafe {
                    result::function::set_function_attribute(
                        f.handle(),
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        dyn_optin as i32,
                    )?;
                }
            }
        }
        Ok(Arc::new(Gpu {
            ctx,
            sim_module,
            cache_module,
            scan_module,
            sms,
            compute_capability: (major as u32, minor as u32),
            smem_optin,
            sim_smem,
            name,
            sim_controller,
            sim_controller_shared,
            fill_pattern,
            modules: std::sync::Mutex::new(Vec::new()),
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

    /// The runtime's cache kernels.
    pub(crate) fn cache_module(&self) -> &Module {
        &self.cache_module
    }

    /// The runtime's scan kernels (bulk writes onto spans).
    pub(crate) fn scan_module(&self) -> &Module {
        &self.scan_module
    }

    /// The runtime's simulator kernels.
    pub(crate) fn sim_module(&self) -> &Module {
        &self.sim_module
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

/// A persistent kernel: one that runs until it is asked to stop (a simulated array's
/// controllers, a cache's fill service), on a stream of its own. While one runs, module
/// loads are refused ([`Gpu::check_no_persistent_kernel`]). It counts as running from its
/// launch until it has been seen to finish, so that its owner, after a failed stop, leaks
/// the memory the kernel may still touch rather than free it under it.
pub(crate) struct PersistentKernel {
    gpu: Arc<Gpu>,
    stream: Arc<CudaStream>,
    running: bool,
}

impl PersistentKernel {
    /// Not launched yet; `start` launches it.
    pub(crate) fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        Ok(PersistentKernel {
            gpu: gpu.clone(),
            stream: gpu.stream()?,
            running: false,
        })
    }

    /// Launched and not yet seen to finish.
    pub(crate) fn running(&self) -> bool {
        self.running
    }

    /// Launches the kernel (`launch`, on the kernel's stream) and waits until `started`
    /// reports all `blocks` of it running (bounded: 10 s, then an error naming `what`; the
    /// kernel then counts as running, and the owner stops it).
    pub(crate) fn start(
        &mut self,
        what: &str,
        blocks: u32,
        launch: impl FnOnce(&CudaStream) -> Result<()>,
        started: impl Fn() -> Result<u32>,
    ) -> Result<()> {
        launch(&self.stream)?;
        self.running = true;
        self.gpu
            .persistent
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let t0 = Instant::now();
        loop {
            let n = started()?;
            if n == blocks {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(Error::Timeout(format!(
                    "only {n} of {blocks} blocks of {what} became resident (is another kernel \
                     filling the GPU?)"
                )));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Asks the kernel to stop (`ask`) and waits for it, up to `timeout`. Nothing to do if
    /// it is not running.
    pub(crate) fn stop(
        &mut self,
        ask: impl FnOnce() -> Result<()>,
        timeout: Duration,
    ) -> Result<()> {
        if !self.running {
            return Ok(());
        }
        ask()?;
        self.gpu.sync_timeout(&self.stream, timeout)?;
        self.running = false;
        self.gpu
            .persistent
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }
}

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

/// Page-locked host memory mapped into the GPU's address space (zero-copy).
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
    /// fn racy(b: &bam::gpu::PinnedBuffer) {
    ///     b.write(0, &[1u8]).unwrap();
    /// }
    /// ```
    pub fn write(&mut self, off: usize, data: &[u8]) -> Result<()> {
        check_bounds(off, data.len(), self.len, "write to a pinned buffer")?;
        self.as_mut_bytes()[off..off + data.len()].copy_from_slice(data);
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

/// A simulated SSD's media file (crate::media_file: locked, with its header) mapped into
/// host memory and registered with the GPU (zero-copy).
pub struct MappedFile {
    gpu: Arc<Gpu>,
    host: *mut u8,
    dev: u64,
    len: usize,
    /// The open, locked file: the lock lasts as long as the mapping.
    _file: nix::fcntl::Flock<std::fs::File>,
}

// SAFETY: plain shared mapping.
unsafe impl Send for MappedFile {}
// SAFETY: as above.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// Opens the media file `path` for a medium of `len` bytes (created when absent; see
    /// crate::media_file for what is refused), maps its medium read-write and registers it.
    pub fn open(gpu: &Arc<Gpu>, path: &std::path::Path, len: usize) -> Result<Self> {
        let f = crate::media_file::open(path, len as u64)?;
        let n = std::num::NonZeroUsize::new(len)
            .ok_or_else(|| Error::InvalidArgument("a mapped file needs a length".into()))?;
        // SAFETY: a fresh shared mapping of a file we hold open and locked, whose length
        // media_file::open checked (header + len), from the page after the header; no
        // address hint: it aliases nothing of ours; unmapped in Drop.
        let mapping = unsafe {
            mman::mmap(
                None,
                n,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &*f,
                crate::media_file::HEADER_BYTES as i64,
            )
        }
        .map_err(std::io::Error::from)?;
        let p = mapping.as_ptr();
        gpu.bind()?;
        let flags = sys::CU_MEMHOSTREGISTER_DEVICEMAP | sys::CU_MEMHOSTREGISTER_PORTABLE;
        // SAFETY: `p` is a live mapping of `len` bytes.
        let r = unsafe { sys::cuMemHostRegister_v2(p, len, flags) }.result();
        if let Err(e) = r {
            // SAFETY: undo our own mapping.
            let _ = unsafe { mman::munmap(mapping, len) };
            // Seen on Linux 6.18 (H100, driver 580): ext4 files fail with INVALID_VALUE,
            // tmpfs files work (writable long-term pins of dirty-tracked files are refused).
            if e.0 != sys::CUresult::CUDA_ERROR_INVALID_VALUE {
                return Err(e.into());
            }
            return Err(Error::InvalidArgument(format!(
                "the GPU could not pin the mapping of {} ({e:?}): recent Linux refuses writable \
                 long-term pins of files on file systems that track dirty pages (ext4, xfs...); \
                 put the media file on tmpfs or hugetlbfs, e.g. /dev/shm/NAME",
                path.display()
            )));
        }
        let mut dev: sys::CUdeviceptr = 0;
        // SAFETY: registered above with DEVICEMAP.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, p, 0) }.result()?;
        Ok(MappedFile {
            gpu: gpu.clone(),
            host: p.cast(),
            dev,
            len,
            _file: f,
        })
    }

    /// Device address of the mapping.
    pub fn dev_ptr(&self) -> u64 {
        self.dev
    }

    /// Host address of the mapping.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: registered and mapped by us, undone once.
        unsafe {
            let _ = sys::cuMemHostUnregister(self.host.cast());
            if let Some(p) = std::ptr::NonNull::new(self.host.cast()) {
                let _ = mman::munmap(p, self.len);
            }
        }
    }
}

/// A real controller's BAR0 registered with the GPUs (cuMemHostRegister IOMEMORY), so
/// that GPU threads can store to its doorbells.
pub struct RegisteredBar {
    gpu: Arc<Gpu>,
    host: *mut u8,
    /// Device address of BAR0's first byte, for each GPU it was registered with (in the
    /// order given).
    pub devs: Vec<u64>,
}

// SAFETY: MMIO mapping handle only.
unsafe impl Send for RegisteredBar {}
// SAFETY: as above.
unsafe impl Sync for RegisteredBar {}

impl RegisteredBar {
    /// Registers `len` bytes of a BAR mapping at `host` with every GPU of `gpus` (one
    /// registration, portable to every context when there are several).
    ///
    /// # Safety
    /// `host` must be a live mmap of the device's BAR of at least `len` bytes that stays
    /// mapped for the lifetime of the result.
    pub unsafe fn register(gpus: &[Arc<Gpu>], host: *mut u8, len: usize) -> Result<Self> {
        let first = gpus
            .first()
            .ok_or_else(|| Error::InvalidArgument("register a BAR with at least one GPU".into()))?;
        first.bind()?;
        let mut flags = sys::CU_MEMHOSTREGISTER_IOMEMORY | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        if gpus.len() > 1 {
            flags |= sys::CU_MEMHOSTREGISTER_PORTABLE;
        }
        // SAFETY: caller's contract.
        unsafe { sys::cuMemHostRegister_v2(host.cast(), len, flags) }.result()?;
        // Unregistered again on drop, should a device pointer be refused below.
        let mut bar = RegisteredBar {
            gpu: first.clone(),
            host,
            devs: Vec::new(),
        };
        bar.devs = gpus
            .iter()
            .map(|g| {
                g.bind()?;
                let mut dev: sys::CUdeviceptr = 0;
                // SAFETY: registered above (portable to every context when several).
                unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host.cast(), 0) }.result()?;
                Ok(dev)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(bar)
    }
}

impl Drop for RegisteredBar {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: registered by us.
        let _ = unsafe { sys::cuMemHostUnregister(self.host.cast()) };
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
