//! The file backend's GPU kernel (`crates/bam/cuda/src/file.cu`): launched on SMs it
//! keeps for itself, started, stopped.

use super::abi::{FileControl, FileView};
use crate::cuda::{Function, Gpu, Module, PersistentKernel};
use crate::error::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

/// Threads per block (`FWD_THREADS` in file.cu).
pub(super) const FORWARDER_THREADS: u32 = 256;
/// Queue pairs one block serves at most: 8 warps of 32 lanes.
pub(super) const QUEUES_PER_BLOCK: u32 = FORWARDER_THREADS;

/// The forwarder kernel of one array.
pub(super) struct Forwarder {
    kernel: PersistentKernel,
    module: Arc<Module>,
    function: Function,
    view: FileView,
    blocks: u32,
    /// Dynamic shared memory per block: all a block may have, so that no other kernel's
    /// block shares the SM (the forwarder's polling would slow down with it).
    smem: u32,
}

impl Forwarder {
    /// The kernel for `view`, on `blocks` SMs of `gpu` (not launched yet).
    pub(super) fn new(gpu: &Arc<Gpu>, view: FileView, blocks: u32) -> Result<Self> {
        let module = gpu.module(crate::runtime::FILE)?;
        let function = module.function("bam_file_forwarder")?;
        use cudarc::driver::{result, sys};
        use sys::CUfunction_attribute as A;
        // SAFETY: a function handle of a loaded module and a valid attribute.
        let static_smem = unsafe {
            result::function::get_function_attribute(
                function.handle(),
                A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            )
        }? as u32;
        let smem = gpu.smem_optin.saturating_sub(static_smem);
        // SAFETY: a function handle of a loaded module, a valid attribute and value.
        unsafe {
            result::function::set_function_attribute(
                function.handle(),
                A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )?;
        }
        Ok(Forwarder {
            kernel: PersistentKernel::new(gpu)?,
            module,
            function,
            view,
            blocks,
            smem,
        })
    }

    fn control(&self, field: usize) -> u64 {
        self.view.control + field as u64
    }

    /// Launches the kernel and waits until every block is resident.
    pub(super) fn start(&mut self) -> Result<()> {
        let args: (FileView,) = (self.view,);
        let (module, function, blocks, smem) =
            (&self.module, &self.function, self.blocks, self.smem);
        let control = (
            self.view.control,
            std::mem::size_of::<FileControl>(),
            self.control(std::mem::offset_of!(FileControl, started)),
        );
        self.kernel.start_controlled(
            "the file backend's forwarder kernel",
            blocks,
            control,
            |stream| {
                // SAFETY: matches bam_file_forwarder(bam_file_view); every table and ring
                // it points to lives until stop() has seen the kernel finish (the
                // array's Drop stops it first, and leaks them if it does not stop).
                unsafe {
                    module.launch_function(stream, function, blocks, FORWARDER_THREADS, smem, &args)
                }
            },
        )
    }

    /// Whether the kernel was launched and not yet seen to finish.
    pub(super) fn running(&self) -> bool {
        self.kernel.running()
    }

    /// Stops the kernel (bounded wait).
    pub(super) fn stop(&mut self) -> Result<()> {
        let stop = self.control(std::mem::offset_of!(FileControl, stop));
        self.kernel
            .stop_at(stop, Duration::from_secs(10))
            .map_err(|e| match e {
                Error::Timeout(s) => Error::Timeout(format!("file backend forwarder: {s}")),
                e => e,
            })
    }
}
