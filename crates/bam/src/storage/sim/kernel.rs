//! The simulated controllers' GPU kernel: how it is launched on a GPU, started, stopped
//! and restarted around a queue's recovery, its per-queue memory, and the profile it
//! publishes.

use super::abi::*;
use crate::cuda::layout::round_up;
use crate::cuda::{Function, Gpu, Module, PersistentKernel};
use crate::error::{Error, Result};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Threads per block of the controller kernel (`SIM_THREADS` in crates/bam/cuda/src/sim.cu).
pub(super) const SIM_BLOCK_THREADS: u32 = 512;

/// The controller kernel as one GPU runs it: its two variants and the shared memory each
/// block asks for.
pub(super) struct SimLaunch {
    pub(super) module: Arc<Module>,
    /// The controller of an array of this GPU alone.
    pub(super) controller: Function,
    /// The controller of an array shared with other GPUs (their queues at system scope).
    pub(super) controller_shared: Function,
    /// Dynamic shared memory per block: the staging area when one 512-thread block
    /// already takes the whole register file (no other block can share the SM, and the
    /// SM keeps the rest as L1 cache), else all the GPU allows (so that no other block
    /// fits).
    pub(super) smem: u32,
}

impl SimLaunch {
    /// The launch configuration on `gpu` (both variants get the same, from the larger of
    /// their needs). [`Error::NoGpu`] when the GPU has too little shared memory per
    /// block for the controller's staging area (consumer parts): every other backend runs
    /// there.
    pub(super) fn of(gpu: &Gpu) -> Result<SimLaunch> {
        let module = gpu.module(crate::runtime::SIMULATOR)?;
        let controller = module.function("bam_sim_controller")?;
        let controller_shared = module.function("bam_sim_controller_shared")?;
        use cudarc::driver::{result, sys};
        use sys::CUfunction_attribute as A;
        let attribute = |f: &Function, a: A| -> Result<u32> {
            // SAFETY: a function handle of a loaded module and a valid attribute.
            Ok(unsafe { result::function::get_function_attribute(f.handle(), a) }? as u32)
        };
        let (mut regs, mut static_smem) = (0, 0);
        for f in [&controller, &controller_shared] {
            regs = regs.max(attribute(f, A::CU_FUNC_ATTRIBUTE_NUM_REGS)?);
            // The controller's own static shared memory (a few words) counts against
            // the opt-in limit too.
            static_smem = static_smem.max(attribute(f, A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?);
        }
        if gpu.smem_optin < BAM_SIM_SMEM_BYTES + static_smem {
            return Err(Error::NoGpu(format!(
                "{}: {} B of shared memory per block; the simulated controller needs {} B \
                 (data-center GPUs have it); the host-side controller (hostctl:) and real SSDs \
                 (kmod:) run on this GPU",
                gpu.name,
                gpu.smem_optin,
                BAM_SIM_SMEM_BYTES + static_smem
            )));
        }
        let regs_per_sm = gpu.context().attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
        )? as u32;
        let dyn_optin = gpu.smem_optin - static_smem;
        let smem = if regs * SIM_BLOCK_THREADS >= regs_per_sm {
            BAM_SIM_SMEM_BYTES
        } else {
            dyn_optin
        };
        for f in [&controller, &controller_shared] {
            // SAFETY: a function handle of a loaded module, a valid attribute and value.
            unsafe {
                result::function::set_function_attribute(
                    f.handle(),
                    A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dyn_optin as i32,
                )?;
            }
        }
        Ok(SimLaunch {
            module,
            controller,
            controller_shared,
            smem,
        })
    }
}

/// Per-queue memory of the controller kernel (in the I/O layer's scratch): its pending
/// list (16 B per entry) at offset 0, then its CID bitmap (8 KiB), then a lying
/// controller's memory (the last lie's CQE, for [`crate::storage::Lie::Stale`]). Returns (bitmap offset,
/// bytes).
pub(super) fn sim_scratch(depth: u32) -> (usize, usize) {
    let bitmap = round_up(16 * depth as usize, 256);
    (bitmap, bitmap + 8192 + 256)
}

/// Cumulative profile of the simulated controller kernel's warp 0, published every 64
/// iterations ([`super::SimArray::profile`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SimProfile {
    /// Service loop iterations.
    pub loops: u64,
    /// SM cycles spent in the loop.
    pub cycles: u64,
    /// Cycles in visits that fetched commands (fetch, validation, data, model).
    pub fetch_cycles: u64,
    /// Cycles in visits that posted completions.
    pub post_cycles: u64,
    /// Commands fetched.
    pub commands: u64,
}

