//! Launching and timing suite kernels: the state the whole suite shares ([`Ctx`]), how a
//! variant's runs execute ([`Exec`]: form, stream, SMs, cache, time budget), and one run's
//! measurement ([`Run`]).

use super::options::{Form, Kernel, SuiteOptions};
use super::report::Settled;
use super::settle::Settle;
use bam::cache::{ArrayView, Cache};
use bam::cuda::Gpu;
use bam::storage::GpuDevice;
use bam::{Error, KernelParam, Module, Result};
use cudarc::driver::{sys, CudaStream, DriverError};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Threads per block of every suite kernel (the kernels' launch bounds say 256).
pub(super) const BLOCK: u32 = 256;
/// Warps per block.
pub(super) const BLOCK_WARPS: u64 = BLOCK as u64 / 32;
/// Launches a run of a budgeted variant is split into when it is slow (the time budget is
/// checked between them).
pub(super) const BUDGET_CHUNKS: u64 = 32;
/// Bound of one wait for suite work (UVM chunks can be slow; a hung cache fails sooner
/// through its own timeouts).
const WAIT: Duration = Duration::from_secs(300);

/// A kernel argument of a list built at run time (the storage form decides whether a
/// parameter is a view or a pointer), held while the launch reads it.
#[derive(Clone, Copy)]
pub(super) enum KArg {
    U64(u64),
    U32(u32),
    F32(f32),
    F64(f64),
    View(ArrayView),
}

impl KArg {
    fn param(&self) -> KernelParam<'_> {
        match self {
            KArg::U64(v) => KernelParam::new(v),
            KArg::U32(v) => KernelParam::new(v),
            KArg::F32(v) => KernelParam::new(v),
            KArg::F64(v) => KernelParam::new(v),
            KArg::View(v) => KernelParam::new(v),
        }
    }

    /// The list as the (checked) launch takes it.
    fn params(args: &[KArg]) -> Vec<KernelParam<'_>> {
        args.iter().map(KArg::param).collect()
    }
}

/// Waits for `stream`, polling (so that BFS's host loop adds microseconds, not a sleep
/// granule, per level), bounded by `timeout`.
fn wait_stream(gpu: &Gpu, stream: &CudaStream, timeout: Duration) -> Result<()> {
    gpu.bind()?;
    let t0 = Instant::now();
    loop {
        // SAFETY: a live stream of the GPU's context (bound above).
        match unsafe { sys::cuStreamQuery(stream.cu_stream()) } {
            sys::CUresult::CUDA_SUCCESS => return Ok(()),
            sys::CUresult::CUDA_ERROR_NOT_READY => {}
            e => return Err(Error::Driver(DriverError(e))),
        }
        let waited = t0.elapsed();
        if waited > timeout {
            return Err(Error::Timeout(format!(
                "a suite kernel did not finish within {timeout:?}"
            )));
        }
        if waited < Duration::from_millis(2) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// What the whole suite shares.
pub(super) struct Ctx<'a> {
    pub(super) gpu: &'a Arc<Gpu>,
    pub(super) m: &'a Module,
    pub(super) stream: Arc<CudaStream>,
    pub(super) o: &'a SuiteOptions,
    pub(super) device: &'a GpuDevice,
    /// The wait for a quiet GPU before each variant's timed runs.
    pub(super) settle: &'a Settle<'a>,
}

impl Ctx<'_> {
    /// Launches a generator or helper kernel (grid-stride) on the suite's stream.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters (see suite.cu) and every pointer in
    /// them must stay valid until the stream has been waited for.
    pub(super) unsafe fn helper(&self, name: &str, args: &[KArg]) -> Result<()> {
        let p = KArg::params(args);
        // SAFETY: forwarded to the caller's contract.
        unsafe {
            self.m
                .launch(&self.stream, name, self.gpu.sms * 8, BLOCK, 0, &p)
        }
    }

    pub(super) fn wait(&self) -> Result<()> {
        wait_stream(self.gpu, &self.stream, WAIT)
    }
}

/// How a variant's runs execute: which form, on which stream and SMs, with which cache,
/// under which time budget.
pub(super) struct Exec<'a> {
    pub(super) gpu: &'a Arc<Gpu>,
    m: &'a Module,
    stream: &'a CudaStream,
    pub(super) form: Form,
    /// SMs the kernels get (all but the simulated controllers').
    sms: u32,
    pub(super) cache: Option<&'a Cache<'a>>,
    /// The time budget's end (bam-quarter, UVM).
    pub(super) deadline: Option<Instant>,
    /// Launches per run: BUDGET_CHUNKS while a budgeted variant is slow, else 1.
    pub(super) chunks: Cell<u64>,
    /// The budget, seconds (0 when none).
    pub(super) budget_s: f64,
    /// A UVM variant (gather does fewer reads).
    pub(super) uvm: bool,
    /// gather's reads per UVM run are 1/this of the others' (the options' divisor).
    pub(super) gather_divisor: u64,
    /// Resident blocks per kernel, computed once.
    grids: RefCell<HashMap<String, u32>>,
    settle: &'a Settle<'a>,
}

/// One run's measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Run {
    pub(super) ms: f64,
    pub(super) work: u64,
    pub(super) complete: bool,
}

