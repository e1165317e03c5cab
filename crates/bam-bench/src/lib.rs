//! Benchmark engines of the bam runtime, behind `bam bench` and `bam bench cache`:
//!
//! * [`raw`]: fio-style random/sequential reads and writes from GPU threads through the
//!   GPU I/O layer of any backend, and the raw-memory baselines it is compared with.
//! * [`cache_study`]: the software cache's hit and miss bandwidth against raw reads of the
//!   same pattern, and the latency of one miss.
//! * [`multi_gpu`]: raw jobs and a ported kernel (gather through `bam::array<u64>`) on
//!   several GPUs sharing the SSDs, against one GPU in the same run (`bam bench --gpus`).
//! * [`suite`]: a suite of kernels written once over their array type, run over plain
//!   memory (GPU, zero-copy host, UVM) and ported to `bam::array<T>` (`bam bench kernels`).
//! * [`abi`]: the `#[repr(C)]` twins of `cuda/bench_abi.h`, the benchmark kernels' structs.
//!
//! Their kernels (`cuda/bench.cu`, `cuda/suite.cu`) are this crate's own fatbins, not the
//! runtime's: load them with [`kernels`] / [`suite_kernels`] before starting a simulated
//! array (see `bam::Module`).

pub mod abi;
pub mod cache_study;
pub mod multi_gpu;
pub mod raw;
pub mod suite;

use bam::{Gpu, Module, Result};
use std::sync::Arc;

static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bench.fatbin"));
static SUITE_FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/suite.fatbin"));

/// The benchmark kernels on `gpu` (loaded once per GPU, before any simulated array starts:
/// see `bam::Module`).
pub fn kernels(gpu: &Arc<Gpu>) -> Result<Arc<Module>> {
    gpu.module(FATBIN)
}

/// The kernel suite's kernels on `gpu` (`cuda/suite.cu`; loaded once per GPU, before any
/// simulated array starts).
pub fn suite_kernels(gpu: &Arc<Gpu>) -> Result<Arc<Module>> {
    gpu.module(SUITE_FATBIN)
}
