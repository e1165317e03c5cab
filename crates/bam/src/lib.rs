//! GPU runtime of the BaM-style NVMe library.
//!
//! * [`gpu`]: the CUDA driver through cudarc (dynamic loading), GPU memory, mapped host
//!   memory, the kernels compiled from `cuda/src` and embedded in the crate.
//! * [`io`]: the GPU I/O layer, [`IoArray`]: queue pairs, I/O buffers, PRP lists and
//!   IOVA tables in GPU memory over any set of controllers. The cache, `Array<T>` and
//!   the benchmark take it.
//! * Backends that build an [`IoArray`] (all implement [`storage::Storage`]):
//!   [`sim`] (the simulated SSD array on the GPU), [`hostctl`] (the controller model on
//!   CPU threads serving GPU-resident queues across PCIe), [`kmod`] (real SSDs bound to
//!   the bam kernel module).
//! * [`bench`]: the raw I/O benchmark behind `bam bench`, and its baselines.
//! * [`abi`]: the `#[repr(C)]` structs shared with `cuda/include/bam/abi.h`.
//! * [`selftest`]: the GPU test suite (run on a machine with a GPU).

pub mod abi;
pub mod bench;
pub mod cache;
pub mod device;
pub mod error;
pub mod gpu;
pub mod gpu_info;
pub mod hostctl;
pub mod io;
pub mod kmod;
pub mod pattern;
pub mod presets;
pub mod selftest;
pub mod sim;
pub mod storage;

pub use error::{Error, IoError, IoErrorKind, Result};
pub use gpu::{gpu_available, Gpu};
pub use io::IoArray;
pub use presets::DeviceModel;
pub use sim::{Fault, Media, SimArray, SimConfig};
pub use storage::Storage;
