//! The kernel suite (`bam bench kernels`, issue 14): five kernels, each written once as a
//! template over its array types (`cuda/suite.cu`) and run over plain memory and, ported by
//! swapping `T*` for `bam::array<T>`, through the software cache, all in one process.
//!
//! Kernels and the arrays they take from storage (the "storage arrays"; every other array
//! stays in GPU memory in every variant, as it would in a port that moves only the data
//! that scales with the problem to the SSDs):
//!
//! | kernel | what | storage arrays | in GPU memory always |
//! |---|---|---|---|
//! | spmv | CSR SpMV, a warp per row | col (u32), val (f32) | rowptr, x, y |
//! | bfs | top-down BFS from vertex 0, a warp per frontier vertex | rowptr (u64), col (u32) | dist, frontiers |
//! | gather | sum of random elements | a (u64) | the sum |
//! | histogram | 256 bins of one byte per element | a (u32) | the bins |
//! | rmw | a\[i\] = 3 a\[i\] + 1 | a (u64) | |
//!
//! Variants, in the order they run for each kernel:
//!
//! * `hbm`: the plain kernel (`T*`), storage arrays in GPU memory: the baseline.
//! * `zerocopy`: the plain kernel, storage arrays in pinned host memory mapped into the GPU.
//! * `bam-hit`: the ported kernel (`bam::array<T>`), a cache with a quarter more slots
//!   than the data has lines, simulated media in GPU memory, loaded one warp per line
//!   before the runs: every access hits.
//! * `bam-pin-hit`: the same through `pin_port<T>` (reads with `read_pinned`, the
//!   pin-per-access hit path), same cache, same process: an A/B of the hit path.
//! * `bam-quarter`: the ported kernel, a cache of a quarter of the data's lines, simulated
//!   media in pinned host memory (misses cross PCIe).
//! * `uvm-2x`, `uvm-4x`: the plain kernel, storage arrays in managed memory, with GPU memory
//!   taken by a balloon allocation so that the data is 2x / 4x what is left.
//!
//! Every variant runs once untimed (warm-up), then `reps` timed runs (CUDA events around
//! the run's launches; BFS includes its host loop over levels). `bam-quarter` and the UVM
//! variants have a time budget: when their warm-up is slow, their runs are split into
//! launches and stop when the budget is spent (the result then says how much of a run
//! was done, and its rate is work per second of what was done). Each variant's outputs
//! are verified against the `hbm` run (and the `hbm` run against independent checks), and
//! every result carries its wrong count.

use crate::cache_study::{device_name, study_device};
use bam::cache::{Array, ArrayView, Cache, CacheConfig, CacheStats, FlushReport, Layout};
use bam::device::{GpuDevice, Shape};
use bam::gpu::{DeviceBuffer, Gpu, PinnedBuffer};
use bam::sim::Media;
use bam::{arg, Error, Module, Result};
use cudarc::driver::{sys, CudaStream, DriverError};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Threads per block of every suite kernel (the kernels' launch bounds say 256).
const BLOCK: u32 = 256;
/// Warps per block.
const BLOCK_WARPS: u64 = BLOCK as u64 / 32;
/// Launches a run of a budgeted variant is split into when it is slow (the time budget is
/// checked between them).
const BUDGET_CHUNKS: u64 = 32;
/// Frontier vertices per launch of a BFS level, likewise.
const BUDGET_BFS_CHUNK: u64 = 65536;
/// Cache slots of the all-hits variants per line of data, in quarters: 5/4, slack on top
/// of the preload (suite_touch_*), which is what keeps every line in: a streaming kernel's
/// own first run wraps the clock hand (concurrent misses on one line each draw from it),
/// and then every fill evicts a valid line, for good. Measured on an H100 (spmv, scale
/// 1/4): without the preload 45,081 misses per 3 runs with a quarter more slots than
/// lines (8,672 per run of 15,976 lines at scale 1/16 with exactly as many); with it, 0.
const HIT_SLOTS_QUARTERS: u64 = 5;
/// The UVM balloon leaves the GPU memory it aims at within this (cuMemAlloc rounds to
/// 2 MiB pages and takes some memory of its own).
const BALLOON_TOLERANCE: u64 = 4 << 20;
/// GPU memory left free for the driver on top of data / oversubscription in the UVM
/// variants (page tables, fault buffers, launch resources).
pub const UVM_DRIVER_MARGIN: u64 = 32 << 20;
/// BFS levels the level-size table holds.
const MAX_LEVELS: u32 = 1 << 16;
/// Histogram: the byte of each element that is counted (bits 8..16).
const HIST_SHIFT: u32 = 8;
/// Rows of the SpMV result the host recomputes to check the `hbm` run.
const SPMV_SAMPLES: u64 = 256;

// ---- options --------------------------------------------------------------------------------

/// A kernel of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// CSR sparse matrix times vector.
    Spmv,
    /// Breadth-first search.
    Bfs,
    /// Random gather.
    Gather,
    /// Streaming 256-bin histogram.
    Histogram,
    /// Read-modify-write of every element.
    Rmw,
}

impl Kernel {
    /// Every kernel, in the order the suite runs them.
    pub const ALL: [Kernel; 5] = [
        Kernel::Spmv,
        Kernel::Bfs,
        Kernel::Gather,
        Kernel::Histogram,
        Kernel::Rmw,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Spmv => "spmv",
            Kernel::Bfs => "bfs",
            Kernel::Gather => "gather",
            Kernel::Histogram => "histogram",
            Kernel::Rmw => "rmw",
        }
    }

    /// The kernel's part of its symbols in suite.cu (`suite_<symbol>_<form>`).
    fn symbol(self) -> &'static str {
        match self {
            Kernel::Histogram => "hist",
            k => k.name(),
        }
    }

    /// What the kernel does, in one line.
    pub fn about(self) -> &'static str {
        match self {
            Kernel::Spmv => "CSR SpMV, a warp per row, shuffle reduction; col and val from storage",
            Kernel::Bfs => "top-down BFS from vertex 0, a warp per frontier vertex; rowptr and col from storage",
            Kernel::Gather => "sum of uniformly random u64 elements, every value checked",
            Kernel::Histogram => "256-bin histogram of a byte of every u32 element (shared memory)",
            Kernel::Rmw => "a[i] = 3 a[i] + 1 over every u64 element, checked afterwards",
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown kernel `{s}` (spmv, bfs, gather, histogram, rmw)"
                ))
            })
    }
}

/// Where a kernel's storage arrays live, and which form of the kernel reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Variant {
    /// Plain kernel, GPU memory: the baseline of every ratio.
    #[serde(rename = "hbm")]
    Hbm,
    /// Plain kernel, pinned host memory mapped into the GPU.
    #[serde(rename = "zerocopy")]
    Zerocopy,
    /// Ported kernel, every line cached, media in GPU memory.
    #[serde(rename = "bam-hit")]
    BamHit,
    /// Ported kernel through `pin_port` (read_pinned), every line cached.
    #[serde(rename = "bam-pin-hit")]
    BamPinHit,
    /// Ported kernel as a porter writes it, without `__launch_bounds__` (the kernel gets
    /// the registers its miss path wants), every line cached.
    #[serde(rename = "bam-hit-unbounded")]
    BamHitUnbounded,
    /// Ported kernel, a quarter of the lines cached, media in pinned host memory.
    #[serde(rename = "bam-quarter")]
    BamQuarter,
    /// Plain kernel, managed memory at 2x oversubscription.
    #[serde(rename = "uvm-2x")]
    Uvm2x,
    /// Plain kernel, managed memory at 4x oversubscription.
    #[serde(rename = "uvm-4x")]
    Uvm4x,
}

impl Variant {
    /// Every variant, in the order they run.
    pub const ALL: [Variant; 8] = [
        Variant::Hbm,
        Variant::Zerocopy,
        Variant::BamHit,
        Variant::BamPinHit,
        Variant::BamHitUnbounded,
        Variant::BamQuarter,
        Variant::Uvm2x,
        Variant::Uvm4x,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Hbm => "hbm",
            Variant::Zerocopy => "zerocopy",
            Variant::BamHit => "bam-hit",
            Variant::BamPinHit => "bam-pin-hit",
            Variant::BamHitUnbounded => "bam-hit-unbounded",
            Variant::BamQuarter => "bam-quarter",
            Variant::Uvm2x => "uvm-2x",
            Variant::Uvm4x => "uvm-4x",
        }
    }

    /// The form of the kernel the variant runs.
    pub fn form(self) -> Form {
        match self {
            Variant::BamHit | Variant::BamQuarter => Form::Bam,
            Variant::BamPinHit => Form::Pin,
            Variant::BamHitUnbounded => Form::BamUnbounded,
            _ => Form::Plain,
        }
    }

    /// Whether the variant runs under the time budget (it can be slow).
    pub fn budgeted(self) -> bool {
        matches!(self, Variant::BamQuarter | Variant::Uvm2x | Variant::Uvm4x)
    }

    /// Data / GPU memory left, for the UVM variants.
    pub fn oversubscription(self) -> Option<u64> {
        match self {
            Variant::Uvm2x => Some(2),
            Variant::Uvm4x => Some(4),
            _ => None,
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s.trim())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown variant `{s}` (hbm, zerocopy, bam-hit, bam-pin-hit, bam-hit-unbounded, bam-quarter, uvm-2x, uvm-4x)"
                ))
            })
    }
}

/// The instantiation of a kernel's template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Form {
    /// `T*`.
    #[serde(rename = "plain")]
    Plain,
    /// `bam::array<T>`.
    #[serde(rename = "bam::array")]
    Bam,
    /// `pin_port<T>`: `bam::array<T>` read with `read_pinned`.
    #[serde(rename = "pin_port")]
    Pin,
    /// `bam::array<T>`, the kernel without `__launch_bounds__`.
    #[serde(rename = "bam::array (no launch bounds)")]
    BamUnbounded,
}

impl Form {
    fn suffix(self) -> &'static str {
        match self {
            Form::Plain => "plain",
            Form::Bam => "bam",
            Form::Pin => "pin",
            Form::BamUnbounded => "bamu",
        }
    }
}

/// Options of the kernel suite.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteOptions {
    /// Multiplies every data size (1: about 0.5 to 1.1 GB of storage arrays per kernel).
    pub scale: f64,
    /// Average nonzeros per row of the SpMV / BFS matrix.
    pub degree: u32,
    /// Cache line size.
    pub line_bytes: u32,
    /// Timed runs per variant (after one warm-up run).
    pub reps: u32,
    /// Kernels to run, in this order.
    pub kernels: Vec<Kernel>,
    /// Variants to run (always in [`Variant::ALL`]'s order); must include `hbm`.
    pub variants: Vec<Variant>,
    /// Wall-clock budget of each variant that can be slow (bam-quarter, uvm-2x, uvm-4x):
    /// warm-up and timed runs together, seconds.
    pub budget_s: f64,
    /// The UVM variants of `gather` do 1/this of the reads (random reads thrash at 2x and
    /// 4x oversubscription; rates are per read, so ratios stay comparable).
    pub uvm_gather_divisor: u32,
    /// I/O queues per simulated SSD.
    pub queues: u32,
    /// SMs for the simulated controllers.
    pub sim_sms: u32,
    /// Seed of every input.
    pub seed: u64,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions {
            scale: 1.0,
            degree: 16,
            line_bytes: 4096,
            reps: 3,
            kernels: Kernel::ALL.to_vec(),
            variants: Variant::ALL.to_vec(),
            budget_s: 15.0,
            uvm_gather_divisor: 16,
            queues: 64,
            sim_sms: 16,
            seed: 0x5eed_ba5e,
        }
    }
}

