//! What a simulated array is made of: its drives, their media, the controller kernel's
//! SMs and the GPU I/O layer over them.

use super::DriveProfile;
use crate::io::IoConfig;
use crate::storage::Fault;
use serde::Serialize;
use std::path::PathBuf;

/// Where the simulated SSDs keep their data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Media {
    /// GPU memory: measures the I/O software stack alone.
    Hbm,
    /// Pinned host memory: data crosses PCIe as SSD data would.
    Host,
    /// A file mapped into host memory (one file per SSD: `PATH.N` when N > 1 SSDs). It
    /// must live on tmpfs or hugetlbfs (e.g. /dev/shm): recent Linux refuses writable
    /// long-term pins (the GPU's) of files on file systems that track dirty pages.
    File(PathBuf),
}

/// Configuration of a simulated array: its SSDs and the GPU I/O layer over them.
///
/// ```
/// use bam::storage::sim::{DriveProfile, Media, SimConfig};
/// let c = SimConfig {
///     ssds: 4,
///     media: Media::Host,
///     ..SimConfig::new(DriveProfile::ideal())
/// };
/// assert_eq!(c.io.queues, 1);
/// ```
#[derive(Clone, Debug, Serialize)]
pub struct SimConfig {
    /// Drive profile of every SSD.
    pub model: DriveProfile,
    /// Number of SSDs.
    pub ssds: u32,
    /// Medium.
    pub media: Media,
    /// Capacity of each SSD in bytes.
    pub capacity_bytes: u64,
    /// SMs reserved for the simulated controllers.
    pub sim_sms: u32,
    /// The GPU I/O layer: queues per SSD, depth, buffer slots, timeout (its
    /// `queue_scratch_bytes` is the simulator's to set).
    pub io: IoConfig,
    /// Fault injection.
    pub fault: Option<Fault>,
    /// Fill the media with the verification pattern (generation 0) when the array is
    /// built (off by default: it writes the whole capacity; tests that read data nobody
    /// wrote ask for it).
    pub fill_pattern: bool,
}

impl SimConfig {
    /// Defaults: one SSD of 1 GiB in GPU memory, 16 controller SMs, the default I/O
    /// layer ([`IoConfig::new`]), fresh media not filled with the pattern.
    pub fn new(model: DriveProfile) -> Self {
        SimConfig {
            model,
            ssds: 1,
            media: Media::Hbm,
            capacity_bytes: 1 << 30,
            sim_sms: 16,
            io: IoConfig::new(),
            fault: None,
            fill_pattern: false,
        }
    }
}
