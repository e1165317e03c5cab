//! GPU runtime of the BaM-style NVMe library. The modules are its layers, from the
//! ground up:
//!
//! * [`cuda`]: one GPU's context, its memory, modules and typed launches, the layout
//!   builder of device tables; it knows no storage backend.
//! * [`io`]: the GPU I/O layer, [`IoArray`]: queue pairs, I/O buffers, PRP lists and
//!   IOVA tables in GPU memory over any set of brought-up controllers, shaped by the one
//!   [`io::IoConfig`].
//! * [`storage`]: the backends that build an [`IoArray`] ([`storage::sim`], the
//!   simulated SSD array on the GPU; [`storage::hostctl`], the controller model on CPU
//!   threads; [`storage::kmod`], real SSDs bound to the bam kernel module), the device
//!   strings that name them ([`storage::GpuDevice`]) and their common face
//!   ([`Storage`]).
//! * [`cache`]: the software cache in GPU memory and `Array<T>` over any [`IoArray`].
//! * [`scan`]: sequential scans of large spans by GPU blocks, chunk by chunk with
//!   read-ahead, without the cache (`bam::scan_reader` on the device).
//!
//! Beside them: [`abi`] (the `#[repr(C)]` structs shared with
//! `crates/bam/cuda/include/bam/abi.h`), [`pattern`] (the verification pattern),
//! [`error`].
//!
//! This crate ships the runtime only: the GPU test suites live in `crates/bam-tests`, the
//! benchmark engines behind `bam bench` in `crates/bam-bench`.

// The ABI macro (`abi_struct!`) names `bam::abi::bytemuck` for its derives, here too.
extern crate self as bam;

// `#[macro_use]`: `abi_struct!` is in scope, by name, in every module declared below.
#[macro_use]
pub mod abi;
pub mod cache;
pub mod cuda;
pub mod error;
pub mod io;
pub mod pattern;
mod runtime;
pub mod scan;
pub mod storage;

pub use cuda::{gpu_available, Function, Gpu, KernelArg, KernelArgs, KernelParam, Module};
pub use error::{Error, IoError, IoErrorKind, Result};
pub use io::IoArray;
pub use storage::Storage;
