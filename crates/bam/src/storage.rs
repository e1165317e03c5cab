//! What every storage backend offers besides its [`IoArray`]: device-side counters,
//! fault injection and access to the medium for verification. Tests, benchmarks and the
//! `bam` command use a backend through this trait, so that the same test runs on the
//! simulated array, on the host-side controller and on real SSDs.

use crate::error::{Error, Result};
use crate::io::IoArray;
use crate::sim::SimProfile;
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

/// A storage backend: SSDs (simulated, modelled on the CPU, or real) attached to the GPU
/// I/O layer.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use bam::storage::Storage;
/// let gpu = bam::Gpu::new(0)?;
/// let arr = bam::SimArray::new(&gpu, bam::SimConfig::new(bam::DeviceModel::ideal()))?;
/// let backend: &dyn Storage = &arr;
/// println!("{}: {:?}", backend.describe(), backend.counters()?);
/// # Ok(()) }
/// ```
pub trait Storage: Send + Sync {
    /// The GPU I/O layer (queues, buffers) over the SSDs.
    fn io(&self) -> &IoArray;

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

    /// The simulated array, when this is one (its media, for baselines).
    fn as_sim(&self) -> Option<&crate::sim::SimArray> {
        None
    }
}

impl Storage for crate::sim::SimArray {
    fn io(&self) -> &IoArray {
        crate::sim::SimArray::io(self)
    }
    fn describe(&self) -> String {
        let c = self.config();
        format!("sim:{},ssds={}", c.model.name, c.ssds)
    }
    fn counters(&self) -> Result<Vec<SsdCounters>> {
        crate::sim::SimArray::counters(self)
    }
    fn set_stall(&self, stall: bool) -> Result<()> {
        crate::sim::SimArray::set_stall(self, stall)
    }
    fn read_medium(&self, ssd: usize, off: u64, out: &mut [u8]) -> Result<()> {
        crate::sim::SimArray::read_medium(self, ssd, off, out)
    }
    fn profile(&self) -> Result<SimProfile> {
        crate::sim::SimArray::profile(self)
    }
    fn as_sim(&self) -> Option<&crate::sim::SimArray> {
        Some(self)
    }
}
