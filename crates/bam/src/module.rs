//! CUDA modules: the runtime's own (loaded by [`Gpu::new`]) and users' fatbins.
//!
//! Every kernel of a module is resolved and loaded when the module loads
//! (`cuModuleEnumerateFunctions` + `cuFuncLoad`), never on first launch: CUDA loads
//! kernels lazily by default, and a lazy load while a persistent kernel runs (the
//! simulated SSD array's controllers) can wait for it forever. So there is no list of
//! kernel names to keep in step with the `.cu` file, and loading a module before starting
//! a simulated array is all a user has to remember.
//!
//! ```no_run
//! # fn main() -> bam::Result<()> {
//! static KERNELS: &[u8] = &[]; // include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin"))
//! let gpu = bam::Gpu::new(0)?;
//! let m = bam::Module::load(&gpu, KERNELS)?; // before any simulated array starts
//! let stream = gpu.stream()?;
//! let (mut n, mut out) = (1024u64, 0u64);
//! // SAFETY (of the launch): `my_kernel(uint64_t, uint64_t*)`, buffers outlive the sync.
//! unsafe { m.launch(&stream, "my_kernel", 4, 256, 0, &mut [bam::arg(&mut n), bam::arg(&mut out)])? };
//! # Ok(()) }
//! ```
//!
//! [`Gpu::new`]: crate::Gpu::new

use crate::error::{Error, Result};
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::Arc;

/// Pointer to a kernel argument, for the `params` of a launch:
/// `[arg(&mut view), arg(&mut n)]`.
pub fn arg<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

/// A kernel of a loaded [`Module`].
#[derive(Clone, Copy, Debug)]
pub struct Function(pub(crate) sys::CUfunction);
// SAFETY: CUfunction is a plain driver handle, usable from any thread once the context
// is current.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Function {
    /// Blocks of `block` threads (with `smem` bytes of dynamic shared memory) that fit on
    /// one SM at once: the occupancy calculator's answer.
    pub fn max_blocks_per_sm(&self, block: u32, smem: usize) -> Result<u32> {
        // SAFETY: a valid function handle of a loaded module.
        let n = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(self.0, block as i32, smem)
        }?;
        Ok(n.max(0) as u32)
    }
}

/// A CUDA module (a fatbin built by nvcc `-fatbin`, a cubin, or NUL-terminated PTX)
/// loaded into a GPU's context, every kernel resolved.
pub struct Module {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    functions: HashMap<String, Function>,
}

// SAFETY: the module handle is only used through the (thread-safe) driver; the function
// table is immutable after loading.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

impl Module {
    /// Loads a module image into `gpu`'s context and resolves every kernel in it.
    /// Fails (rather than hang) while a simulated array runs on `gpu`: load first.
    pub fn load(gpu: &crate::Gpu, image: &[u8]) -> Result<Self> {
        gpu.check_no_persistent_kernel()?;
        Self::load_into(gpu.context(), image)
    }

    pub(crate) fn load_into(ctx: &Arc<CudaContext>, image: &[u8]) -> Result<Self> {
        ctx.bind_to_thread()?;
        // The driver reads the image during the call; keep an 8-byte aligned copy that
        // ends with a NUL (PTX images need it, fatbins ignore it).
        let mut buf = vec![0u64; image.len() / 8 + 2];
        // SAFETY: `buf` has at least image.len() + 8 bytes and does not overlap `image`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                image.as_ptr(),
                buf.as_mut_ptr().cast::<u8>(),
                image.len(),
            )
        };
        // SAFETY: `buf` holds a complete image and lives for the duration of the call.
        let module = unsafe { result::module::load_data(buf.as_ptr().cast::<c_void>()) }?;
        let mut m = Module {
            ctx: ctx.clone(),
            module,
            functions: HashMap::new(),
        };
        m.resolve_all()?;
        Ok(m)
    }

    /// Resolves and loads every kernel of the module (no lazy loading later).
    fn resolve_all(&mut self) -> Result<()> {
        let mut count: std::ffi::c_uint = 0;
        // SAFETY: a loaded module; `count` is a valid out-pointer.
        unsafe { sys::cuModuleGetFunctionCount(&mut count, self.module) }.result()?;
        let mut fns = vec![std::ptr::null_mut(); count as usize];
        // SAFETY: `fns` has room for `count` handles.
        unsafe { sys::cuModuleEnumerateFunctions(fns.as_mut_ptr(), count, self.module) }
            .result()?;
        for f in fns {
            // SAFETY: a function handle of this module.
            unsafe { sys::cuFuncLoad(f) }.result()?;
            let mut name: *const std::ffi::c_char = std::ptr::null();
            // SAFETY: a valid function handle; the driver returns a pointer to a
            // NUL-terminated name that lives as long as the module.
            unsafe { sys::cuFuncGetName(&mut name, f) }.result()?;
            if name.is_null() {
                continue;
            }
            // SAFETY: non-null, NUL-terminated (the driver's contract), read at once.
            let name = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            self.functions.insert(name, Function(f));
        }
        Ok(())
    }

    /// The kernel named `name` (an `extern "C"` symbol).
    pub fn function(&self, name: &str) -> Result<Function> {
        self.functions.get(name).copied().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "kernel `{name}` is not in the module (it has {} kernels)",
                self.functions.len()
            ))
        })
    }

    /// Names of the module's kernels.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.functions.keys().map(String::as_str)
    }

    /// Launches kernel `name` with a 1-D grid on `stream`.
    ///
    /// # Safety
    /// `params` must hold one pointer per kernel parameter, in order, each pointing to a
    /// value with exactly the parameter's C layout (for `bam::array<T>`: an
    /// [`ArrayView`](crate::cache::ArrayView)); every device pointer passed must stay
    /// valid until the kernel has finished.
    pub unsafe fn launch(
        &self,
        stream: &CudaStream,
        name: &str,
        grid: u32,
        block: u32,
        smem: u32,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let f = self.function(name)?;
        // SAFETY: forwarded to the caller's contract.
        unsafe { self.launch_function(stream, f, grid, block, smem, params) }
    }

    /// Launches `f` (a kernel of this module).
    ///
    /// # Safety
    /// As [`Module::launch`].
    pub unsafe fn launch_function(
        &self,
        stream: &CudaStream,
        f: Function,
        grid: u32,
        block: u32,
        smem: u32,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        self.ctx.bind_to_thread()?;
        // SAFETY: forwarded to the caller's contract.
        unsafe {
            result::launch_kernel(
                f.0,
                (grid, 1, 1),
                (block, 1, 1),
                smem,
                stream.cu_stream(),
                params,
            )
        }?;
        Ok(())
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: loaded by us, unloaded once.
        let _ = unsafe { result::module::unload(self.module) };
    }
}
