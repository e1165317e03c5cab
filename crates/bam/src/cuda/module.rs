//! CUDA modules (the runtime's own, loaded by [`Gpu::new`], and users' fatbins) and the
//! one way to launch their kernels.
//!
//! Every kernel of a module is resolved and loaded when the module loads
//! (`cuModuleEnumerateFunctions` + `cuFuncLoad`), never on first launch: CUDA loads
//! kernels lazily by default, and a lazy load while a persistent kernel runs (the
//! simulated SSD array's controllers, a cache's fill service) can wait for it forever. So
//! there is no list of kernel names to keep in step with the `.cu` file, and loading a
//! module before starting a simulated array or building a cache is all a user has to
//! remember.
//!
//! The parameter layout of every kernel is read at load too (`cuFuncGetParamInfo`), and
//! every launch ([`Module::launch`], [`Module::launch_function`]) compares the arguments
//! with it: a launch with too few or too many arguments, or with one whose size differs
//! from its parameter's (a `u32` for a `uint64_t`), fails with
//! [`Error::InvalidArgument`] naming the kernel and the parameter instead of running the
//! kernel on garbage. Arguments are typed: a tuple of plain-old-data values
//! ([`KernelArg`]: integers, floats, device addresses as `u64`, the `repr(C)` views of
//! [`abi`](crate::abi) and `cache`), or for lists built at run time a
//! slice of [`KernelParam`]s.
//!
//! ```no_run
//! # fn main() -> bam::Result<()> {
//! static KERNELS: &[u8] = &[]; // include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin"))
//! let gpu = bam::Gpu::new(0)?;
//! let m = bam::Module::load(&gpu, KERNELS)?; // before any simulated array or cache
//! let stream = gpu.stream()?;
//! let out = bam::cuda::DeviceBuffer::zeroed(&gpu, 8)?;
//! // SAFETY: `my_kernel(uint64_t n, uint64_t* out)` (count and sizes are checked); `out`
//! // is a device address that stays allocated until the synchronisation below.
//! unsafe { m.launch(&stream, "my_kernel", 4, 256, 0, &(1024u64, out.ptr()))? };
//! gpu.sync_timeout(&stream, std::time::Duration::from_secs(10))?;
//! # Ok(()) }
//! ```
//!
//! [`Gpu::new`]: super::Gpu::new

use crate::abi::Pod;
use crate::error::{Error, Result};
use cudarc::driver::{result, sys, CudaContext, CudaStream, DriverError};
use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::Arc;

/// A value a kernel takes by value: plain old data ([`Pod`]: integers, floats, arrays of
/// them, the `repr(C)` structs of [`abi`](crate::abi) such as
/// `ArrayView` for `bam::array<T>` or `IoView` for
/// `bam_io_view`). Its bytes are copied into the kernel's parameter buffer at the launch.
/// A device pointer parameter (`T*`) takes the address as a `u64`; a `size_t` a `u64`
/// (or `usize`), an `unsigned`/`uint32_t` a `u32`.
pub trait KernelArg: Pod {}

impl<T: Pod> KernelArg for T {}

/// One argument of a launch: the bytes of a borrowed [`KernelArg`]. For argument lists
/// built at run time (a slice or `Vec` of these is [`KernelArgs`]); fixed lists are
/// simpler as tuples.
#[derive(Clone, Copy, Debug)]
pub struct KernelParam<'a>(&'a [u8]);

impl<'a> KernelParam<'a> {
    /// The argument `v`, borrowed until the launch has read it.
    pub fn new<T: KernelArg>(v: &'a T) -> Self {
        KernelParam(bytemuck::bytes_of(v))
    }

    /// Its size in bytes (compared with the parameter's at the launch).
    pub fn size(&self) -> usize {
        self.0.len()
    }

    /// Its bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The pointer `cuLaunchKernel` wants (the driver only reads through it).
    fn as_launch_ptr(&self) -> *mut c_void {
        self.0.as_ptr().cast_mut().cast()
    }
}

/// A kernel's argument list, in parameter order: a tuple of up to 12 [`KernelArg`]s
/// (`&(view, n, out.ptr())`, `&(c,)` for one, `&()` for none), or a slice or `Vec` of
/// [`KernelParam`]s.
pub trait KernelArgs {
    /// The arguments, in order.
    fn params(&self) -> Vec<KernelParam<'_>>;
}