/// The data sizes the options give (elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Sizes {
    /// Rows (= columns = vertices) of the SpMV / BFS matrix.
    pub rows: u64,
    /// Elements of the gather array (u64).
    pub gather_elems: u64,
    /// Reads per gather run.
    pub gather_reads: u64,
    /// Elements of the histogram array (u32).
    pub hist_elems: u64,
    /// Elements of the rmw array (u64).
    pub rmw_elems: u64,
}

/// Smallest and largest `--scale`.
pub const SCALE_RANGE: (f64, f64) = (1.0 / 1024.0, 16.0);

impl SuiteOptions {
    /// Element counts at this scale: 8 Mi rows, 1 GiB of u64 to gather from (1/8 of its
    /// elements read per run), 1 GiB of u32 to histogram, 512 MiB of u64 to rmw at scale 1;
    /// whole multiples of 1024.
    pub fn sizes(&self) -> Sizes {
        let at = |base: u64| (((base as f64 * self.scale) / 1024.0).round() as u64).max(1) * 1024;
        let gather_elems = at(1 << 27);
        Sizes {
            rows: at(8 << 20),
            gather_elems,
            gather_reads: gather_elems / 8,
            hist_elems: at(1 << 28),
            rmw_elems: at(1 << 26),
        }
    }

    /// Checks the options before any GPU work. The error names the quantity and the rule.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        let (lo, hi) = SCALE_RANGE;
        if !self.scale.is_finite() || self.scale < lo || self.scale > hi {
            return bad(format!(
                "scale {}: must be from 1/1024 to {hi} (1 = about 0.5 to 1.1 GB of storage arrays per kernel)",
                self.scale
            ));
        }
        if !(1..=1024).contains(&self.degree) {
            return bad(format!(
                "average degree {}: must be from 1 to 1024",
                self.degree
            ));
        }
        if !(512..=65536).contains(&self.line_bytes) || !self.line_bytes.is_multiple_of(512) {
            return bad(format!(
                "line size {} B: must be a multiple of 512 B from 512 B to 64 KiB (e.g. 4096)",
                self.line_bytes
            ));
        }
        if !(1..=1000).contains(&self.reps) {
            return bad(format!(
                "timed runs per variant (reps) {}: must be from 1 to 1000",
                self.reps
            ));
        }
        if self.kernels.is_empty() {
            return bad("kernels: the list is empty".into());
        }
        for (i, k) in self.kernels.iter().enumerate() {
            if self.kernels[..i].contains(k) {
                return bad(format!("kernels: {k} is listed twice"));
            }
        }
        if !self.variants.contains(&Variant::Hbm) {
            return bad(
                "variants: must include hbm (the plain kernel in GPU memory, the baseline of every ratio)"
                    .into(),
            );
        }
        for (i, v) in self.variants.iter().enumerate() {
            if self.variants[..i].contains(v) {
                return bad(format!("variants: {v} is listed twice"));
            }
        }
        if !self.budget_s.is_finite() || self.budget_s <= 0.0 || self.budget_s > 3600.0 {
            return bad(format!(
                "time budget {} s (bam-quarter and UVM variants): must be more than 0 and at most 3600 s",
                self.budget_s
            ));
        }
        if self.uvm_gather_divisor == 0 {
            return bad("UVM gather divisor: must be at least 1".into());
        }
        if self.queues == 0 {
            return bad("I/O queues per SSD: must be at least 1".into());
        }
        if self.sim_sms == 0 {
            return bad("SMs for the simulated controllers: must be at least 1".into());
        }
        Ok(())
    }

    /// Whether `v` is selected.
    fn runs(&self, v: Variant) -> bool {
        self.variants.contains(&v)
    }

    /// Cache slots of the all-hits variants for `lines` lines of data.
    pub fn hit_slots(lines: u64) -> u64 {
        lines * HIT_SLOTS_QUARTERS / 4 + 1
    }

    /// About how many bytes of GPU memory kernel `k` holds at its peak (while `bam-hit`
    /// runs: the storage arrays' source copies, the simulated media, the cache's slots,
    /// plus the arrays that stay in GPU memory). Estimates the matrix's nonzeros as rows x
    /// degree.
    pub fn peak_gpu_bytes(&self, k: Kernel) -> u64 {
        let s = self.sizes();
        let slot = (self.line_bytes as u64).next_power_of_two();
        let nnz = s.rows * self.degree as u64;
        // (storage arrays, arrays that stay in GPU memory)
        let (storage, side): (Vec<u64>, u64) = match k {
            Kernel::Spmv => (vec![4 * nnz, 4 * nnz], 16 * s.rows), // rowptr, x, y
            Kernel::Bfs => (vec![8 * s.rows, 4 * nnz], 12 * s.rows), // dist, 2 frontiers
            Kernel::Gather => (vec![8 * s.gather_elems], 0),
            Kernel::Histogram => (vec![4 * s.hist_elems], 0),
            Kernel::Rmw => (vec![8 * s.rmw_elems], 0),
        };
        let line = self.line_bytes as u64;
        let data: u64 = storage.iter().sum();
        let lines: u64 = storage.iter().map(|b| b.div_ceil(line)).sum();
        side + 2 * data + Self::hit_slots(lines) * slot
    }
}

// ---- results --------------------------------------------------------------------------------

/// One storage array of a kernel.
#[derive(Clone, Debug, Serialize)]
pub struct ArrayInfo {
    /// Its name in the kernel.
    pub name: String,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Elements.
    pub len: u64,
}

/// The cache of a ported variant.
#[derive(Clone, Debug, Serialize)]
pub struct CacheInfo {
    /// Lines the cache holds.
    pub slots: u32,
    /// Lines of the storage arrays.
    pub data_lines: u64,
    /// Line size.
    pub line_bytes: u32,
    /// Where the simulated SSDs keep the data (or the backend, when not simulated).
    pub media: String,
    /// Statistics of the timed runs together.
    pub stats: CacheStats,
    /// hits / (hits + misses) of the timed runs.
    pub hit_rate: f64,
}

/// The managed-memory setup of a UVM variant.
#[derive(Clone, Debug, Serialize)]
pub struct UvmInfo {
    /// Nominal data / GPU memory left (2 or 4).
    pub oversubscription: u64,
    /// Bytes of the storage arrays (managed).
    pub data_bytes: u64,
    /// The balloon: GPU memory allocated (cuMemAlloc) and left unused.
    pub balloon_bytes: u64,
    /// Free GPU memory after the balloon (cuMemGetInfo): data / oversubscription plus
    /// the driver's margin.
    pub gpu_free_bytes: u64,
    /// The margin left for the driver ([`UVM_DRIVER_MARGIN`]).
    pub margin_bytes: u64,
    /// Free GPU memory after the managed copy was written (the driver keeps about the
    /// margin free and moves the rest of the data to host memory).
    pub gpu_free_after_fill: u64,
    /// data / (free - margin): the oversubscription the run actually had.
    pub effective_oversubscription: f64,
}

/// The measurement of one variant of one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct VariantResult {
    /// The variant.
    pub variant: Variant,
    /// The kernel form it ran.
    pub form: Form,
    /// Where the storage arrays were.
    pub memory: String,
    /// Timed runs measured.
    pub runs: u32,
    /// Median of the timed runs' times, ms.
    pub ms_median: f64,
    /// Fastest timed run, ms.
    pub ms_min: f64,
    /// Work per timed run (the kernel's `work_unit`s; less than the kernel's `work` when
    /// the UVM time budget stopped a run or the variant does less, see `notes`).
    pub work: u64,
    /// Every timed run did all of its work.
    pub complete: bool,
    /// Work units per second (work / median time; the median of the runs' rates when a
    /// run was cut short).
    pub rate: f64,
    /// Decimal GB/s of storage-array elements read and written (None for bfs).
    pub gbps: Option<f64>,
    /// rate / the hbm variant's rate.
    pub ratio_to_hbm: Option<f64>,
    /// rate / the zerocopy variant's rate.
    pub ratio_to_zerocopy: Option<f64>,
    /// Wrong values (or bins, or distances) found by the checks (must be 0).
    pub wrong: u64,
    /// The cache, for the ported variants.
    pub cache: Option<CacheInfo>,
    /// The managed-memory setup, for the UVM variants.
    pub uvm: Option<UvmInfo>,
    /// Remarks (partial runs, checks that did not apply).
    pub notes: Vec<String>,
    /// Why the variant did not run or did not finish.
    pub error: Option<String>,
}

impl VariantResult {
    fn failed(v: Variant, memory: String, e: &Error) -> Self {
        VariantResult {
            variant: v,
            form: v.form(),
            memory,
            runs: 0,
            ms_median: 0.0,
            ms_min: 0.0,
            work: 0,
            complete: false,
            rate: 0.0,
            gbps: None,
            ratio_to_hbm: None,
            ratio_to_zerocopy: None,
            wrong: 0,
            cache: None,
            uvm: None,
            notes: vec![],
            error: Some(e.to_string()),
        }
    }
}

/// The variants of one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    /// The kernel.
    pub kernel: Kernel,
    /// What it does.
    pub about: String,
    /// Its storage arrays (the ones that move between variants).
    pub storage: Vec<ArrayInfo>,
    /// Their bytes together.
    pub storage_bytes: u64,
    /// What `work` counts: nonzeros, edges (traversed), reads or elements.
    pub work_unit: String,
    /// Work of one full run.
    pub work: u64,
    /// The variants, in the order they ran.
    pub variants: Vec<VariantResult>,
}

/// The suite's report (benches/results/kernels-*.json).
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// GPU name.
    pub device: String,
    /// SMs.
    pub sms: u32,
    /// The backend of the ported variants.
    pub backend: String,
    /// The commit the binary was built from, when the caller passed it.
    pub commit: Option<String>,
    /// Whether pin_port read through `bam::array<T>::read_pinned` (false: that method was
    /// missing and pin_port used `operator[]`, so bam-pin-hit measured bam-hit's path).
    pub pin_port_uses_read_pinned: bool,
    /// Options.
    pub options: SuiteOptions,
    /// The element counts they gave.
    pub sizes: Sizes,
    /// One report per kernel.
    pub kernels: Vec<KernelReport>,
}

/// What [`run_suite`] tells its caller while it runs.
pub enum SuiteEvent<'a> {
    /// Generating a kernel's inputs.
    Preparing {
        /// The kernel.
        kernel: Kernel,
    },
    /// A variant starts (`detail`: e.g. the UVM time budget).
    Starting {
        /// The kernel.
        kernel: Kernel,
        /// The variant.
        variant: Variant,
        /// What to expect.
        detail: String,
    },
    /// A variant is done.
    Finished {
        /// The kernel.
        kernel: Kernel,
        /// Its result (with the ratios).
        result: &'a VariantResult,
    },
    /// A kernel is done (every variant).
    KernelDone {
        /// Its report.
        report: &'a KernelReport,
    },
}

