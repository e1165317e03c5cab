//! # bam-nvme
//!
//! The NVMe layer of BaM: specification types, PRP construction, queue rings, controller
//! bring-up and admin commands, CPU I/O queue pairs, the transports that reach a
//! controller (VFIO, the bam kernel module, the in-process controller model), and a
//! strict controller model to test against.
//!
//! ```
//! use bam_nvme::{model::ModelConfig, Controller, ControllerOptions};
//!
//! // A 64 MiB controller model in RAM, brought up through the same code as real hardware.
//! let transport = ModelConfig::ram(64 << 20).build_transport()?;
//! let ctrl = Controller::new(transport, ControllerOptions::default())?;
//! let ns = ctrl.namespace(1)?;
//! let mut qp = ctrl.create_io_queue_pair(64)?;
//! qp.write_from(&ns, 0, &vec![0xAB; 4096])?;
//! let mut back = vec![0; 4096];
//! qp.read_into(&ns, 0, &mut back)?;
//! assert!(back.iter().all(|&b| b == 0xAB));
//! # Ok::<(), bam_nvme::Error>(())
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod catalog;
pub mod controller;
pub mod device;
pub mod error;
pub mod io;
pub mod model;
pub mod pci;
pub mod prp;
pub mod queue;
pub mod spec;
/// Case counts of the in-source property tests: the integration tests' file, so that
/// `BAM_FUZZ_SCALE` and `PROPTEST_CASES` mean the same everywhere.
#[cfg(test)]
#[path = "../tests/support/cases.rs"]
mod test_cases;
pub mod transport;

pub use controller::{Controller, ControllerOptions, Namespace, RawQueuePair};
pub use error::{Error, Result};
pub use io::IoQueuePair;
pub use transport::{DmaBuffer, Transport};
