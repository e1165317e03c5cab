//! Benchmark engines of the bam runtime, behind `bam bench` and `bam bench cache`:
//!
//! * [`raw`]: fio-style random/sequential reads and writes from GPU threads through the
//!   GPU I/O layer of any backend, and the raw-memory baselines it is compared with.
//! * [`cache_study`]: the software cache's hit and miss bandwidth against raw reads of the
//!   same pattern, and the latency of one miss.
//!
//! Their kernels (`cuda/bench.cu`) are this crate's own fatbin, not the runtime's: load
//! them with [`kernels`] before starting a simulated array (see `bam::Module`).

pub mod cache_study;
pub mod raw;

use bam::{Gpu, Module, Result};
use std::sync::Arc;

static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bench.fatbin"));

/// The benchmark kernels on `gpu` (loaded once per GPU, before any simulated array starts:
/// see `bam::Module`).
pub fn kernels(gpu: &Arc<Gpu>) -> Result<Arc<Module>> {
    gpu.module(FATBIN)
}
