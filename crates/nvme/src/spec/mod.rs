//! NVMe specification types (NVM Express Base 1.4 / 2.0, NVM command set).
//!
//! Everything here is plain data: register fields, the 64-byte submission queue entry,
//! the 16-byte completion queue entry, identify structures, log pages and status codes,
//! each with an encoding that matches the specification byte for byte. Nothing here
//! touches hardware; [`crate::controller`] and [`crate::model`] build on these types.

/// Defines a `#[repr(u8)]` enum of values the specification names, with `ALL`,
/// `from_u8` and `name` (status codes, opcodes).
macro_rules! named_codes {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $value:expr => $text:expr,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name {
            $(#[doc = $text] $variant = $value,)*
        }
        impl $name {
            /// Every value, in order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            /// Decodes a value.
            pub const fn from_u8(v: u8) -> Option<Self> {
                match v { $($value => Some(Self::$variant),)* _ => None }
            }
            /// The specification's name.
            pub const fn name(self) -> &'static str {
                match self { $(Self::$variant => $text,)* }
            }
        }
    };
}

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
