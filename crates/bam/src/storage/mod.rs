//! Storage backends: the only part of the crate that knows which backends exist. Each
//! brings up controllers and attaches them to the GPU I/O layer ([`IoArray`]):
//!
//! * [`sim`]: the simulated SSD array on the GPU (controller models for admin, a
//!   persistent GPU kernel serving the queues);
//! * [`hostctl`]: the strict controller model on CPU threads, serving GPU-resident queues
//!   across PCIe (verification);
//! * [`file`]: files and block devices, the GPU's commands executed by CPU threads
//!   through io_uring (any Linux GPU machine);
//! * [`kmod`]: real controllers bound to the bam kernel module.
//!
//! [`GpuDevice`] parses a device string, prints it and opens the backend it names;
//! [`Storage`] is their common face, so that the same test or benchmark runs on every
//! backend; [`Backend`] gives typed access to what one backend alone offers.

pub mod device;
mod fault;
pub mod file;
pub mod hostctl;
mod idle;
pub mod kmod;
pub mod sim;

pub use device::{parse_gpus, parse_size, GpuDevice};
pub use fault::{Fault, Lie};

use crate::error::{Error, Result};
use crate::io::IoArray;
use file::FileArray;
use hostctl::HostCtlArray;
use kmod::KmodArray;
use serde::Serialize;
use sim::SimArray;

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

/// One backend, for what only it offers (a simulated array's fault injection, profile
/// and media, for example).
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use bam::storage::{Backend, GpuDevice, Storage};
/// let gpu = bam::Gpu::new(0)?;
/// let storage = "sim:ideal".parse::<GpuDevice>()?.open(&gpu, &bam::io::IoConfig::new())?;
/// if let Backend::Sim(sim) = storage.backend() {
///     println!("controller loops so far: {}", sim.profile()?.loops);
/// }
/// # Ok(()) }
/// ```
pub enum Backend<'a> {
    /// The simulated SSD array.
    Sim(&'a SimArray),
    /// Controller models on CPU threads.
    HostCtl(&'a HostCtlArray),
    /// Files and block devices through io_uring.
    File(&'a FileArray),
    /// Real controllers bound to the kernel module.
    Kmod(&'a KmodArray),
}

/// A storage backend: SSDs (simulated, modelled on the CPU, or real) attached to the GPU
/// I/O layer.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use bam::storage::{GpuDevice, Storage};
/// let gpu = bam::Gpu::new(0)?;
/// let device: GpuDevice = "sim:ideal,ssds=2".parse()?;
/// let storage: Box<dyn Storage> = device.open(&gpu, &bam::io::IoConfig::new())?;
/// println!("{}: {:?}", storage.describe(), storage.counters()?);
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

    /// The device string that names this backend (what [`GpuDevice::open`] would build
    /// again; a fault injected through a backend's own configuration is not part of it).
    fn device(&self) -> GpuDevice;

    /// The backend as a user names it, with the GPUs it serves when there are several,
    /// e.g. `sim:ideal,ssds=8` or `hostctl:ssds=2,gpus=0,1`.
    fn describe(&self) -> String {
        let ios = self.ios();
        if ios.len() < 2 {
            return self.device().to_string();
        }
        let gpus: Vec<String> = ios.iter().map(|i| i.gpu().ordinal().to_string()).collect();
        format!("{},gpus={}", self.device(), gpus.join(","))
    }

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

    /// The backend itself, for what only it offers.
    fn backend(&self) -> Backend<'_>;
}