// ---- GPU plumbing ---------------------------------------------------------------------------

/// A kernel argument, held while the launch reads it.
#[derive(Clone, Copy)]
enum KArg {
    U64(u64),
    U32(u32),
    F64(f64),
    View(ArrayView),
}

impl KArg {
    fn ptr(&mut self) -> *mut c_void {
        match self {
            KArg::U64(v) => arg(v),
            KArg::U32(v) => arg(v),
            KArg::F64(v) => arg(v),
            KArg::View(v) => arg(v),
        }
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

/// Bound of one wait for suite work (UVM chunks can be slow; a hung cache fails sooner
/// through its own timeouts).
const WAIT: Duration = Duration::from_secs(300);

/// Managed memory (cuMemAllocManaged, attached globally), freed on drop.
struct Managed {
    gpu: Arc<Gpu>,
    ptr: u64,
}

impl Managed {
    fn new(gpu: &Arc<Gpu>, len: usize) -> Result<Self> {
        gpu.bind()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: plain allocation into a valid out-pointer; freed in Drop.
        unsafe {
            sys::cuMemAllocManaged(
                &mut ptr,
                len.max(1),
                sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
            )
        }
        .result()?;
        Ok(Managed {
            gpu: gpu.clone(),
            ptr,
        })
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: allocated by cuMemAllocManaged, freed once. cuMemFree waits for the
        // device; the UVM variants run while no persistent (simulated controller) kernel
        // does, so the wait ends.
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

/// Where a plain variant's copy of a storage array lives.
enum Mem {
    Hbm(DeviceBuffer),
    Pinned(PinnedBuffer),
}

impl Mem {
    fn ptr(&self) -> u64 {
        match self {
            Mem::Hbm(b) => b.ptr(),
            Mem::Pinned(b) => b.dev_ptr(),
        }
    }
}

/// The element type of a storage array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Elem {
    U32,
    F32,
    U64,
}

impl Elem {
    fn bytes(self) -> u32 {
        match self {
            Elem::U32 | Elem::F32 => 4,
            Elem::U64 => 8,
        }
    }
}

/// The source copy of a storage array, in GPU memory: every variant's data is copied
/// from it.
struct Master {
    name: &'static str,
    elem: Elem,
    len: u64,
    buf: DeviceBuffer,
}

impl Master {
    fn bytes(&self) -> u64 {
        self.len * self.elem.bytes() as u64
    }
    fn info(&self) -> ArrayInfo {
        ArrayInfo {
            name: self.name.into(),
            elem_bytes: self.elem.bytes(),
            len: self.len,
        }
    }
}

/// A cache array of any element type.
enum AnyArray<'c> {
    U32(Array<'c, u32>),
    F32(Array<'c, f32>),
    U64(Array<'c, u64>),
}

impl<'c> AnyArray<'c> {
    fn new(cache: &'c Cache<'c>, elem: Elem, n: u64, start_lba: u64) -> Result<Self> {
        Ok(match elem {
            Elem::U32 => AnyArray::U32(cache.array(n, start_lba, Layout::Stripe)?),
            Elem::F32 => AnyArray::F32(cache.array(n, start_lba, Layout::Stripe)?),
            Elem::U64 => AnyArray::U64(cache.array(n, start_lba, Layout::Stripe)?),
        })
    }
    fn view(&self) -> ArrayView {
        match self {
            AnyArray::U32(a) => a.view(),
            AnyArray::F32(a) => a.view(),
            AnyArray::U64(a) => a.view(),
        }
    }
    fn store_device(&self, src: &DeviceBuffer, n: u64) -> Result<()> {
        match self {
            AnyArray::U32(a) => a.store_device(src, 0, n),
            AnyArray::F32(a) => a.store_device(src, 0, n),
            AnyArray::U64(a) => a.store_device(src, 0, n),
        }
    }
    fn close(self) -> Result<FlushReport> {
        match self {
            AnyArray::U32(a) => a.close(),
            AnyArray::F32(a) => a.close(),
            AnyArray::U64(a) => a.close(),
        }
    }
}

/// What the whole suite shares.
struct Ctx<'a> {
    gpu: &'a Arc<Gpu>,
    m: &'a Module,
    stream: Arc<CudaStream>,
    o: &'a SuiteOptions,
    device: &'a GpuDevice,
}

impl Ctx<'_> {
    /// Launches a generator or helper kernel (grid-stride) on the suite's stream.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters (see suite.cu) and every pointer in
    /// them must stay valid until the stream has been waited for.
    unsafe fn helper(&self, name: &str, args: &mut [KArg]) -> Result<()> {
        let mut p: Vec<*mut c_void> = args.iter_mut().map(KArg::ptr).collect();
        // SAFETY: forwarded to the caller's contract.
        unsafe {
            self.m
                .launch(&self.stream, name, self.gpu.sms * 8, BLOCK, 0, &mut p)
        }
    }

    fn wait(&self) -> Result<()> {
        wait_stream(self.gpu, &self.stream, WAIT)
    }

    /// Copies the lines of `bytes` bytes at `src` that stripe onto SSD `ssd` of `nssd` to
    /// `dst` (nssd = 1: a plain copy), and waits.
    fn copy_lines(
        &self,
        src: u64,
        bytes: u64,
        dst: u64,
        line: u64,
        nssd: u32,
        ssd: u32,
    ) -> Result<()> {
        let mut a = [
            KArg::U64(src),
            KArg::U64(bytes / 4),
            KArg::U32((line / 4) as u32),
            KArg::U32(nssd),
            KArg::U32(ssd),
            KArg::U64(dst),
        ];
        // SAFETY: suite_copy_lines(const uint32_t*, uint64_t, uint32_t, uint32_t, uint32_t,
        // uint32_t*); the caller's src holds `bytes`, dst that SSD's share of the lines; both
        // outlive the wait below.
        unsafe { self.helper("suite_copy_lines", &mut a)? };
        self.wait()
    }

    /// A zeroed GPU buffer for `n` elements of `elem`, filled by `fill` (a generator taking
    /// (ptr, n, seed)).
    fn generated(&self, fill: &str, elem: Elem, n: u64, seed: u64) -> Result<DeviceBuffer> {
        let buf = DeviceBuffer::zeroed(self.gpu, (n * elem.bytes() as u64) as usize)?;
        let mut a = [KArg::U64(buf.ptr()), KArg::U64(n), KArg::U64(seed)];
        // SAFETY: suite_fill_{u64,u32,f32}(T*, uint64_t, uint64_t) over the n elements of
        // `buf`, which outlives the wait.
        unsafe { self.helper(fill, &mut a)? };
        self.wait()?;
        Ok(buf)
    }
}

/// How a variant's runs execute: which form, on which stream and SMs, with which cache,
/// under which time budget.
struct Exec<'a> {
    gpu: &'a Arc<Gpu>,
    m: &'a Module,
    stream: &'a CudaStream,
    form: Form,
    /// SMs the kernels get (all but the simulated controllers').
    sms: u32,
    cache: Option<&'a Cache<'a>>,
    /// The time budget's end (bam-quarter, UVM).
    deadline: Option<Instant>,
    /// Launches per run: BUDGET_CHUNKS while a budgeted variant is slow, else 1.
    chunks: std::cell::Cell<u64>,
    /// The budget, seconds (0 when none).
    budget_s: f64,
    /// A UVM variant (gather does fewer reads).
    uvm: bool,
    /// gather's reads per UVM run are 1/this of the others' (the options' divisor).
    gather_divisor: u64,
    /// Resident blocks per kernel, computed once.
    grids: RefCell<HashMap<String, u32>>,
}

/// One run's measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Run {
    ms: f64,
    work: u64,
    complete: bool,
}

impl<'a> Exec<'a> {
    fn new(c: &'a Ctx<'a>, form: Form, stream: &'a CudaStream, sms: u32) -> Self {
        Exec {
            gpu: c.gpu,
            m: c.m,
            stream,
            form,
            sms,
            cache: None,
            deadline: None,
            chunks: std::cell::Cell::new(1),
            budget_s: 0.0,
            uvm: false,
            gather_divisor: c.o.uvm_gather_divisor.max(1) as u64,
            grids: RefCell::new(HashMap::new()),
        }
    }

    /// `suite_<k>_<form>` (k: a Kernel::symbol, or rmw_check).
    fn name(&self, k: &str) -> String {
        format!("suite_{k}_{}", self.form.suffix())
    }

