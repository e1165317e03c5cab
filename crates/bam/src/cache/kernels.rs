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

    /// Loads a module and resolves `names` now. CUDA loads kernels lazily by default,
    /// and loading one can need a context synchronisation, which never comes while the
    /// simulated controllers (a persistent kernel) run: load and resolve user kernels
    /// before starting a simulated array, or run with `CUDA_MODULE_LOADING=EAGER`.
    pub fn load_with(gpu: &Arc<Gpu>, image: &[u8], names: &[&str]) -> Result<Self> {
        let m = Self::load(gpu, image)?;
        for n in names {
            m.function(n)?;
        }
        Ok(m)
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
        // SAFETY: forwarded to the caller's contract.
        unsafe {
            self.gpu
                .launch(crate::gpu::Kernel(f.0), grid, block, smem, stream, params)
        }
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

/// Every kernel of cache_kernels.cu.
const CACHE_KERNELS: &[&str] = &[
    "bam_cache_flush",
    "bam_cache_store_bytes",
    "bam_cache_load_bytes",
    "bam_cache_fill_u64",
    "bam_cache_torture",
    "bam_cache_types_write_1",
    "bam_cache_types_check_1",
    "bam_cache_types_write_4",
    "bam_cache_types_check_4",
    "bam_cache_types_write_8",
    "bam_cache_types_check_8",
    "bam_cache_types_write_16",
    "bam_cache_types_check_16",
    "bam_cache_types_write_24",
    "bam_cache_types_check_24",
    "bam_cache_pin_hog",
    "bam_cache_check_u32",
    "bam_cb_linear",
    "bam_cb_raw_linear",
    "bam_cb_random",
    "bam_cb_raw_random",
    "bam_cb_cla",
    "bam_cb_raw_cla",
    "bam_cb_latency",
];

type Loaded = Vec<(usize, Arc<Module>)>;
static CACHE_MODULES: std::sync::OnceLock<Mutex<Loaded>> = std::sync::OnceLock::new();

/// Loads the cache's kernels for `gpu` (once per process). Call before starting the
/// first simulated array on that GPU: see [`Module::load_with`].
pub fn init(gpu: &Arc<Gpu>) -> Result<Arc<Module>> {
    let mut v = CACHE_MODULES
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .expect("cache modules");
    let key = Arc::as_ptr(gpu) as usize;
    if let Some((_, m)) = v.iter().find(|(k, _)| *k == key) {
        return Ok(m.clone());
    }
    let m = Arc::new(Module::load_with(gpu, CACHE_FATBIN, CACHE_KERNELS)?);
    v.push((key, m.clone()));
    Ok(m)
}

/// The cache's kernels if [`init`] ran for `gpu`.
pub(crate) fn loaded(gpu: &Arc<Gpu>) -> Option<Arc<Module>> {
    let v = CACHE_MODULES.get()?.lock().expect("cache modules");
    let key = Arc::as_ptr(gpu) as usize;
    v.iter().find(|(k, _)| *k == key).map(|(_, m)| m.clone())
}

pub use crate::gpu::arg;
