//! Loading CUDA modules: the cache kernels the crate ships (`cuda/src/cache_kernels.cu`)
//! and users' own fatbins (see `examples/random_access`).

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use cudarc::driver::{result, sys, CudaStream};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

static CACHE_FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cache_kernels.fatbin"));

/// A kernel of a loaded [`Module`].
#[derive(Clone, Copy, Debug)]
pub struct Function(sys::CUfunction);
// SAFETY: CUfunction is a plain driver handle, usable from any thread once the context
// is current.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

/// A CUDA module (fatbin, cubin or PTX image) loaded into the GPU's context.
pub struct Module {
    gpu: Arc<Gpu>,
    module: sys::CUmodule,
    functions: Mutex<HashMap<String, Function>>,
}

// SAFETY: the module handle is only used through the (thread-safe) driver.
unsafe impl Send for Module {}
// SAFETY: as above; the function cache is behind a mutex.
unsafe impl Sync for Module {}

impl Module {
    /// Loads a module image (a fatbin built by nvcc `-fatbin`, a cubin, or NUL-terminated PTX).
    pub fn load(gpu: &Arc<Gpu>, image: &[u8]) -> Result<Self> {
        gpu.bind()?;
        // The driver reads the image during the call; keep an 8-byte aligned copy that
        // ends with a NUL (PTX images need it, fatbins ignore it).
        let mut buf = vec![0u64; image.len() / 8 + 2];
        // SAFETY: `buf` has at least image.len() + 8 bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                image.as_ptr(),
                buf.as_mut_ptr().cast::<u8>(),
                image.len(),
            )
        };
        // SAFETY: `buf` holds a complete image and lives for the duration of the call.
        let module = unsafe { result::module::load_data(buf.as_ptr().cast::<c_void>()) }?;
        Ok(Module {
            gpu: gpu.clone(),
            module,
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// The kernels the crate ships for the cache.
    pub(crate) fn cache_kernels(gpu: &Arc<Gpu>) -> Result<Self> {
        Self::load(gpu, CACHE_FATBIN)
    }

    /// The kernel named `name` (an `extern "C"` symbol).
    pub fn function(&self, name: &str) -> Result<Function> {
        let mut map = self.functions.lock().expect("function cache");
        if let Some(f) = map.get(name) {
            return Ok(*f);
        }
        let cname = CString::new(name)
            .map_err(|_| Error::InvalidArgument(format!("bad kernel name {name:?}")))?;
        self.gpu.bind()?;
        // SAFETY: `module` is loaded; `cname` is a valid C string.
        let f = Function(
            unsafe { result::module::get_function(self.module, cname) }.map_err(|e| {
                Error::InvalidArgument(format!("kernel `{name}` not found in the module: {e}"))
            })?,
        );
        map.insert(name.to_string(), f);
        Ok(f)
    }

    /// Launches kernel `name` with a 1-D grid on `stream`.
    ///
    /// # Safety
    /// `params` must hold one pointer per kernel parameter, in order, each pointing to a
    /// value with exactly the parameter's C layout (for `bam::array<T>`: an
    /// [`ArrayView`](super::ArrayView)); every device pointer passed must stay valid
    /// until the kernel has finished.
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
        self.gpu.bind()?;
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

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: loaded by us, unloaded once.
        let _ = unsafe { result::module::unload(self.module) };
    }
}

/// Pointer to a kernel argument, for [`Module::launch`].
pub fn arg<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}