    /// Blocks of `name` that are resident at once on the SMs the kernels get (grid-stride
    /// kernels launch no more: a second wave would run on few SMs at the end).
    fn grid(&self, name: &str) -> Result<u32> {
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
    unsafe fn launch(&self, name: &str, grid: u32, args: &mut [KArg]) -> Result<()> {
        let mut p: Vec<*mut c_void> = args.iter_mut().map(KArg::ptr).collect();
        // SAFETY: forwarded to the caller's contract.
        unsafe {
            self.m
                .launch(self.stream, name, grid.max(1), BLOCK, 0, &mut p)
        }
    }

    fn wait(&self) -> Result<()> {
        wait_stream(self.gpu, self.stream, WAIT)
    }

    /// Whether runs are split into launches with a wait and a budget check after each
    /// (which adds the waits to the run's time: only for variants that are slow anyway).
    fn chunking(&self) -> bool {
        self.deadline.is_some() && self.chunks.get() > 1
    }

    /// Budgeted: split the runs and check the budget between launches.
    fn set_budget(&mut self, seconds: f64) {
        self.deadline = Some(Instant::now() + Duration::from_secs_f64(seconds));
        self.budget_s = seconds;
        self.chunks.set(BUDGET_CHUNKS);
    }

    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Times `f` (the run's launches) with CUDA events on the stream; `f` returns (work
    /// done, complete, anything else). Then checks the cache's error log.
    fn timed<T>(&self, f: impl FnOnce() -> Result<(u64, bool, T)>) -> Result<(Run, T)> {
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
}

// ---- the kernels ----------------------------------------------------------------------------

/// A kernel of the suite with its inputs.
trait Bench {
    fn kernel(&self) -> Kernel;
    /// The storage arrays' source copies.
    fn masters(&self) -> &[Master];
    /// What `work` counts.
    fn work_unit(&self) -> &'static str;
    /// Storage-array bytes read and written per work unit (None: not meaningful).
    fn bytes_per_unit(&self) -> Option<f64>;
    /// Work of a full run (known after the first complete run).
    fn full_work(&self) -> u64;
    /// A new copy of the storage arrays was placed (rmw forgets its passes).
    fn placed(&mut self) {}
    /// A variant starts (per-variant checks start from zero).
    fn begin_variant(&mut self) {}
    /// One run over the storage arrays `st` (pointers or views, in masters() order).
    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run>;
    /// Checks the variant's results; returns the wrong count and remarks.
    fn verify(&mut self, x: &Exec, st: &[KArg], v: Variant) -> Result<(u64, Vec<String>)>;
}

fn no_reference(k: Kernel) -> Error {
    Error::InvalidArgument(format!(
        "{k}: no hbm result to check against (the hbm variant failed)"
    ))
}

/// A CSR matrix: the row pointers (host and GPU), columns, values.
struct Csr {
    nnz: u64,
    rowptr_host: Vec<u64>,
    rowptr: DeviceBuffer,
    col: DeviceBuffer,
    val: DeviceBuffer,
}

/// Generates the suite's matrix: `rows` x `rows`, row degrees from a discrete Pareto
/// (alpha = 2, mean about `degree`, at most 32768), random columns (suite.cu's
/// suite_csr_degrees / suite_csr_fill); the degrees' prefix sum is taken on the host.
fn gen_csr(c: &Ctx, rows: u64, degree: u32, seed: u64) -> Result<Csr> {
    let deg = DeviceBuffer::zeroed(c.gpu, (4 * rows) as usize)?;
    let mut a = [
        KArg::U64(deg.ptr()),
        KArg::U64(rows),
        KArg::F64(degree as f64 / 2.0),
        KArg::U32(32768),
        KArg::U64(seed),
    ];
    // SAFETY: suite_csr_degrees(uint32_t*, uint64_t, double, uint32_t, uint64_t) over the
    // rows of `deg`, which outlives the wait.
    unsafe { c.helper("suite_csr_degrees", &mut a)? };
    c.wait()?;
    let mut d = vec![0u32; rows as usize];
    deg.read(0, &mut d)?;
    drop(deg);
    let mut rowptr_host = Vec::with_capacity(rows as usize + 1);
    let mut sum = 0u64;
    rowptr_host.push(0);
    for &x in &d {
        sum += x as u64;
        rowptr_host.push(sum);
    }
    let nnz = sum;
    let rowptr = DeviceBuffer::zeroed(c.gpu, 8 * (rows as usize + 1))?;
    rowptr.write(0, &rowptr_host)?;
    let col = DeviceBuffer::zeroed(c.gpu, (4 * nnz.max(1)) as usize)?;
    let val = DeviceBuffer::zeroed(c.gpu, (4 * nnz.max(1)) as usize)?;
    let mut a = [
        KArg::U64(col.ptr()),
        KArg::U64(val.ptr()),
        KArg::U64(nnz),
        KArg::U64(rows),
        KArg::U64(seed.rotate_left(17)),
    ];
    // SAFETY: suite_csr_fill(uint32_t*, float*, uint64_t, uint64_t, uint64_t) over the nnz
    // elements of `col` and `val`, which outlive the wait.
    unsafe { c.helper("suite_csr_fill", &mut a)? };
    c.wait()?;
    Ok(Csr {
        nnz,
        rowptr_host,
        rowptr,
        col,
        val,
    })
}

/// The SpMV result of one row as suite.cu's warp computes it: lane l accumulates
/// nonzeros l, l + 32, ... with fused multiply-adds, then the shuffle-down tree (offsets
/// 16, 8, 4, 2, 1) adds the lanes; lane 0's value. Bitwise what the GPU writes.
pub fn warp_row_sum(cols: &[u32], vals: &[f32], x: &[f32]) -> f32 {
    let mut lane = [0f32; 32];
    for (k, (&c, &v)) in cols.iter().zip(vals).enumerate() {
        lane[k % 32] = v.mul_add(x[c as usize], lane[k % 32]);
    }
    for off in [16, 8, 4, 2, 1] {
        // Lane l reads lane l + off's value from before this step; ascending l sees it
        // unchanged. Lanes past 31 - off keep their own (only lane 0's result matters).
        for l in 0..32 - off {
            lane[l] += lane[l + off];
        }
    }
    lane[0]
}

struct Spmv {
    rows: u64,
    nnz: u64,
    rowptr_host: Vec<u64>,
    rowptr: DeviceBuffer,
    x: DeviceBuffer,
    x_host: Vec<f32>,
    y: DeviceBuffer,
    masters: Vec<Master>,
    y_ref: Option<Vec<f32>>,
    rows_done: u64,
}

impl Spmv {
    fn new(c: &Ctx, rows: u64) -> Result<Self> {
        let seed = c.o.seed ^ 0x5b5f;
        let csr = gen_csr(c, rows, c.o.degree, seed)?;
        let x = c.generated("suite_fill_f32", Elem::F32, rows, seed ^ 0x1111)?;
        let mut x_host = vec![0f32; rows as usize];
        x.read(0, &mut x_host)?;
        Ok(Spmv {
            rows,
            nnz: csr.nnz,
            rowptr_host: csr.rowptr_host,
            rowptr: csr.rowptr,
            x,
            x_host,
            y: DeviceBuffer::zeroed(c.gpu, (4 * rows) as usize)?,
            masters: vec![
                Master {
                    name: "col",
                    elem: Elem::U32,
                    len: csr.nnz.max(1),
                    buf: csr.col,
                },
                Master {
                    name: "val",
                    elem: Elem::F32,
                    len: csr.nnz.max(1),
                    buf: csr.val,
                },
            ],
            y_ref: None,
            rows_done: 0,
        })
    }

    /// Rows whose results the host recomputes: evenly spaced, and the longest row.
    fn sample_rows(&self) -> Vec<u64> {
        let mut v: Vec<u64> = (0..SPMV_SAMPLES)
            .map(|k| k * self.rows / SPMV_SAMPLES)
            .collect();
        let longest = (0..self.rows)
            .max_by_key(|&r| self.rowptr_host[r as usize + 1] - self.rowptr_host[r as usize])
            .unwrap_or(0);
        v.push(longest);
        v
    }
}

impl Bench for Spmv {
    fn kernel(&self) -> Kernel {
        Kernel::Spmv
    }
    fn masters(&self) -> &[Master] {
        &self.masters
    }
    fn work_unit(&self) -> &'static str {
        "nonzeros"
    }
    fn bytes_per_unit(&self) -> Option<f64> {
        Some(8.0) // col (4 B) and val (4 B) per nonzero
    }
    fn full_work(&self) -> u64 {
        self.nnz
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let name = x.name(Kernel::Spmv.symbol());
        let resident = x.grid(&name)? as u64;
        let (rows, rp) = (self.rows, &self.rowptr_host);
        let (rowptr, xv, y) = (self.rowptr.ptr(), self.x.ptr(), self.y.ptr());
        let (run, done) = x.timed(|| {
            let done = x.chunked(rows, |r0, r1| {
                let grid = resident.min((r1 - r0).div_ceil(BLOCK_WARPS)) as u32;
                let mut a = [
                    KArg::U64(rowptr),
                    st[0],
                    st[1],
                    KArg::U64(xv),
                    KArg::U64(y),
                    KArg::U64(r0),
                    KArg::U64(r1),
                ];
                // SAFETY: suite_spmv_<form>(const uint64_t*, COL, VAL, const float*, float*,
                // uint64_t, uint64_t) with COL/VAL the form's u32/f32 arrays (pointers or
                // bam_array_views of the storage arrays); every buffer outlives the run.
                unsafe { x.launch(&name, grid, &mut a) }
            })?;
            Ok((rp[done as usize], done == rows, done))
        })?;
        self.rows_done = done;
        Ok(run)
    }

    fn verify(&mut self, _x: &Exec, _st: &[KArg], v: Variant) -> Result<(u64, Vec<String>)> {
        let mut y = vec![0f32; self.rows as usize];
        self.y.read(0, &mut y)?;
        let done = self.rows_done as usize;
        if v == Variant::Hbm {
            // The baseline against the host's replay of the warp's arithmetic.
            let mut wrong = 0;
            let samples = self.sample_rows();
            for &r in &samples {
                let (b, e) = (
                    self.rowptr_host[r as usize],
                    self.rowptr_host[r as usize + 1],
                );
                let mut cols = vec![0u32; (e - b) as usize];
                let mut vals = vec![0f32; (e - b) as usize];
                self.masters[0].buf.read(4 * b as usize, &mut cols)?;
                self.masters[1].buf.read(4 * b as usize, &mut vals)?;
                let want = warp_row_sum(&cols, &vals, &self.x_host);
                wrong += (y[r as usize].to_bits() != want.to_bits()) as u64;
            }
            self.y_ref = Some(y);
            return Ok((
                wrong,
                vec![format!(
                    "checked: {} rows recomputed on the host, bit for bit",
                    samples.len()
                )],
            ));
        }
        let r = self
            .y_ref
            .as_ref()
            .ok_or_else(|| no_reference(Kernel::Spmv))?;
        let wrong = y[..done]
            .iter()
            .zip(&r[..done])
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count() as u64;
        let mut notes = vec!["checked: y bit for bit against the hbm run".to_string()];
        if done < y.len() {
            notes.push(format!("checked the {done} rows the last run computed"));
        }
        Ok((wrong, notes))
    }
}

struct Bfs {
    n: u64,
    nnz: u64,
    rowptr_host: Vec<u64>,
    masters: Vec<Master>,
    dist: DeviceBuffer,
    front: [DeviceBuffer; 2],
    counts: DeviceBuffer,
    /// Edges expanded at each level (from the first complete run).
    level_edges: Option<Vec<u64>>,
    dist_ref: Option<Vec<u32>>,
    /// The last run: levels fully expanded, frontier entries of the next one expanded,
    /// and whether it ran to the end.
    levels_done: u32,
    partial: u64,
    complete: bool,
}

const UNSEEN: u32 = u32::MAX;

impl Bfs {
    fn new(c: &Ctx, rows: u64) -> Result<Self> {
        let csr = gen_csr(c, rows, c.o.degree, c.o.seed ^ 0xbf5)?;
        drop(csr.val);
        let buf = |bytes: u64| DeviceBuffer::zeroed(c.gpu, bytes as usize);
        Ok(Bfs {
            n: rows,
            nnz: csr.nnz,
            rowptr_host: csr.rowptr_host,
            masters: vec![
                Master {
                    name: "rowptr",
                    elem: Elem::U64,
                    len: rows + 1,
                    buf: csr.rowptr,
                },
                Master {
                    name: "col",
                    elem: Elem::U32,
                    len: csr.nnz.max(1),
                    buf: csr.col,
                },
            ],
            dist: buf(4 * rows)?,
            front: [buf(4 * rows)?, buf(4 * rows)?],
            counts: buf(4 * (MAX_LEVELS as u64 + 1))?,
            level_edges: None,
            dist_ref: None,
            levels_done: 0,
            partial: 0,
            complete: false,
        })
    }

    fn degree(&self, v: u32) -> u64 {
        self.rowptr_host[v as usize + 1] - self.rowptr_host[v as usize]
    }
}

impl Bench for Bfs {
    fn kernel(&self) -> Kernel {
        Kernel::Bfs
    }
    fn masters(&self) -> &[Master] {
        &self.masters
    }
    fn work_unit(&self) -> &'static str {
        "edges"
    }
    fn bytes_per_unit(&self) -> Option<f64> {
        None
    }
    fn full_work(&self) -> u64 {
        self.level_edges
            .as_ref()
            .map_or(self.nnz, |l| l.iter().sum())
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let name = x.name(Kernel::Bfs.symbol());
        let resident = x.grid(&name)? as u64;
        // Start state, before the timing: dist = UNSEEN but dist[0] = 0, frontier {0}.
        let mut init = [
            KArg::U64(self.dist.ptr()),
            KArg::U64(self.n),
            KArg::U64(self.front[0].ptr()),
            KArg::U32(0),
            KArg::U64(self.counts.ptr()),
            KArg::U32(MAX_LEVELS + 1),
        ];
        // SAFETY: suite_bfs_init(uint32_t*, uint64_t, uint32_t*, uint32_t, uint32_t*,
        // uint32_t): dist and front[0] hold n entries, counts MAX_LEVELS + 1; they outlive
        // the run.
        unsafe { x.launch("suite_bfs_init", x.gpu.sms * 8, &mut init)? };
        let (dist, counts) = (self.dist.ptr(), self.counts.ptr());
        let fronts = [self.front[0].ptr(), self.front[1].ptr()];
        let counts_buf = &self.counts;
        let chunk = if x.chunking() {
            BUDGET_BFS_CHUNK
        } else {
            u64::MAX
        };
        let (run, (levels, partial)) = x.timed(|| {
            let (mut level, mut size) = (0u32, 1u64);
            let mut partial = 0;
            while size > 0 {
                if level + 1 >= MAX_LEVELS {
                    return Err(Error::InvalidArgument(format!(
                        "bfs: more than {MAX_LEVELS} levels"
                    )));
                }
                let mut k0 = 0;
                while k0 < size {
                    if (level > 0 || k0 > 0) && x.expired() {
                        break;
                    }
                    let k1 = size.min(k0.saturating_add(chunk));
                    let grid = resident.min((k1 - k0).div_ceil(BLOCK_WARPS)) as u32;
                    let mut a = [
                        st[0],
                        st[1],
                        KArg::U64(dist),
                        KArg::U64(fronts[level as usize % 2]),
                        KArg::U64(k0),
                        KArg::U64(k1),
                        KArg::U64(fronts[(level as usize + 1) % 2]),
                        KArg::U64(counts),
                        KArg::U32(level),
                    ];
                    // SAFETY: suite_bfs_<form>(ROW, COL, uint32_t*, const uint32_t*, uint64_t,
                    // uint64_t, uint32_t*, uint32_t*, uint32_t) with ROW/COL the form's u64/u32
                    // storage arrays; the frontiers hold n entries (each vertex enters once),
                    // counts MAX_LEVELS + 1 > level + 1; everything outlives the run.
                    unsafe { x.launch(&name, grid, &mut a)? };
                    if x.chunking() {
                        x.wait()?;
                    }
                    k0 = k1;
                }
                if k0 < size {
                    partial = k0;
                    break;
                }
                x.wait()?;
                let mut next = [0u32];
                counts_buf.read(4 * (level as usize + 1), &mut next)?;
                size = next[0] as u64;
                level += 1;
            }
            Ok((0, size == 0, (level, partial)))
        })?;
        self.levels_done = levels;
        self.partial = partial;
        self.complete = run.complete;
        // Edges expanded: from the levels of the first complete run's distances.
        if run.complete && self.level_edges.is_none() {
            let mut d = vec![0u32; self.n as usize];
            self.dist.read(0, &mut d)?;
            let mut per = vec![0u64; levels as usize + 1];
            for (v, &l) in d.iter().enumerate() {
                if l != UNSEEN && (l as usize) < per.len() {
                    per[l as usize] += self.degree(v as u32);
                }
            }
            self.level_edges = Some(per);
        }
        let per = self
            .level_edges
            .as_ref()
            .ok_or_else(|| no_reference(Kernel::Bfs))?;
        let mut work: u64 = per.iter().take(levels as usize).sum();
        if partial > 0 {
            // The frontier entries of the cut level that were expanded.
            let mut f = vec![0u32; partial as usize];
            self.front[levels as usize % 2].read(0, &mut f)?;
            work += f.iter().map(|&v| self.degree(v)).sum::<u64>();
        }
        Ok(Run { work, ..run })
    }

    fn verify(&mut self, _x: &Exec, _st: &[KArg], v: Variant) -> Result<(u64, Vec<String>)> {
        let mut d = vec![0u32; self.n as usize];
        self.dist.read(0, &mut d)?;
        if v == Variant::Hbm {
            // Internal consistency only: the source at 0, every level below the depth.
            let reached = d.iter().filter(|&&x| x != UNSEEN).count();
            let wrong = (d[0] != 0) as u64
                + d.iter()
                    .filter(|&&x| x != UNSEEN && x >= self.levels_done)
                    .count() as u64;
            self.dist_ref = Some(d);
            return Ok((
                wrong,
                vec![format!(
                    "{reached} of {} vertices reached in {} levels; dist[0] = 0 and every distance below the depth checked",
                    self.n, self.levels_done
                )],
            ));
        }
        let r = self
            .dist_ref
            .as_ref()
            .ok_or_else(|| no_reference(Kernel::Bfs))?;
        let (l, complete) = (self.levels_done, self.complete);
        // A cut run expanded levels 0..l whole (so every distance up to l is final) and
        // part of level l (so a vertex at l + 1 may be reached or not); nothing beyond.
        let bad = |got: u32, want: u32| {
            if complete || (want != UNSEEN && want <= l) {
                got != want
            } else if want == l + 1 {
                got != want && got != UNSEEN
            } else {
                got != UNSEEN
            }
        };
        let wrong = d.iter().zip(r).filter(|&(&g, &w)| bad(g, w)).count() as u64;
        let mut notes = vec!["checked: every distance against the hbm run".to_string()];
        if !complete {
            notes.push(format!(
                "the last run expanded {l} levels and {} vertices of the next; distances checked up to there",
                self.partial
            ));
        }
        Ok((wrong, notes))
    }
}

struct Gather {
    n: u64,
    reads: u64,
    seed: u64,
    masters: Vec<Master>,
    out: DeviceBuffer,
    sum_ref: Option<u64>,
    wrong: u64,
    sum_mismatch: u64,
}

impl Gather {
    fn new(c: &Ctx, n: u64, reads: u64) -> Result<Self> {
        let seed = c.o.seed ^ 0x6a7;
        Ok(Gather {
            n,
            reads,
            seed,
            masters: vec![Master {
                name: "a",
                elem: Elem::U64,
                len: n,
                buf: c.generated("suite_fill_u64", Elem::U64, n, seed)?,
            }],
            out: DeviceBuffer::zeroed(c.gpu, 16)?,
            sum_ref: None,
            wrong: 0,
            sum_mismatch: 0,
        })
    }
}

impl Bench for Gather {
    fn kernel(&self) -> Kernel {
        Kernel::Gather
    }
    fn masters(&self) -> &[Master] {
        &self.masters
    }
    fn work_unit(&self) -> &'static str {
        "reads"
    }
    fn bytes_per_unit(&self) -> Option<f64> {
        Some(8.0)
    }
    fn full_work(&self) -> u64 {
        self.reads
    }
    fn begin_variant(&mut self) {
        self.wrong = 0;
        self.sum_mismatch = 0;
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let name = x.name(Kernel::Gather.symbol());
        let resident = x.grid(&name)? as u64;
        self.out.zero()?;
        let full = !x.uvm;
        let reads = if full {
            self.reads
        } else {
            (self.reads / x.gather_divisor).max(1)
        };
        let (n, seed, out) = (self.n, self.seed, self.out.ptr());
        let rseed = seed.rotate_left(29) ^ 0x9e37_79b9;
        let (run, done) = x.timed(|| {
            let done = x.chunked(reads, |k0, k1| {
                let grid = resident.min((k1 - k0).div_ceil(BLOCK as u64)) as u32;
                let mut a = [
                    st[0],
                    KArg::U64(n),
                    KArg::U64(k0),
                    KArg::U64(k1 - k0),
                    KArg::U64(seed),
                    KArg::U64(rseed),
                    KArg::U64(out),
                ];
                // SAFETY: suite_gather_<form>(A, uint64_t, uint64_t, uint64_t, uint64_t,
                // uint64_t, unsigned long long*) with A the form's u64 storage array of n
                // elements; `out` holds 2 counters; all outlive the run.
                unsafe { x.launch(&name, grid, &mut a) }
            })?;
            Ok((done, done == reads, done))
        })?;
        let mut r = [0u64; 2];
        self.out.read(0, &mut r)?;
        self.wrong += r[1];
        if full && done == reads {
            match self.sum_ref {
                None => self.sum_ref = Some(r[0]),
                Some(s) => self.sum_mismatch += (s != r[0]) as u64,
            }
        }
        Ok(run)
    }

