//! NVMe specification types (NVM Express Base 1.4 / 2.0, NVM command set).
//!
//! Everything here is plain data: register fields, the 64-byte submission queue entry,
//! the 16-byte completion queue entry, identify structures, log pages and status codes,
//! each with an encoding that matches the specification byte for byte. Nothing here
//! touches hardware; [`crate::controller`] and [`crate::model`] build on these types.

pub mod command;
pub mod completion;
pub mod identify;
pub mod log;
pub mod registers;
pub mod status;

pub use command::{AdminOpcode, IoOpcode, Sqe};
pub use completion::Cqe;
pub use identify::{IdentifyController, IdentifyNamespace, LbaFormat};
pub use registers::{Aqa, Cap, Cc, Csts, Version};
pub use status::{Status, StatusCodeType};

#[cfg(not(target_endian = "little"))]
compile_error!("bam-nvme assumes a little-endian host, as NVMe structures are little-endian");

/// The memory page size this library uses for queues and PRPs (CC.MPS = 0).
pub const PAGE_SIZE: usize = 4096;