impl SimProfile {
    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &SimProfile) -> SimProfile {
        SimProfile {
            loops: self.loops.wrapping_sub(earlier.loops),
            cycles: self.cycles.wrapping_sub(earlier.cycles),
            fetch_cycles: self.fetch_cycles.wrapping_sub(earlier.fetch_cycles),
            post_cycles: self.post_cycles.wrapping_sub(earlier.post_cycles),
            commands: self.commands.wrapping_sub(earlier.commands),
        }
    }
}

/// The controller kernel of a simulated array: launched, stopped, launched again.
pub(super) struct SimKernel {
    pub(super) gpu: Arc<Gpu>,
    pub(super) kernel: PersistentKernel,
    /// How the kernel launches on this GPU (found once, when the array is built).
    pub(super) launch: SimLaunch,
    pub(super) view: SimView,
    pub(super) blocks: u32,
    /// Other GPUs' queues: the controller that orders them at system scope.
    pub(super) shared: bool,
}

impl SimKernel {
    fn control(&self, field: usize) -> u64 {
        self.view.control + field as u64
    }

    /// Launches the kernel and waits until every block is resident.
    pub(super) fn start(&mut self) -> Result<()> {
        // The kernel is not running: the control block (handshake, stop, stall) is reset.
        let args: (SimView,) = (self.view,);
        // Other GPUs' queues (remote scratch exists only for them) need the controller
        // that orders them at system scope; an array of one GPU gets the one without
        // those branches in its loop.
        let launch = &self.launch;
        let controller = if self.shared {
            &launch.controller_shared
        } else {
            &launch.controller
        };
        let blocks = self.blocks;
        let control = (
            self.view.control,
            std::mem::size_of::<SimControl>(),
            self.control(std::mem::offset_of!(SimControl, started)),
        );
        self.kernel.start_controlled(
            "the simulated SSDs' controller kernel",
            blocks,
            control,
            |stream| {
                // SAFETY: matches bam_sim_controller(_shared)(bam_sim_view); every table
                // it points to lives until stop() has seen the kernel finish (the array's
                // Drop calls stop, and leaks the tables if the kernel does not stop).
                unsafe {
                    launch.module.launch_function(
                        stream,
                        controller,
                        blocks,
                        SIM_BLOCK_THREADS,
                        launch.smem,
                        &args,
                    )
                }
            },
        )
    }

    /// Stops the kernel (bounded wait); each warp stores its queues' state in the queue
    /// table on the way out, where the next start takes it up.
    pub(super) fn stop(&mut self) -> Result<()> {
        let stop = self.control(std::mem::offset_of!(SimControl, stop));
        self.kernel.stop_at(stop, Duration::from_secs(10))
    }
}

/// The simulated controller's side of queue recovery: the controller kernel stops (every
/// queue's state goes to the queue table), the queue is forgotten there (its fetched,
/// pending and withheld commands dropped: their completions never come; its CID bitmap
/// and doorbell words zeroed), the controller model deletes and creates it again, and
/// the kernel starts again from the table. The other queues go on where they were. (A
/// request the running kernel polled for would cost the service loop registers, and the
/// 512 B IOPS with them.)
pub(super) struct SimQueueService {
    pub(super) kernel: Arc<Mutex<SimKernel>>,
    /// Device address of this I/O layer's first entry in the kernel's queue table.
    pub(super) table: u64,
    /// This I/O layer's entries, as built.
    pub(super) queues: Vec<SimQueue>,
}

impl crate::io::QueueService for SimQueueService {
    fn recreate(&self, qp: usize, recreate: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let q = self
            .queues
            .get(qp)
            .ok_or_else(|| Error::InvalidArgument(format!("no queue pair {qp}")))?;
        let mut k = self.kernel.lock().unwrap_or_else(|e| e.into_inner());
        k.stop()?;
        let forgotten = (|| -> Result<()> {
            let gpu = &k.gpu;
            let entry = self.table + (std::mem::size_of::<SimQueue>() * qp) as u64;
            let state = entry + std::mem::offset_of!(SimQueue, sq_head) as u64;
            // sq_head, cq_tail, pend_head, pend_tail: nothing fetched, posted or pending.
            crate::cuda::write_device_beside(gpu, state, &[0u8; 16])?;
            let (_, scratch) = sim_scratch(q.depth & !BAM_SIM_Q_SYSTEM);
            let bitmap_len = scratch - (q.cid_bitmap - q.pending) as usize;
            crate::cuda::write_device_beside(gpu, q.cid_bitmap, &vec![0u8; bitmap_len])?;
            crate::cuda::write_device_beside(gpu, q.sq_db, &[0u8; 4])?;
            crate::cuda::write_device_beside(gpu, q.cq_db, &[0u8; 4])?;
            recreate()
        })();
        let started = k.start();
        forgotten.and(started)
    }
}
