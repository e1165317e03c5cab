//! GPU runtime of the BaM-style NVMe library.
//!
//! * [`gpu`]: the CUDA driver through cudarc (dynamic loading), GPU memory, mapped host
//!   memory, the kernels compiled from `cuda/src` and embedded in the crate.
//! * [`sim`]: the simulated SSD array — controller models brought up by `bam_nvme`,
//!   I/O queue pairs in GPU memory, and the persistent controller kernel that serves them.
//! * [`bench`]: the raw I/O benchmark behind `bam bench`, and its baselines.
//! * [`abi`]: the `#[repr(C)]` structs shared with `cuda/include/bam/abi.h`.
//! * [`selftest`]: the GPU test suite (run on a machine with a GPU).

pub mod abi;
pub mod bench;
pub mod cache;
pub mod error;
pub mod gpu;
pub mod presets;
pub mod selftest;
pub mod sim;

pub use error::{Error, IoError, IoErrorKind, Result};
pub use gpu::{gpu_available, Gpu};
pub use presets::DeviceModel;
pub use sim::{Fault, Media, SimArray, SimConfig};