    fn verify(&mut self, x: &Exec, _st: &[KArg], _v: Variant) -> Result<(u64, Vec<String>)> {
        let mut notes = vec!["checked: every value read against its pattern".to_string()];
        if x.uvm {
            notes.push(format!(
                "UVM: {} of the reads per run (1/{}; the rate is per read)",
                (self.reads / x.gather_divisor).max(1),
                x.gather_divisor
            ));
        } else {
            notes.push("checked: each full run's sum against the hbm run's".into());
        }
        if self.sum_mismatch > 0 {
            notes.push(format!(
                "{} run(s) summed differently from the hbm run",
                self.sum_mismatch
            ));
        }
        Ok((self.wrong + self.sum_mismatch, notes))
    }
}

struct Histogram {
    n: u64,
    masters: Vec<Master>,
    hist: DeviceBuffer,
    hist_ref: Option<Vec<u64>>,
    wrong: u64,
    done: u64,
}

impl Histogram {
    fn new(c: &Ctx, n: u64) -> Result<Self> {
        Ok(Histogram {
            n,
            masters: vec![Master {
                name: "a",
                elem: Elem::U32,
                len: n,
                buf: c.generated("suite_fill_u32", Elem::U32, n, c.o.seed ^ 0x4157)?,
            }],
            hist: DeviceBuffer::zeroed(c.gpu, 256 * 8)?,
            hist_ref: None,
            wrong: 0,
            done: 0,
        })
    }
}

impl Bench for Histogram {
    fn kernel(&self) -> Kernel {
        Kernel::Histogram
    }
    fn masters(&self) -> &[Master] {
        &self.masters
    }
    fn work_unit(&self) -> &'static str {
        "elements"
    }
    fn bytes_per_unit(&self) -> Option<f64> {
        Some(4.0)
    }
    fn full_work(&self) -> u64 {
        self.n
    }
    fn begin_variant(&mut self) {
        self.wrong = 0;
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let name = x.name(Kernel::Histogram.symbol());
        let resident = x.grid(&name)? as u64;
        self.hist.zero()?;
        let (n, out) = (self.n, self.hist.ptr());
        let (run, done) = x.timed(|| {
            let done = x.chunked(n, |lo, hi| {
                let grid = resident.min((hi - lo).div_ceil(BLOCK as u64)) as u32;
                let mut a = [
                    st[0],
                    KArg::U64(lo),
                    KArg::U64(hi),
                    KArg::U32(HIST_SHIFT),
                    KArg::U64(out),
                ];
                // SAFETY: suite_hist_<form>(A, uint64_t, uint64_t, uint32_t,
                // unsigned long long*) with A the form's u32 storage array of n elements;
                // `out` holds 256 bins; all outlive the run.
                unsafe { x.launch(&name, grid, &mut a) }
            })?;
            Ok((done, done == n, done))
        })?;
        self.done = done;
        let mut h = vec![0u64; 256];
        self.hist.read(0, &mut h)?;
        // Every run: the bins add up to the elements counted; full runs: the hbm bins.
        self.wrong += (h.iter().sum::<u64>() != done) as u64;
        if done == n {
            match &self.hist_ref {
                None => self.hist_ref = Some(h),
                Some(r) => self.wrong += r.iter().zip(&h).filter(|(a, b)| a != b).count() as u64,
            }
        }
        Ok(run)
    }