impl<'a> Exec<'a> {
    pub(super) fn new(c: &'a Ctx<'a>, form: Form, stream: &'a CudaStream, sms: u32) -> Self {
        Exec {
            gpu: c.gpu,
            m: c.m,
            stream,
            form,
            sms,
            cache: None,
            deadline: None,
            chunks: Cell::new(1),
            budget_s: 0.0,
            uvm: false,
            gather_divisor: c.o.uvm_gather_divisor.max(1) as u64,
            grids: RefCell::new(HashMap::new()),
            settle: c.settle,
        }
    }

    /// Waits, on this variant's stream, until the GPU's memory bandwidth is back after
    /// earlier frees (suite/settle.rs).
    pub(super) fn settle(&self) -> Result<Settled> {
        self.settle.wait(self.stream)
    }

    /// `suite_<k>_<form>` (k: a Kernel::symbol, or rmw_check).
    pub(super) fn name(&self, k: &str) -> String {
        format!("suite_{k}_{}", self.form.suffix())
    }

    /// Blocks of `name` that are resident at once on the SMs the kernels get (grid-stride
    /// kernels launch no more: a second wave would run on few SMs at the end).
    pub(super) fn grid(&self, name: &str) -> Result<u32> {
        if let Some(&g) = self.grids.borrow().get(name) {
            return Ok(g);
        }
        let per_sm = self.m.function(name)?.max_blocks_per_sm(BLOCK, 0)?.max(1);
        let g = per_sm * self.sms.max(1);
        self.grids.borrow_mut().insert(name.to_string(), g);
        Ok(g)
    }

    /// Launches `name` with `grid` blocks (at least 1).
    ///
    /// # Safety
    /// `args` must match the kernel's parameters (suite.cu) and every pointer and view in
    /// them must stay valid until the stream has been waited for.
    pub(super) unsafe fn launch(&self, name: &str, grid: u32, args: &[KArg]) -> Result<()> {
        let p = KArg::params(args);
        // SAFETY: forwarded to the caller's contract.
        unsafe { self.m.launch(self.stream, name, grid.max(1), BLOCK, 0, &p) }
    }

    pub(super) fn wait(&self) -> Result<()> {
        wait_stream(self.gpu, self.stream, WAIT)
    }

    /// Whether runs are split into launches with a wait and a budget check after each
    /// (which adds the waits to the run's time: only for variants that are slow anyway).
    pub(super) fn chunking(&self) -> bool {
        self.deadline.is_some() && self.chunks.get() > 1
    }

    /// Budgeted: split the runs and check the budget between launches.
    pub(super) fn set_budget(&mut self, seconds: f64) {
        self.deadline = Some(Instant::now() + Duration::from_secs_f64(seconds));
        self.budget_s = seconds;
        self.chunks.set(BUDGET_CHUNKS);
    }

    pub(super) fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Times `f` (the run's launches) with CUDA events on the stream; `f` returns (work
    /// done, complete, anything else). Then checks the cache's error log.
    pub(super) fn timed<T>(&self, f: impl FnOnce() -> Result<(u64, bool, T)>) -> Result<(Run, T)> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let e0 = self.stream.record_event(flags)?;
        let (work, complete, extra) = f()?;
        let e1 = self.stream.record_event(flags)?;
        self.wait()?;
        let ms = e0.elapsed_ms(&e1)? as f64;
        if let Some(c) = self.cache {
            c.check_errors()?;
        }
        Ok((Run { ms, work, complete }, extra))
    }

    /// Splits `0..n` into this run's chunks and calls `launch(lo, hi)` for each, waiting
    /// after each under a budget and stopping when it is spent. Returns where it stopped.
    fn chunked(&self, n: u64, mut launch: impl FnMut(u64, u64) -> Result<()>) -> Result<u64> {
        let chunks = if self.chunking() {
            self.chunks.get().clamp(1, n.max(1))
        } else {
            1
        };
        let mut done = 0;
        for c in 0..chunks {
            if c > 0 && self.expired() {
                break;
            }
            let hi = n * (c + 1) / chunks;
            launch(done, hi)?;
            if chunks > 1 {
                self.wait()?;
            }
            done = hi;
        }
        Ok(done)
    }

    /// One timed run of kernel `k` (this form) over the items `0..n`: a launch per chunk
    /// `[k0, k1)` of the run ([`Exec::chunked`]) with the arguments `args(k0, k1)`, each
    /// of the kernel's resident grid or fewer blocks, one per `per_block` items (a warp or
    /// a thread per item). The run's work is the items done (`n` when complete).
    ///
    /// # Safety
    /// `args(k0, k1)` must match the parameters of `suite_<k>_<form>` (suite.cu) and every
    /// pointer and view in them must stay valid until the run is done.
    pub(super) unsafe fn timed_launches<const N: usize>(
        &self,
        k: Kernel,
        n: u64,
        per_block: u64,
        mut args: impl FnMut(u64, u64) -> [KArg; N],
    ) -> Result<Run> {
        let name = self.name(k.symbol());
        let resident = self.grid(&name)? as u64;
        let (run, ()) = self.timed(|| {
            let done = self.chunked(n, |k0, k1| {
                let grid = resident.min((k1 - k0).div_ceil(per_block)) as u32;
                let a = args(k0, k1);
                // SAFETY: the caller's contract: `a` matches the kernel and outlives the run.
                unsafe { self.launch(&name, grid, &a) }
            })?;
            Ok((done, done == n, ()))
        })?;
        Ok(run)
    }
}
