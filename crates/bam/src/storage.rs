//! What every storage backend offers besides its [`IoArray`]: device-side counters,
//! fault injection and access to the medium for verification. Tests, benchmarks and the
//! `bam` command use a backend through this trait, so that the same test runs on the
//! simulated array, on the host-side controller and on real SSDs.

use crate::error::{Error, Result};
use crate::io::IoArray;
use serde::Serialize;

/// Counters of one SSD, as its controller counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SsdCounters {
    /// Read commands.
    pub reads: u64,
    /// Write commands.
    pub writes: u64,
    /// Other commands (flush).
    pub others: u64,
    /// Bytes read from the medium.
    pub read_bytes: u64,
    /// Bytes written to the medium.
    pub write_bytes: u64,
    /// Commands completed with an error status.
    pub errors: u64,
    /// Invalid doorbell values seen.
    pub bad_doorbells: u64,
}

/// Cumulative profile of the simulated controller kernel's warp 0, published every 64
/// iterations (zero for the other backends: [`Storage::profile`]).
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

/// A storage backend: SSDs (simulated, modelled on the CPU, or real) attached to the GPU
/// I/O layer.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use bam::storage::Storage;
/// let gpu = bam::Gpu::new(0)?;
/// let arr = bam::SimArray::new(&gpu, bam::SimConfig::new(bam::DriveProfile::ideal()))?;
/// let backend: &dyn Storage = &arr;
/// println!("{}: {:?}", backend.describe(), backend.counters()?);
/// # Ok(()) }
/// ```
pub trait Storage: Send + Sync {
    /// The GPU I/O layer (queues, buffers) over the SSDs: the first GPU's.
    fn io(&self) -> &IoArray {
        &self.ios()[0]
    }

    /// One I/O layer per GPU the SSDs serve (at least one), in the order the GPUs were
    /// given: each has its own queue pairs on every controller (docs/multi-gpu.md).
    fn ios(&self) -> &[IoArray];

    /// The backend as a user names it, e.g. `sim:ideal,ssds=8`.
    fn describe(&self) -> String;

    /// Commands and bytes per SSD as the controllers counted them.
    fn counters(&self) -> Result<Vec<SsdCounters>>;

    /// Fault injection: a stalled device stops serving its queues (commands stay
    /// outstanding until it is resumed). Real SSDs cannot be stalled.
    fn set_stall(&self, stall: bool) -> Result<()> {
        let _ = stall;
        Err(Error::InvalidArgument(format!(
            "{} cannot be stalled (fault injection needs a simulated or modelled device)",
            self.describe()
        )))
    }

    /// Reads SSD `ssd`'s medium at byte `off`, behind the controllers' back (tests check
    /// what reached the medium). Real SSDs have no such path.
    fn read_medium(&self, ssd: usize, off: u64, out: &mut [u8]) -> Result<()> {
        let _ = (ssd, off, out);
        Err(Error::InvalidArgument(format!(
            "{}: the medium can only be read through the controller",
            self.describe()
        )))
    }

    /// Profile of the simulated controller kernel (zero for other backends).
    fn profile(&self) -> Result<SimProfile> {
        Ok(SimProfile::default())
    }

    /// The backend itself, to reach what only its own type offers
    /// (`bam::SimArray::of` for the simulated array's media).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// `,gpus=0,1` for a backend attached to several GPUs (empty for one), for
/// [`Storage::describe`].
pub fn gpus_suffix(ios: &[IoArray]) -> String {
    if ios.len() < 2 {
        return String::new();
    }
    let v: Vec<String> = ios.iter().map(|i| i.gpu().ordinal().to_string()).collect();
    format!(",gpus={}", v.join(","))
}