impl KernelArgs for () {
    fn params(&self) -> Vec<KernelParam<'_>> {
        Vec::new()
    }
}

impl KernelArgs for [KernelParam<'_>] {
    fn params(&self) -> Vec<KernelParam<'_>> {
        self.to_vec()
    }
}

impl KernelArgs for Vec<KernelParam<'_>> {
    fn params(&self) -> Vec<KernelParam<'_>> {
        self.clone()
    }
}

impl<const N: usize> KernelArgs for [KernelParam<'_>; N] {
    fn params(&self) -> Vec<KernelParam<'_>> {
        self.to_vec()
    }
}

macro_rules! tuple_args {
    ($($t:ident . $i:tt),+) => {
        impl<$($t: KernelArg),+> KernelArgs for ($($t,)+) {
            fn params(&self) -> Vec<KernelParam<'_>> {
                vec![$(KernelParam::new(&self.$i)),+]
            }
        }
    };
}

tuple_args!(A.0);
tuple_args!(A.0, B.1);
tuple_args!(A.0, B.1, C.2);
tuple_args!(A.0, B.1, C.2, D.3);
tuple_args!(A.0, B.1, C.2, D.3, E.4);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10, L.11);

/// Compares a launch's arguments with the kernel's parameter sizes (in order).
fn check_args(kernel: &str, expected: &[usize], given: &[KernelParam<'_>]) -> Result<()> {
    if expected.len() != given.len() {
        return Err(Error::InvalidArgument(format!(
            "kernel `{kernel}` takes {} parameter(s), the launch gives {} argument(s)",
            expected.len(),
            given.len()
        )));
    }
    for (i, (&want, got)) in expected.iter().zip(given).enumerate() {
        if want != got.size() {
            return Err(Error::InvalidArgument(format!(
                "kernel `{kernel}`: parameter {i} is {want} bytes, the argument given is {} bytes",
                got.size()
            )));
        }
    }
    Ok(())
}

/// Kernel parameters hold at most 32764 bytes (CUDA 12.1 and later), each at least one.
const MAX_PARAMS: usize = 32764;

/// Sizes of `f`'s parameters, in order: `cuFuncGetParamInfo` for index 0, 1, ... until it
/// answers `CUDA_ERROR_INVALID_VALUE` (an index past the last parameter).
fn param_sizes(f: sys::CUfunction) -> Result<Vec<usize>> {
    let mut sizes = Vec::new();
    while sizes.len() <= MAX_PARAMS {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: a loaded function handle; both out-pointers are valid for the call.
        match unsafe { sys::cuFuncGetParamInfo(f, sizes.len(), &mut offset, &mut size) } {
            sys::CUresult::CUDA_SUCCESS => sizes.push(size),
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(sizes),
            e => return Err(DriverError(e).into()),
        }
    }
    Err(Error::InvalidArgument(format!(
        "cuFuncGetParamInfo reports more than {MAX_PARAMS} parameters"
    )))
}

/// A module image loaded into a context: unloaded when its last holder goes (the
/// [`Module`], or a [`Function`] of it, which therefore can never name an unloaded kernel).
struct Loaded {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
}

// SAFETY: the module handle is only used through the (thread-safe) driver.
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: loaded by us, unloaded once, when nothing holds it any more.
        let _ = unsafe { result::module::unload(self.module) };
    }
}

/// A kernel of a loaded [`Module`]. It holds the module loaded: dropping the `Module`
/// while a `Function` of it lives keeps the kernel's code in the context (a handle to
/// an unloaded kernel was reachable from safe code before).
#[derive(Clone)]
pub struct Function {
    handle: sys::CUfunction,
    _module: Arc<Loaded>,
}
// SAFETY: CUfunction is a plain driver handle, usable from any thread once the context
// is current; the module it belongs to stays loaded while the Function lives.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Function").field(&self.handle).finish()
    }
}

impl Function {
    /// The driver's handle (valid while this Function lives).
    pub(crate) fn handle(&self) -> sys::CUfunction {
        self.handle
    }

    /// Blocks of `block` threads (with `smem` bytes of dynamic shared memory) that fit on
    /// one SM at once: the occupancy calculator's answer.
    pub fn max_blocks_per_sm(&self, block: u32, smem: usize) -> Result<u32> {
        // SAFETY: a valid function handle of a loaded module.
        let n = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(self.handle, block as i32, smem)
        }?;
        Ok(n.max(0) as u32)
    }
}