    fn verify(&mut self, _x: &Exec, _st: &[KArg], _v: Variant) -> Result<(u64, Vec<String>)> {
        if self.hist_ref.is_none() {
            return Err(no_reference(Kernel::Histogram));
        }
        let mut notes = vec![
            "checked: each run's bins sum to the elements it counted, and full runs' bins equal the hbm run's (counts bins)".to_string(),
        ];
        if self.done < self.n {
            notes.push(format!(
                "the last run counted {} of {} elements",
                self.done, self.n
            ));
        }
        Ok((self.wrong, notes))
    }
}

struct Rmw {
    n: u64,
    seed: u64,
    masters: Vec<Master>,
    wrong: DeviceBuffer,
    /// Full passes over the current copy of the array, and where a cut pass stopped.
    passes: u32,
    split: u64,
}

impl Rmw {
    fn new(c: &Ctx, n: u64) -> Result<Self> {
        let seed = c.o.seed ^ 0x3a3;
        Ok(Rmw {
            n,
            seed,
            masters: vec![Master {
                name: "a",
                elem: Elem::U64,
                len: n,
                buf: c.generated("suite_fill_u64", Elem::U64, n, seed)?,
            }],
            wrong: DeviceBuffer::zeroed(c.gpu, 8)?,
            passes: 0,
            split: 0,
        })
    }
}

impl Bench for Rmw {
    fn kernel(&self) -> Kernel {
        Kernel::Rmw
    }
    fn masters(&self) -> &[Master] {
        &self.masters
    }
    fn work_unit(&self) -> &'static str {
        "elements"
    }
    fn bytes_per_unit(&self) -> Option<f64> {
        Some(16.0) // read and write 8 B
    }
    fn full_work(&self) -> u64 {
        self.n
    }
    fn placed(&mut self) {
        self.passes = 0;
        self.split = 0;
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let name = x.name(Kernel::Rmw.symbol());
        let resident = x.grid(&name)? as u64;
        let n = self.n;
        let (run, done) = x.timed(|| {
            let done = x.chunked(n, |lo, hi| {
                let grid = resident.min((hi - lo).div_ceil(BLOCK as u64)) as u32;
                let mut a = [st[0], KArg::U64(lo), KArg::U64(hi)];
                // SAFETY: suite_rmw_<form>(A, uint64_t, uint64_t) with A the form's u64
                // storage array of n elements, which outlives the run.
                unsafe { x.launch(&name, grid, &mut a) }
            })?;
            Ok((done, done == n, done))
        })?;
        if done == n {
            self.passes += 1;
        } else {
            self.split = done;
        }
        Ok(run)
    }

    fn verify(&mut self, x: &Exec, st: &[KArg], _v: Variant) -> Result<(u64, Vec<String>)> {
        let name = x.name("rmw_check");
        self.wrong.zero()?;
        let mut a = [
            st[0],
            KArg::U64(self.n),
            KArg::U64(self.seed),
            KArg::U32(self.passes),
            KArg::U64(self.split),
            KArg::U64(self.wrong.ptr()),
        ];
        // SAFETY: suite_rmw_check_<form>(A, uint64_t, uint64_t, uint32_t, uint64_t,
        // unsigned long long*) with A the form's u64 storage array of n elements; `wrong`
        // holds one counter; both outlive the wait below.
        unsafe { x.launch(&name, x.grid(&name)?, &mut a)? };
        x.wait()?;
        if let Some(c) = x.cache {
            c.check_errors()?;
        }
        let mut w = [0u64];
        self.wrong.read(0, &mut w)?;
        let mut notes = vec![format!(
            "checked: every element read back{} against its pattern after {} pass(es)",
            if x.form == Form::Plain {
                ""
            } else {
                " through the cache"
            },
            self.passes
        )];
        if self.split > 0 {
            notes.push(format!(
                "the last pass stopped at element {} (time budget)",
                self.split
            ));
        }
        Ok((w[0], notes))
    }
}

// ---- running variants -----------------------------------------------------------------------

/// What the variant runners report to run_kernel.
enum Step {
    Starting(Variant, String),
    Done(Box<VariantResult>),
}

/// The lower median.
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len().saturating_sub(1) / 2).copied().unwrap_or(0.0)
}

/// Times and rate of a variant's timed runs: (ms median, ms min, work, complete, rate).
fn summarize(runs: &[Run]) -> (f64, f64, u64, bool, f64) {
    let ms: Vec<f64> = runs.iter().map(|r| r.ms).collect();
    let ms_median = median(&ms);
    let ms_min = ms.iter().copied().fold(f64::INFINITY, f64::min);
    let complete = runs.iter().all(|r| r.complete);
    let rate_of = |r: &Run| {
        if r.ms > 0.0 {
            r.work as f64 / (r.ms / 1e3)
        } else {
            0.0
        }
    };
    let (work, rate) = if complete {
        let work = runs.first().map_or(0, |r| r.work);
        let rate = if ms_median > 0.0 {
            work as f64 / (ms_median / 1e3)
        } else {
            0.0
        };
        (work, rate)
    } else {
        let rates: Vec<f64> = runs.iter().map(rate_of).collect();
        let works: Vec<f64> = runs.iter().map(|r| r.work as f64).collect();
        (median(&works) as u64, median(&rates))
    };
    (
        ms_median,
        if ms_min.is_finite() { ms_min } else { 0.0 },
        work,
        complete,
        rate,
    )
}

/// Warm-up, timed runs, verification: the measurement of one variant.
fn measure(
    b: &mut dyn Bench,
    x: &Exec,
    st: &[KArg],
    v: Variant,
    reps: u32,
    memory: String,
) -> Result<VariantResult> {
    b.begin_variant();
    let warm = b.run(x, st)?;
    // The statistics of the timed runs (of the warm-up when it is all there is).
    if let (Some(c), true) = (x.cache, warm.complete) {
        c.reset_stats()?;
    }
    // A budgeted variant whose warm-up was quick times its runs unsplit (no waits inside
    // the timed region); a slow one stays split, so that the budget can stop it.
    if let Some(d) = x.deadline {
        let left_ms = d.saturating_duration_since(Instant::now()).as_secs_f64() * 1e3;
        if warm.complete && warm.ms * reps as f64 * 2.0 < left_ms {
            x.chunks.set(1);
        }
    }
    let split = x.chunking();
    let mut runs = Vec::new();
    if warm.complete {
        for _ in 0..reps {
            if x.expired() {
                break;
            }
            let r = b.run(x, st)?;
            runs.push(r);
            if !r.complete {
                break;
            }
        }
    }
    let mut notes = Vec::new();
    if split {
        notes.push(format!(
            "slow: each run was split into up to {BUDGET_CHUNKS} launches with a wait after each, \
             so that the {} s budget could stop it",
            x.budget_s
        ));
    }
    if runs.is_empty() {
        notes.push(
            "the time budget ran out in the warm-up run: the figures are that (cold) run's".into(),
        );
        runs.push(warm);
    } else if runs.len() < reps as usize {
        notes.push(format!(
            "the time budget allowed {} of {reps} timed runs",
            runs.len()
        ));
    }
    let (ms_median, ms_min, work, complete, rate) = summarize(&runs);
    if !complete {
        notes.push(format!(
            "a run was cut by the time budget: rate = work done / time ({} of {} {})",
            runs.last().map_or(0, |r| r.work),
            b.full_work(),
            b.work_unit()
        ));
    }
    let cache = match x.cache {
        Some(c) => {
            let stats = c.stats()?;
            let state = c.state()?;
            if !state.is_idle() {
                return Err(Error::InvalidArgument(format!(
                    "the cache is not idle after the runs: {state}"
                )));
            }
            Some(CacheInfo {
                slots: c.config().slots,
                data_lines: 0,
                line_bytes: c.config().line_bytes,
                media: String::new(),
                hit_rate: stats.hit_rate(),
                stats,
            })
        }
        None => None,
    };
    let (wrong, checks) = b.verify(x, st, v)?;
    notes.extend(checks);
    Ok(VariantResult {
        variant: v,
        form: x.form,
        memory,
        runs: runs.len() as u32,
        ms_median,
        ms_min,
        work,
        complete,
        rate,
        gbps: b.bytes_per_unit().map(|bpu| rate * bpu / 1e9),
        ratio_to_hbm: None,
        ratio_to_zerocopy: None,
        wrong,
        cache,
        uvm: None,
        notes,
        error: None,
    })
}

/// `hbm` and `zerocopy`: the plain kernel over copies of the storage arrays in GPU memory
/// or in pinned, mapped host memory.
fn plain_variant(c: &Ctx, b: &mut dyn Bench, v: Variant, memory: String) -> Result<VariantResult> {
    let mut mems = Vec::new();
    for m in b.masters() {
        let mem = match v {
            Variant::Hbm => Mem::Hbm(DeviceBuffer::zeroed(c.gpu, m.bytes() as usize)?),
            _ => Mem::Pinned(PinnedBuffer::new(c.gpu, m.bytes() as usize)?),
        };
        c.copy_lines(
            m.buf.ptr(),
            m.bytes(),
            mem.ptr(),
            c.o.line_bytes as u64,
            1,
            0,
        )?;
        mems.push(mem);
    }
    b.placed();
    let st: Vec<KArg> = mems.iter().map(|m| KArg::U64(m.ptr())).collect();
    let x = Exec::new(c, Form::Plain, &c.stream, c.gpu.sms);
    measure(b, &x, &st, v, c.o.reps, memory)
}

/// The ported variants that share one cache: `bam-hit` and `bam-pin-hit` (every line
/// cached, media in GPU memory) or `bam-quarter` (a quarter of the lines, media in pinned
/// host memory). Setup errors fail all of `vs`.
fn ported_variants(
    c: &Ctx,
    b: &mut dyn Bench,
    quarter: bool,
    vs: &[Variant],
    step: &mut dyn FnMut(Step),
) {
    let memory = |slots: u64, lines: u64| {
        let on = match (c.device, quarter) {
            (GpuDevice::Sim { .. }, false) => "simulated SSDs, media in GPU memory".into(),
            (GpuDevice::Sim { .. }, true) => "simulated SSDs, media in pinned host memory".into(),
            (d, _) => device_name(d),
        };
        format!("a cache of {slots} of the data's {lines} lines over {on}")
    };
    // The last result is held until the cache and arrays are closed (the flush writes
    // dirty lines back): a failure there belongs to it. A setup failure fails every
    // variant that has no result yet.
    let mut reported: Vec<Variant> = Vec::new();
    let mut held: Option<Box<VariantResult>> = None;
    let r = ported_inner(
        c,
        b,
        quarter,
        vs,
        &mut |s| {
            if let Some(h) = held.take() {
                reported.push(h.variant);
                step(Step::Done(h));
            }
            match s {
                Step::Done(r) => held = Some(r),
                s => step(s),
            }
        },
        &memory,
    );
    if let Some(mut h) = held.take() {
        if let Err(e) = &r {
            h.error
                .get_or_insert_with(|| format!("closing the cache after the runs: {e}"));
        }
        reported.push(h.variant);
        step(Step::Done(h));
    }
    if let Err(e) = r {
        for &v in vs.iter().filter(|v| !reported.contains(v)) {
            step(Step::Done(Box::new(VariantResult::failed(
                v,
                memory(0, 0),
                &e,
            ))));
        }
    }
}

