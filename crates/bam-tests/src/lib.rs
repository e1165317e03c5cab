//! The GPU test suites of the bam runtime, run as named trials by `cargo test -p
//! bam-tests` (`<backend> <case>`, [`harness`]; without a GPU they are ignored and say
//! SKIPPED) and by `bam-gpu-tests`, `bam-cache-tests` and `bam-multi-gpu-tests`:
//!
//! * [`backend`]: what the suites share: the backends ([`TestBackend`]), outcomes, the GPU;
//! * [`case`]: the case table every single-GPU suite gives (name, what a backend lacks,
//!   the function), run by the trials and the runners alike;
//! * [`io_suite`]: verified I/O through the GPU I/O layer under concurrency, error
//!   statuses, timeouts, a strict controller's validation;
//! * [`scan_suite`]: scans (bam::scan) written and read back chunk by chunk, failing
//!   reads, refused launches (run within the I/O suite);
//! * [`cache_suite`]: the cache's torture with eviction storms checked byte for byte, the
//!   element-type matrix with partial warps, bounded waits, injected errors, a stall (one
//!   file a behaviour);
//! * [`cache_races`]: races in the cache (a given-up fill ticket, a generation wrap,
//!   resident stores during a flush), played (run within the cache suite);
//! * [`multi_gpu_suite`]: several GPUs on shared controllers: queue ids, verified I/O and
//!   the cache torture on all GPUs at once, the write rule (`bam-multi-gpu-tests`);
//! * [`file_check`]: the file backend's CPU service driven from the CPU alone (no GPU:
//!   `tests/file_service.rs`, `bam-file-check` in the QEMU guest);
//!
//! each on the simulated array, the host-side controller and files ([`TestBackend`]).

pub mod backend;
pub mod bulk;
mod cache_kernels;
pub mod cache_races;
pub mod cache_suite;
pub mod case;
pub mod error_logs;
pub mod file_check;
pub mod harness;
pub mod io_suite;
pub mod lies;
pub mod multi_gpu_suite;
pub mod recovery;
pub mod scan_suite;

pub use backend::{open_test_gpu, Outcome, TestBackend};

use bam::{Gpu, Module, Result};
use std::sync::Arc;

static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tests.fatbin"));

/// The test kernels on `gpu` (loaded once per GPU, before any simulated array starts:
/// see `bam::Module`).
pub fn kernels(gpu: &Arc<Gpu>) -> Result<Arc<Module>> {
    gpu.module(FATBIN)
}
