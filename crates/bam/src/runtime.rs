//! The runtime's own kernels, compiled by build.rs from `crates/bam/cuda/src` and
//! embedded in the crate. Every `Gpu` loads them when it opens: a module load
//! later could wait forever for a persistent kernel. Each image belongs to one part of the
//! crate, which finds its module with `Gpu::module`.

/// The simulated SSD controllers (`storage::sim`).
pub(crate) static SIMULATOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sim.fatbin"));
/// The cache's service kernels: flush, bulk load and read of arrays (`cache`).
pub(crate) static CACHE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cache.fatbin"));
/// Bulk writes onto spans (`scan`).
pub(crate) static SCAN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/scan.fatbin"));
/// The verification pattern's fill (`pattern`).
pub(crate) static PATTERN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pattern.fatbin"));

/// The file backend's forwarder (`storage::file`).
pub(crate) static FILE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/file.fatbin"));

/// Every image, in the order a GPU loads them.
pub(crate) fn images() -> [&'static [u8]; 5] {
    [SIMULATOR, CACHE, SCAN, PATTERN, FILE]
}