fn ported_inner(
    c: &Ctx,
    b: &mut dyn Bench,
    quarter: bool,
    vs: &[Variant],
    step: &mut dyn FnMut(Step),
    memory: &dyn Fn(u64, u64) -> String,
) -> Result<()> {
    let line = c.o.line_bytes as u64;
    let nssd = c.device.ssds().max(1) as u64;
    let lines: Vec<u64> = b
        .masters()
        .iter()
        .map(|m| m.bytes().div_ceil(line))
        .collect();
    let total: u64 = lines.iter().sum();
    let slots = if quarter {
        total.div_ceil(4)
    } else {
        SuiteOptions::hit_slots(total)
    };
    let slots = u32::try_from(slots)
        .map_err(|_| Error::InvalidArgument(format!("{slots} cache lines: more than 2^32 - 1")))?;
    // Each array on its own LBA range, one after the other (whole lines on every SSD).
    let per_ssd: Vec<u64> = lines.iter().map(|l| l.div_ceil(nssd)).collect();
    let capacity = per_ssd.iter().sum::<u64>() * line + (1 << 20);
    let media = if quarter { Media::Host } else { Media::Hbm };
    let dev = study_device(c.device, media, capacity);
    let shape = Shape {
        queues: c.o.queues,
        depth: 1024,
        slot_bytes: line.next_power_of_two(),
        nslots: slots,
        timeout: Duration::from_secs(5),
        sim_sms: c.o.sim_sms,
        fill_pattern: false,
    };
    let storage = dev.open(c.gpu, &shape)?;
    let geo = storage.io().geometry().clone();
    let lba = geo.lba_size as u64;
    if !line.is_multiple_of(lba) {
        return Err(Error::InvalidArgument(format!(
            "line size {line} B is not a multiple of the SSDs' {lba}-byte blocks"
        )));
    }
    let cache = Cache::new(storage.io(), CacheConfig::new(line as u32, slots))?;
    {
        let mut arrays = Vec::new();
        let mut start = 0u64;
        for (m, per) in b.masters().iter().zip(&per_ssd) {
            arrays.push(AnyArray::new(&cache, m.elem, m.len, start * line / lba)?);
            start += per;
        }
        // The data: straight onto the simulated media (the cache is empty), else written
        // through the cache and flushed.
        match bam::SimArray::of(&*storage) {
            Some(sim) => {
                for (m, a) in b.masters().iter().zip(&arrays) {
                    let first = a.view().start_lba * lba;
                    for s in 0..nssd as u32 {
                        c.copy_lines(
                            m.buf.ptr(),
                            m.bytes(),
                            sim.medium_ptr(s as usize) + first,
                            line,
                            nssd as u32,
                            s,
                        )?;
                    }
                }
            }
            None => {
                for (m, a) in b.masters().iter().zip(&arrays) {
                    a.store_device(&m.buf, m.len)?;
                }
                cache.flush()?;
            }
        }
        b.placed();
        let st: Vec<KArg> = arrays.iter().map(|a| KArg::View(a.view())).collect();
        let sms = c.gpu.sms.saturating_sub(geo.reserved_sms).max(1);
        if !quarter {
            preload(c, &cache, b.masters(), &st, sms)?;
        }
        let media_name = match (&dev, quarter) {
            (GpuDevice::Sim { .. }, false) => "GPU memory (simulated SSDs)".to_string(),
            (GpuDevice::Sim { .. }, true) => "pinned host memory (simulated SSDs)".to_string(),
            (d, _) => device_name(d),
        };
        for &v in vs {
            step(Step::Starting(v, String::new()));
            let mut x = Exec::new(c, v.form(), cache.stream(), sms);
            x.cache = Some(&cache);
            if v.budgeted() {
                x.set_budget(c.o.budget_s);
            }
            let r = measure(b, &x, &st, v, c.o.reps, memory(slots as u64, total)).map(|mut r| {
                if let Some(ci) = &mut r.cache {
                    ci.data_lines = total;
                    ci.media = media_name.clone();
                }
                r
            });
            step(Step::Done(Box::new(r.unwrap_or_else(|e| {
                VariantResult::failed(v, memory(slots as u64, total), &e)
            }))));
        }
        for a in arrays {
            a.close()?;
        }
    }
    cache.close()?;
    drop(storage);
    Ok(())
}

/// Allocates GPU memory (the balloon, in parts) until `left` bytes stay free, within
/// BALLOON_TOLERANCE. cuMemAlloc takes a little more than it is asked for and fails near
/// the limit, so each step measures again: a part that does not fit is halved, what an
/// allocation took beyond its size is subtracted from the next, and an overshoot gives
/// the last part back. Returns the parts and the free memory left.
fn inflate(gpu: &Arc<Gpu>, left: u64) -> Result<(Vec<DeviceBuffer>, u64)> {
    let free = || -> Result<u64> {
        gpu.bind()?;
        Ok(cudarc::driver::result::mem_get_info()?.0 as u64)
    };
    let mut parts: Vec<DeviceBuffer> = Vec::new();
    let mut extra = 0u64;
    for _ in 0..32 {
        let f = free()?;
        if f > left + BALLOON_TOLERANCE {
            let mut want = (f - left).saturating_sub(extra).max(2 << 20);
            loop {
                match DeviceBuffer::zeroed(gpu, want as usize) {
                    Ok(part) => {
                        extra = extra.max(f.saturating_sub(free()?).saturating_sub(want));
                        parts.push(part);
                        break;
                    }
                    Err(_) if want > 4 << 20 => want /= 2,
                    Err(_) => return Ok((parts, f)),
                }
            }
        } else if f + BALLOON_TOLERANCE < left {
            match parts.pop() {
                Some(part) => drop(part),
                None => break,
            }
        } else {
            break;
        }
    }
    Ok((parts, free()?))
}

/// Loads every line of the storage arrays (views in `st`) into the all-hits cache, one
/// warp per line (suite_touch_*), so that the kernels' own runs find every line there
/// (see suite.cu's touch for why the kernels' first run cannot do it).
fn preload(c: &Ctx, cache: &Cache, masters: &[Master], st: &[KArg], sms: u32) -> Result<()> {
    let failed = DeviceBuffer::zeroed(c.gpu, 8)?;
    let mut x = Exec::new(c, Form::Bam, cache.stream(), sms);
    x.cache = Some(cache);
    for (m, &view) in masters.iter().zip(st) {
        let name = if m.elem.bytes() == 4 {
            "suite_touch_4"
        } else {
            "suite_touch_8"
        };
        let mut a = [view, KArg::U64(failed.ptr())];
        // SAFETY: suite_touch_{4,8}(bam::array<T>, unsigned long long*) with T of the
        // array's element size (the view of a live array of the cache); `failed` holds one
        // counter; both outlive the wait.
        unsafe { x.launch(name, x.grid(name)?, &mut a)? };
    }
    x.wait()?;
    cache.check_errors()?;
    let mut f = [0u64];
    failed.read(0, &mut f)?;
    if f[0] != 0 {
        return Err(Error::InvalidArgument(format!(
            "loading the cache: {} line(s) could not be acquired",
            f[0]
        )));
    }
    Ok(())
}

/// `uvm-2x` and `uvm-4x`: the plain kernel over a fresh managed copy of the storage arrays
/// for each, GPU memory shrunk by a balloon.
fn uvm_variants(c: &Ctx, b: &mut dyn Bench, vs: &[Variant], step: &mut dyn FnMut(Step)) {
    let data: u64 = b.masters().iter().map(Master::bytes).sum();
    for &v in vs {
        let over = v.oversubscription().unwrap_or(1);
        let memory = format!("managed memory (cuMemAllocManaged), {over}x the GPU memory left");
        step(Step::Starting(
            v,
            format!(
                "{over}x oversubscription, up to {} s (time budget)",
                c.o.budget_s
            ),
        ));
        let r = (|| -> Result<VariantResult> {
            // The balloon first, then a fresh managed copy written by the GPU: the copy
            // fills what the balloon left and the driver moves the rest to host memory
            // (it cannot evict the balloon). Done the other way round (copy, prefetch to
            // the host, then the balloon) the data stayed in GPU memory on an H100:
            // uvm-4x ran at GPU-memory speed. A fresh copy for every variant, so none
            // inherits another's placement. The source copies stay in GPU memory: the
            // balloon is sized from the free memory measured with them.
            let (balloon, free_after) = inflate(c.gpu, data / over + UVM_DRIVER_MARGIN)?;
            let balloon_bytes = balloon.iter().map(|b| b.len() as u64).sum();
            let mut mems = Vec::new();
            for m in b.masters() {
                let mem = Managed::new(c.gpu, m.bytes() as usize)?;
                c.copy_lines(m.buf.ptr(), m.bytes(), mem.ptr, c.o.line_bytes as u64, 1, 0)?;
                mems.push(mem);
            }
            b.placed();
            c.gpu.bind()?;
            let free_filled = cudarc::driver::result::mem_get_info()?.0 as u64;
            let st: Vec<KArg> = mems.iter().map(|m| KArg::U64(m.ptr)).collect();
            let mut x = Exec::new(c, Form::Plain, &c.stream, c.gpu.sms);
            x.uvm = true;
            x.set_budget(c.o.budget_s);
            let r = measure(b, &x, &st, v, c.o.reps, memory.clone());
            drop(mems);
            drop(balloon);
            let mut r = r?;
            let usable = free_after.saturating_sub(UVM_DRIVER_MARGIN).max(1);
            r.uvm = Some(UvmInfo {
                oversubscription: over,
                data_bytes: data,
                balloon_bytes,
                gpu_free_bytes: free_after,
                gpu_free_after_fill: free_filled,
                margin_bytes: UVM_DRIVER_MARGIN,
                effective_oversubscription: data as f64 / usable as f64,
            });
            Ok(r)
        })();
        step(Step::Done(Box::new(
            r.unwrap_or_else(|e| VariantResult::failed(v, memory, &e)),
        )));
    }
}

