//! Launching the test kernels over a cache and reading their counters, and the simulated
//! array the cache tests build: what the cache suite, the lying-controller tests and the
//! cache races share.

use bam::cache::{ArrayView, Cache, CacheConfig};
use bam::cuda::DeviceBuffer;
use bam::storage::sim::DriveProfile;
use bam::storage::sim::SimConfig;
use bam::{KernelArgs, Result};
use std::time::Duration;

/// Launches test kernel `name` on the cache's stream (1-D grid, no dynamic shared memory).
///
/// # Safety
/// As `bam::Module::launch`: `args` have the kernel's parameter types and what they
/// point to stays valid until the kernel has finished.
pub(crate) unsafe fn launch_test(
    cache: &Cache<'_>,
    name: &str,
    grid: u32,
    block: u32,
    args: &(impl KernelArgs + ?Sized),
) -> Result<()> {
    // SAFETY: forwarded to the caller's contract.
    unsafe { crate::kernels(cache.gpu())?.launch(cache.stream(), name, grid, block, 0, args) }
}

pub(crate) fn counts(b: &DeviceBuffer) -> Result<[u64; 2]> {
    let mut r = [0u64; 2];
    b.read(0, &mut r)?;
    Ok(r)
}

/// Reads every element of `view` with `grid` blocks of 256 threads (`bam_cache_check_u32`,
/// the pattern of SSD 0 from word `word0`); returns (failed reads, wrong values).
pub(crate) fn check_all(
    cache: &Cache<'_>,
    view: ArrayView,
    word0: u64,
    grid: u32,
    res: &DeviceBuffer,
) -> Result<[u64; 2]> {
    res.write(0, &[0u64, 0])?;
    let args: (ArrayView, u32, u64, u64) = (view, 0, word0, res.ptr());
    // SAFETY: matches bam_cache_check_u32(bam_array_view, uint32_t, uint64_t, unsigned long
    // long*); `res` outlives cache.sync().
    unsafe { launch_test(cache, "bam_cache_check_u32", grid, 256, &args)? };
    cache.sync()?;
    counts(res)
}

/// The simulated array of a cache test: `ssds` ideal SSDs of `capacity` bytes, 32 queues
/// of 1024 entries each, I/O slots for `cfg`, every wait bounded by `timeout`.
/// `CacheConfig::new(line, slots)` with no array made resident by its view: the suites
/// test ordinary views' protocol (misses, evictions, errors on the access that meets
/// them); `auto_resident` tests the default, where `Array::view` makes arrays that fit
/// resident.
pub(crate) fn protocol_config(line: u32, slots: u32) -> CacheConfig {
    CacheConfig {
        auto_resident_percent: 0,
        ..CacheConfig::new(line, slots)
    }
}

pub(crate) fn sim(ssds: u32, cfg: &CacheConfig, capacity: u64, timeout: Duration) -> SimConfig {
    let mut c = crate::backend::sim_for_cache(DriveProfile::ideal(), cfg);
    c.ssds = ssds;
    c.io.queues = 32;
    c.io.depth = 1024;
    c.capacity_bytes = capacity;
    c.io.timeout = timeout;
    c
}