/// What a launch checks its arguments against.
struct Kernel {
    name: String,
    /// Parameter sizes in bytes, in order.
    params: Vec<usize>,
}

/// A CUDA module (a fatbin built by nvcc `-fatbin`, a cubin, or NUL-terminated PTX)
/// loaded into a GPU's context, every kernel resolved and its parameter layout read.
pub struct Module {
    ctx: Arc<CudaContext>,
    loaded: Arc<Loaded>,
    functions: HashMap<String, Function>,
    kernels: HashMap<sys::CUfunction, Kernel>,
}

// SAFETY: the module handle is only used through the (thread-safe) driver; the function
// tables are immutable after loading.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

impl Module {
    /// Loads a module image into `gpu`'s context and resolves every kernel in it.
    /// Fails (rather than hang) while a simulated array runs on `gpu`: load first.
    pub fn load(gpu: &super::Gpu, image: &[u8]) -> Result<Self> {
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
            loaded: Arc::new(Loaded {
                ctx: ctx.clone(),
                module,
            }),
            functions: HashMap::new(),
            kernels: HashMap::new(),
        };
        m.resolve_all()?;
        Ok(m)
    }

    /// Resolves and loads every kernel of the module (no lazy loading later) and reads
    /// its parameter layout.
    fn resolve_all(&mut self) -> Result<()> {
        let mut count: std::ffi::c_uint = 0;
        // SAFETY: a loaded module; `count` is a valid out-pointer.
        unsafe { sys::cuModuleGetFunctionCount(&mut count, self.loaded.module) }.result()?;
        let mut fns = vec![std::ptr::null_mut(); count as usize];
        // SAFETY: `fns` has room for `count` handles.
        unsafe { sys::cuModuleEnumerateFunctions(fns.as_mut_ptr(), count, self.loaded.module) }
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
            let params = param_sizes(f)?;
            self.functions.insert(
                name.clone(),
                Function {
                    handle: f,
                    _module: self.loaded.clone(),
                },
            );
            self.kernels.insert(f, Kernel { name, params });
        }
        Ok(())
    }

    /// The kernel named `name` (an `extern "C"` symbol).
    pub fn function(&self, name: &str) -> Result<Function> {
        self.functions.get(name).cloned().ok_or_else(|| {
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

    /// Sizes in bytes of the parameters of kernel `name`, in order (what launches are
    /// checked against).
    pub fn param_sizes(&self, name: &str) -> Result<&[usize]> {
        Ok(&self.kernel(&self.function(name)?)?.params)
    }

    fn kernel(&self, f: &Function) -> Result<&Kernel> {
        self.kernels.get(&f.handle).ok_or_else(|| {
            Error::InvalidArgument("the function is not a kernel of this module".into())
        })
    }

    /// Launches kernel `name` with a 1-D grid of `grid` blocks of `block` threads and
    /// `smem` bytes of dynamic shared memory on `stream`, with the arguments `args` (a
    /// tuple of [`KernelArg`]s, or a slice of [`KernelParam`]s), after checking their
    /// number and sizes against the kernel's parameters ([`Error::InvalidArgument`] on a
    /// mismatch, and nothing is launched).
    ///
    /// # Safety
    /// The check sees sizes only. The caller guarantees the rest of the kernel's contract:
    /// each argument has its parameter's C type (not just its size: a `u64` passed for a
    /// `T*` is a device address of memory holding what the kernel reads or writes there,
    /// a struct is a valid view such as an `ArrayView` of a
    /// live array), every memory the kernel may touch stays allocated, and is not used by
    /// the host in a conflicting way, until the kernel has finished, and the module stays
    /// loaded until then: keep this `Module` (or a [`Function`] of it) alive until the
    /// kernel has finished (the last of them to go unloads the kernel's code).
    pub unsafe fn launch<A: KernelArgs + ?Sized>(
        &self,
        stream: &CudaStream,
        name: &str,
        grid: u32,
        block: u32,
        smem: u32,
        args: &A,
    ) -> Result<()> {
        let f = self.function(name)?;
        // SAFETY: forwarded to the caller's contract.
        unsafe { self.launch_function(stream, &f, grid, block, smem, args) }
    }

    /// Launches `f` (a kernel of this module, else [`Error::InvalidArgument`]); as
    /// [`Module::launch`] without the lookup by name.
    ///
    /// # Safety
    /// As [`Module::launch`].
    pub unsafe fn launch_function<A: KernelArgs + ?Sized>(
        &self,
        stream: &CudaStream,
        f: &Function,
        grid: u32,
        block: u32,
        smem: u32,
        args: &A,
    ) -> Result<()> {
        let k = self.kernel(f)?;
        let params = args.params();
        check_args(&k.name, &k.params, &params)?;
        let mut ptrs: Vec<*mut c_void> = params.iter().map(KernelParam::as_launch_ptr).collect();
        self.ctx.bind_to_thread()?;
        // SAFETY: one pointer per parameter of a kernel of this module (checked above),
        // each to a live value of the parameter's size that the driver copies during the
        // call (it does not write through it); what the kernel does with the values is
        // the caller's contract.
        unsafe {
            result::launch_kernel(
                f.handle,
                (grid, 1, 1),
                (block, 1, 1),
                smem,
                stream.cu_stream(),
                &mut ptrs,
            )
        }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::IoView;

    fn sizes(a: &(impl KernelArgs + ?Sized)) -> Vec<usize> {
        a.params().iter().map(KernelParam::size).collect()
    }

    #[test]
    fn tuples_give_one_param_per_element_with_its_size() {
        assert!(sizes(&()).is_empty());
        assert_eq!(sizes(&(7u32,)), [4]);
        assert_eq!(sizes(&(1u64, 2u32, 3i32, 4i64)), [8, 4, 4, 8]);
        assert_eq!(sizes(&(1.0f32, 2.0f64)), [4, 8]);
        let v = IoView::default();
        assert_eq!(
            sizes(&(v, 1u64, 2u64, 3u32, 4u64)),
            [std::mem::size_of::<IoView>(), 8, 8, 4, 8]
        );
        let twelve = (
            0u8, 1u16, 2u32, 3u64, 4i8, 5i16, 6i32, 7i64, 8f32, 9f64, 10u128, [0u32; 3],
        );
        assert_eq!(sizes(&twelve), [1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 16, 12]);
    }

    #[test]
    fn params_point_at_the_values() {
        let args = (0x1122_3344u32, 0x5566_7788_99aa_bbccu64);
        let p = args.params();
        assert_eq!(p[0].bytes(), 0x1122_3344u32.to_ne_bytes());
        assert_eq!(p[1].bytes(), 0x5566_7788_99aa_bbccu64.to_ne_bytes());
        assert_eq!(
            p[0].as_launch_ptr().cast_const(),
            (&args.0 as *const u32).cast()
        );
        assert_eq!(
            p[1].as_launch_ptr().cast_const(),
            (&args.1 as *const u64).cast()
        );
    }

    #[test]
    fn run_time_lists() {
        let (a, b, c) = (1u64, 2u32, IoView::default());
        let list = vec![
            KernelParam::new(&a),
            KernelParam::new(&b),
            KernelParam::new(&c),
        ];
        let want = [8, 4, std::mem::size_of::<IoView>()];
        assert_eq!(sizes(&list), want);
        assert_eq!(sizes(&list[..]), want);
        assert_eq!(sizes(&[KernelParam::new(&a), KernelParam::new(&b)]), [8, 4]);
    }

    #[test]
    fn check_args_reports_count_and_size_mismatches() {
        // bam_fill_pattern(uint64_t, uint64_t, uint32_t, uint32_t)
        let expected = [8, 8, 4, 4];
        assert!(check_args("k", &expected, &(1u64, 2u64, 3u32, 4u32).params()).is_ok());
        assert!(check_args("k", &[], &().params()).is_ok());

        let e = check_args("bam_fill_pattern", &expected, &(1u64, 2u64, 3u32).params())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`bam_fill_pattern`"), "{e}");
        assert!(
            e.contains("takes 4 parameter(s)") && e.contains("gives 3"),
            "{e}"
        );

        let e = check_args(
            "bam_fill_pattern",
            &expected,
            &(1u64, 2u32, 3u32, 4u32).params(),
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)));
        let e = e.to_string();
        assert!(
            e.contains("`bam_fill_pattern`: parameter 1 is 8 bytes"),
            "{e}"
        );
        assert!(e.contains("given is 4 bytes"), "{e}");
    }
}