/// Runs every selected variant of one kernel.
fn run_kernel(
    c: &Ctx,
    b: &mut dyn Bench,
    progress: &mut dyn FnMut(SuiteEvent<'_>),
) -> KernelReport {
    let k = b.kernel();
    let storage: Vec<ArrayInfo> = b.masters().iter().map(Master::info).collect();
    let storage_bytes = b.masters().iter().map(Master::bytes).sum();
    let mut results: Vec<VariantResult> = Vec::new();
    {
        let mut step = |s: Step| match s {
            Step::Starting(variant, detail) => progress(SuiteEvent::Starting {
                kernel: k,
                variant,
                detail,
            }),
            Step::Done(mut r) => {
                let rate_of = |v: Variant| {
                    results
                        .iter()
                        .find(|x| x.variant == v && x.error.is_none() && x.rate > 0.0)
                        .map(|x| x.rate)
                };
                if r.error.is_none() {
                    let own = (r.variant == Variant::Hbm).then_some(r.rate);
                    r.ratio_to_hbm = own.or(rate_of(Variant::Hbm)).map(|h| r.rate / h);
                    let own = (r.variant == Variant::Zerocopy).then_some(r.rate);
                    r.ratio_to_zerocopy = own.or(rate_of(Variant::Zerocopy)).map(|z| r.rate / z);
                }
                progress(SuiteEvent::Finished {
                    kernel: k,
                    result: &r,
                });
                results.push(*r);
            }
        };
        for v in [Variant::Hbm, Variant::Zerocopy] {
            if c.o.runs(v) {
                let memory = match v {
                    Variant::Hbm => "GPU memory (cuMemAlloc)",
                    _ => "pinned host memory mapped into the GPU (zero-copy over PCIe)",
                };
                step(Step::Starting(v, String::new()));
                let r = plain_variant(c, b, v, memory.into())
                    .unwrap_or_else(|e| VariantResult::failed(v, memory.into(), &e));
                step(Step::Done(Box::new(r)));
            }
        }
        let hit: Vec<Variant> = [
            Variant::BamHit,
            Variant::BamPinHit,
            Variant::BamHitUnbounded,
        ]
        .into_iter()
        .filter(|&v| c.o.runs(v))
        .collect();
        if !hit.is_empty() {
            ported_variants(c, b, false, &hit, &mut step);
        }
        if c.o.runs(Variant::BamQuarter) {
            ported_variants(c, b, true, &[Variant::BamQuarter], &mut step);
        }
        let uvm: Vec<Variant> = [Variant::Uvm2x, Variant::Uvm4x]
            .into_iter()
            .filter(|&v| c.o.runs(v))
            .collect();
        if !uvm.is_empty() {
            uvm_variants(c, b, &uvm, &mut step);
        }
    }
    KernelReport {
        kernel: k,
        about: k.about().into(),
        storage,
        storage_bytes,
        work_unit: b.work_unit().into(),
        work: b.full_work(),
        variants: results,
    }
}

/// Runs the suite on `gpu`; the ported variants use `device` (`sim` for the simulated
/// array, whose media the suite places in GPU or host memory per variant). `commit` goes
/// into the report. `progress` hears about every step. Setup failures (the kernels, the
/// inputs) are errors; a variant that fails is reported with its error and the suite goes
/// on.
pub fn run_suite(
    gpu: &Arc<Gpu>,
    o: &SuiteOptions,
    device: &GpuDevice,
    commit: Option<String>,
    progress: &mut dyn FnMut(SuiteEvent<'_>),
) -> Result<SuiteReport> {
    o.validate()?;
    // Loaded now, before any simulated array starts (see bam::Module).
    let m = crate::suite_kernels(gpu)?;
    gpu.bind()?;
    let (_, total) = cudarc::driver::result::mem_get_info()?;
    for &k in &o.kernels {
        let need = o.peak_gpu_bytes(k);
        if need + (1 << 30) > total as u64 {
            return Err(Error::InvalidArgument(format!(
                "scale {}: {k} needs about {:.1} GiB of GPU memory at its peak (its data, a copy, the \
                 simulated media and the cache), the GPU has {:.1} GiB; use a smaller scale",
                o.scale,
                need as f64 / (1u64 << 30) as f64,
                total as f64 / (1u64 << 30) as f64
            )));
        }
    }
    let c = Ctx {
        gpu,
        m: &m,
        stream: gpu.stream()?,
        o,
        device,
    };
    let info = DeviceBuffer::zeroed(gpu, 4)?;
    let mut a = [KArg::U64(info.ptr())];
    // SAFETY: suite_info(uint32_t*) writes one word of `info`, which outlives the wait.
    unsafe { c.helper("suite_info", &mut a)? };
    c.wait()?;
    let mut flag = [0u32];
    info.read(0, &mut flag)?;
    let sizes = o.sizes();
    let mut kernels = Vec::new();
    for &k in &o.kernels {
        progress(SuiteEvent::Preparing { kernel: k });
        let mut b: Box<dyn Bench> = match k {
            Kernel::Spmv => Box::new(Spmv::new(&c, sizes.rows)?),
            Kernel::Bfs => Box::new(Bfs::new(&c, sizes.rows)?),
            Kernel::Gather => Box::new(Gather::new(&c, sizes.gather_elems, sizes.gather_reads)?),
            Kernel::Histogram => Box::new(Histogram::new(&c, sizes.hist_elems)?),
            Kernel::Rmw => Box::new(Rmw::new(&c, sizes.rmw_elems)?),
        };
        let rep = run_kernel(&c, b.as_mut(), progress);
        progress(SuiteEvent::KernelDone { report: &rep });
        kernels.push(rep);
    }
    Ok(SuiteReport {
        device: gpu.name.clone(),
        sms: gpu.sms,
        backend: device_name(device),
        commit,
        pin_port_uses_read_pinned: flag[0] != 0,
        options: o.clone(),
        sizes,
        kernels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        SuiteOptions::default().validate().unwrap();
    }

    #[test]
    fn validate_names_the_broken_rule() {
        let msg = |f: &dyn Fn(&mut SuiteOptions)| {
            let mut o = SuiteOptions::default();
            f(&mut o);
            match o.validate() {
                Err(Error::InvalidArgument(m)) => m,
                r => panic!("expected InvalidArgument, got {r:?}"),
            }
        };
        assert!(msg(&|o| o.scale = 0.0).contains("scale 0"));
        assert!(msg(&|o| o.scale = f64::NAN).contains("scale"));
        assert!(msg(&|o| o.scale = 17.0).contains("scale 17"));
        assert!(msg(&|o| o.degree = 0).contains("average degree 0"));
        assert!(msg(&|o| o.line_bytes = 1000).contains("line size 1000 B"));
        assert!(msg(&|o| o.line_bytes = 131072).contains("line size"));
        assert!(msg(&|o| o.reps = 0).contains("reps"));
        assert!(msg(&|o| o.kernels.clear()).contains("kernels: the list is empty"));
        assert!(
            msg(&|o| o.kernels = vec![Kernel::Bfs, Kernel::Bfs]).contains("bfs is listed twice")
        );
        assert!(msg(&|o| o.variants = vec![Variant::BamHit]).contains("must include hbm"));
        assert!(
            msg(&|o| o.variants = vec![Variant::Hbm, Variant::Hbm]).contains("hbm is listed twice")
        );
        assert!(msg(&|o| o.budget_s = 0.0).contains("time budget 0 s"));
        assert!(msg(&|o| o.uvm_gather_divisor = 0).contains("divisor"));
        assert!(msg(&|o| o.queues = 0).contains("queues"));
        assert!(msg(&|o| o.sim_sms = 0).contains("SMs"));
    }

    #[test]
    fn names_round_trip() {
        for k in Kernel::ALL {
            assert_eq!(k.name().parse::<Kernel>().unwrap(), k);
        }
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>().unwrap(), v);
        }
        assert!("nope"
            .parse::<Kernel>()
            .unwrap_err()
            .to_string()
            .contains("spmv, bfs"));
        assert!("uvm"
            .parse::<Variant>()
            .unwrap_err()
            .to_string()
            .contains("uvm-2x"));
        assert_eq!(Variant::BamPinHit.form(), Form::Pin);
        assert_eq!(Variant::BamQuarter.form(), Form::Bam);
        assert_eq!(Variant::Uvm4x.form(), Form::Plain);
        assert_eq!(Kernel::Histogram.symbol(), "hist");
    }

    #[test]
    fn sizes_scale_and_stay_whole() {
        let s = SuiteOptions::default().sizes();
        assert_eq!(s.rows, 8 << 20);
        assert_eq!(s.gather_elems * 8, 1 << 30);
        assert_eq!(s.gather_reads, s.gather_elems / 8);
        assert_eq!(s.hist_elems * 4, 1 << 30);
        assert_eq!(s.rmw_elems * 8, 512 << 20);
        let o = SuiteOptions {
            scale: SCALE_RANGE.0,
            ..Default::default()
        };
        o.validate().unwrap();
        let s = o.sizes();
        assert_eq!(s.rows, 8192);
        assert!(s.hist_elems.is_multiple_of(1024) && s.hist_elems > 0);
        // The default suite fits an 80 GB GPU with room to spare.
        for k in Kernel::ALL {
            assert!(SuiteOptions::default().peak_gpu_bytes(k) < 8 << 30, "{k}");
        }
    }

    #[test]
    fn host_spmv_replays_the_warp() {
        // 40 nonzeros: lanes 0..8 take two, the others one.
        let x: Vec<f32> = (0..50).map(|i| 0.5 + i as f32 / 64.0).collect();
        let cols: Vec<u32> = (0..40).map(|j| (j * 7 % 50) as u32).collect();
        let vals: Vec<f32> = (0..40).map(|j| 1.0 + j as f32 / 3.0).collect();
        let mut lane = [0f32; 32];
        for k in 0..40 {
            lane[k % 32] = vals[k].mul_add(x[cols[k] as usize], lane[k % 32]);
        }
        // The tree, written out: lane 0 ends with ((l0 + l16) + (l8 + l24)) + ...
        let mut t = lane;
        for off in [16, 8, 4, 2, 1] {
            let prev = t;
            for l in 0..32 {
                if l + off < 32 {
                    t[l] = prev[l] + prev[l + off];
                }
            }
        }
        assert_eq!(warp_row_sum(&cols, &vals, &x).to_bits(), t[0].to_bits());
        assert_eq!(warp_row_sum(&[], &[], &x), 0.0);
        let exact: f64 = (0..40)
            .map(|k| vals[k] as f64 * x[cols[k] as usize] as f64)
            .sum();
        assert!((warp_row_sum(&cols, &vals, &x) as f64 - exact).abs() < 1e-3);
    }

    #[test]
    fn summaries_use_the_median_and_rates_of_cut_runs() {
        let r = |ms: f64, work: u64, complete: bool| Run { ms, work, complete };
        let (med, min, work, complete, rate) =
            summarize(&[r(3.0, 100, true), r(1.0, 100, true), r(2.0, 100, true)]);
        assert_eq!((med, min, work, complete), (2.0, 1.0, 100, true));
        assert!((rate - 100.0 / 2e-3).abs() < 1e-6);
        // Lower median of an even count.
        assert_eq!(summarize(&[r(4.0, 1, true), r(2.0, 1, true)]).0, 2.0);
        // A cut run: the median of the runs' rates.
        let (_, _, _, complete, rate) = summarize(&[r(1.0, 100, true), r(1.0, 50, false)]);
        assert!(!complete);
        assert!((rate - 50.0 / 1e-3).abs() < 1e-6);
    }
}
