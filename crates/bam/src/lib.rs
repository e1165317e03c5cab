//! GPU runtime of the BaM-style NVMe library.
//!
//! * [`gpu`]: the CUDA driver through cudarc (dynamic loading), GPU memory, mapped host
//!   memory, the kernels compiled from `crates/bam/cuda/src` and embedded in the crate.
//! * [`io`]: the GPU I/O layer, [`IoArray`]: queue pairs, I/O buffers, PRP lists and
//!   IOVA tables in GPU memory over any set of controllers. The cache, `Array<T>` and
//!   the benchmark take it.
//! * Backends that build an [`IoArray`] (all implement [`storage::Storage`]):
//!   [`sim`] (the simulated SSD array on the GPU), [`hostctl`] (the controller model on
//!   CPU threads serving GPU-resident queues across PCIe), [`kmod`] (real SSDs bound to
//!   the bam kernel module).
//! * [`cache`]: the software cache in GPU memory and `Array<T>` over any [`IoArray`].
//! * [`scan`]: sequential scans of large spans of the array by GPU blocks, chunk by
//!   chunk with read-ahead, without the cache (`bam::scan_reader` on the device).
//! * [`module`]: CUDA modules (the runtime's and users' fatbins), kernels resolved at load.
//! * [`device`]: the GPU device strings (`sim:`, `hostctl:`, `kmod:`).
//! * [`abi`]: the `#[repr(C)]` structs shared with `crates/bam/cuda/include/bam/abi.h`.
//!
//! This crate ships the runtime only: the GPU test suites live in `crates/bam-tests`, the
//! benchmark engines behind `bam bench` in `crates/bam-bench`.

// The ABI macro (`abi_struct!`) names `bam::abi::bytemuck` for its derives, here too.
extern crate self as bam;

pub mod abi;
pub mod cache;
pub mod device;
pub mod error;
pub mod gpu;
pub mod gpu_info;
pub mod hostctl;
pub mod io;
pub mod kmod;
mod media_file;
pub mod module;
pub mod pattern;
pub mod presets;
pub mod scan;
pub mod sim;
pub mod storage;

pub use error::{Error, IoError, IoErrorKind, Result};
pub use gpu::{gpu_available, Gpu};
pub use io::IoArray;
pub use module::{Function, KernelArg, KernelArgs, KernelParam, Module};
pub use presets::DriveProfile;
pub use sim::{Fault, Lie, Media, SimArray, SimConfig};
pub use storage::Storage;
