//! The kernel suite (`bam bench kernels`): nine kernels, each written once as a template
//! over its array types (`cuda/suite.cu`) and run over plain memory and, ported by
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
//! | histogram-atomic | a\[i\] % nbins bins, an atomic add per element | a (u32), bins (u64) | |
//! | rmw | a\[i\] = 3 a\[i\] + 1 | a (u64) | |
//! | pagerank | a PageRank pull iteration, a thread per vertex | rowptr (u64), col (u32) | ranks |
//! | hash-count | group-by count, linear probing: CAS claims, atomic adds | keys (u32), table (u64) | |
//! | embedding-bag | sums of 32 random 512-byte rows, a warp per bag | table (f32) | indices, sums |
//!
//! The last three were written as plain CUDA first and ported by the porting guide's type
//! swap, nothing tuned for the cache: pagerank walks rows of power-law lengths a thread
//! each, hash-count's stores go where its reads say, embedding-bag reads random rows a
//! warp each.
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
//! * `bam-hit-unbounded`, `bam-hit-counting`: `bam-hit` without launch bounds, and with
//!   views that count accesses and hits.
//! * `bam-hit-8`: `bam-hit` with the kernel under `__launch_bounds__(256, 8)` instead of
//!   `(256, 6)`: 32 registers, as many warps as the plain kernels.
//! * `bam-resident`, `bam-resident-8`: `bam-hit`'s and `bam-hit-8`'s kernels in the same
//!   cache, its arrays dropped and made resident (`Array::make_resident`: every line read
//!   into one run of slots where the cache has room, else wherever it lands, and pinned):
//!   the same kernel code, reads of one plain load (two through the slot table).
//! * `bam-default`: `bam-hit`'s kernel and cache with the views `Array::view` gives under
//!   the default `CacheConfig`: the arrays that fit in the cache's share for it resident
//!   (made so by their first view), the others ordinary. What a port gets without asking.
//! * `bam-quarter`: the ported kernel, a cache of a quarter of the data's lines, simulated
//!   media in pinned host memory (misses cross PCIe); `bam-quarter-8` the same with
//!   `bam-hit-8`'s kernel, in the same cache.
//! * `uvm-2x`, `uvm-4x`: the plain kernel, storage arrays in managed memory, with GPU memory
//!   taken by a balloon allocation so that the data is 2x / 4x what is left.
//!
//! Every variant runs once untimed (warm-up), waits until the GPU's memory bandwidth is
//! back after earlier frees (`settle`), then `reps` timed runs (CUDA events around
//! the run's launches; BFS includes its host loop over levels). `bam-quarter` and the UVM
//! variants have a time budget: when their warm-up is slow, their runs are split into
//! launches and stop when the budget is spent (the result then says how much of a run
//! was done, and its rate is work per second of what was done). Each variant's outputs
//! are verified against the `hbm` run (and the `hbm` run against independent checks), and
//! every result carries its wrong count.
//!
//! The code, a file per job: `options` (what to run), `report` (what it found),
//! `exec` (launching and timing), `data` (inputs and the copies the variants place),
//! `bench` (what every kernel is to the runners), a file per kernel (`spmv`, `bfs`,
//! `gather`, `histogram`, `histogram_atomic`, `rmw`, `pagerank`, `hash_count`,
//! `embedding_bag`), `measure` (one variant's runs and checks), `settle`
//! (the wait for a quiet GPU before timed runs), and the variant runners (`variants`,
//! `ported`, `uvm`).

mod bench;
mod bfs;
mod data;
mod embedding_bag;
mod exec;
mod gather;
mod hash_count;
mod histogram;
mod histogram_atomic;
mod measure;
mod options;
mod pagerank;
mod ported;
mod report;
mod rmw;
mod settle;
mod spmv;
mod uvm;
mod variants;

pub use options::{CacheProfile, Form, Kernel, Sizes, SuiteOptions, Variant, SCALE_RANGE};
pub use report::{
    ArrayInfo, CacheInfo, KernelReport, Settled, SuiteEvent, SuiteReport, UvmInfo, VariantResult,
};
pub use spmv::warp_row_sum;
pub use uvm::UVM_DRIVER_MARGIN;

use bam::cuda::{DeviceBuffer, Gpu};
use bam::storage::GpuDevice;
use bam::{Error, Result};
use bench::Bench;
use bfs::Bfs;
use embedding_bag::EmbeddingBag;
use exec::{Ctx, KArg};
use gather::Gather;
use hash_count::HashCount;
use histogram::Histogram;
use histogram_atomic::HistogramAtomic;
use pagerank::Pagerank;
use rmw::Rmw;
use settle::Settle;
use spmv::Spmv;
use std::sync::Arc;

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
    let stream = gpu.stream()?;
    let settle = Settle::new(gpu, &m, &stream)?;
    let c = Ctx {
        gpu,
        m: &m,
        stream,
        o,
        device,
        settle: &settle,
    };
    let info = DeviceBuffer::zeroed(gpu, 4)?;
    let a = [KArg::U64(info.ptr())];
    // SAFETY: suite_info(uint32_t*) writes one word of `info`, which outlives the wait.
    unsafe { c.helper("suite_info", &a)? };
    c.wait()?;
    let mut flag = [0u32];
    info.read(0, &mut flag)?;
    let sizes = o.sizes();
    let mut kernels = Vec::new();
    for &k in &o.kernels {
        progress(SuiteEvent::Preparing { kernel: k });
        let mut b = prepare(&c, k, &sizes)?;
        let rep = variants::run_kernel(&c, b.as_mut(), progress);
        progress(SuiteEvent::KernelDone { report: &rep });
        kernels.push(rep);
    }
    Ok(SuiteReport {
        device: gpu.name.clone(),
        sms: gpu.sms,
        backend: device.to_string(),
        commit,
        pin_port_uses_read_pinned: flag[0] != 0,
        options: o.clone(),
        sizes,
        kernels,
    })
}

/// Generates kernel `k`'s inputs at the sizes `s`.
fn prepare(c: &Ctx, k: Kernel, s: &Sizes) -> Result<Box<dyn Bench>> {
    Ok(match k {
        Kernel::Spmv => Box::new(Spmv::new(c, s.rows)?),
        Kernel::Bfs => Box::new(Bfs::new(c, s.rows)?),
        Kernel::Gather => Box::new(Gather::new(c, s.gather_elems, s.gather_reads)?),
        Kernel::Histogram => Box::new(Histogram::new(c, s.hist_elems)?),
        Kernel::HistogramAtomic => Box::new(HistogramAtomic::new(c, s.ahist_elems, s.ahist_bins)?),
        Kernel::Rmw => Box::new(Rmw::new(c, s.rmw_elems)?),
        Kernel::Pagerank => Box::new(Pagerank::new(c, s.rows)?),
        Kernel::HashCount => Box::new(HashCount::new(
            c,
            s.hcount_elems,
            s.hcount_keys,
            s.hcount_slots(),
        )?),
        Kernel::EmbeddingBag => Box::new(EmbeddingBag::new(c, s.emb_rows, s.emb_bags)?),
    })
}
