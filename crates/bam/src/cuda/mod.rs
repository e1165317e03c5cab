//! The CUDA layer: one GPU's context and the modules loaded into it, GPU and pinned host
//! memory, persistent kernels, typed launches, and the layout builder of every device
//! table. It knows no storage backend: the simulator, the cache and the scans bring
//! their own kernels ([`crate::runtime`]) and tables.

mod context;
pub mod info;
pub mod layout;
mod memory;
pub mod module;
mod persistent;
mod timer;

pub use context::{gpu_available, owner_of, CudaStream, Gpu};
pub use layout::TableLayout;
pub(crate) use memory::{read_device, read_device_beside, write_device_beside};
pub use memory::{AlignedBuffer, DeviceBuffer, PinnedBuffer};
pub use module::{Function, KernelArg, KernelArgs, KernelParam, Module};
pub(crate) use persistent::PersistentKernel;
pub use timer::GpuTimer;
