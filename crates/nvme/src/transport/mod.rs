//! Transports: the ways this library reaches an NVMe controller.
//!
//! Every transport answers the same small questions: read or write a controller register
//! (BAR0), give DMA-able host memory with its bus addresses, and, where supported, make
//! GPU memory DMA-able. Controller bring-up, admin commands and CPU I/O are written once
//! against [`Transport`].
//!
//! | transport | device string | module |
//! |---|---|---|
//! | in-process controller model | `model:PATH` or `model:ram:SIZE` | [`crate::model`] |
//! | VFIO (`vfio-pci`) | `vfio:0000:01:00.0` | [`vfio`] |
//! | bam kernel module | `kmod:/dev/bam-nvme0` or `kmod:BDF` | [`kmod`] |

pub mod dma;
pub mod kmod;
mod mmio;
pub mod vfio;

pub use dma::{DmaBuffer, GpuMapping};

use crate::Result;

/// Access to one NVMe controller.
///
/// Register accessors are infallible, like the MMIO they model: a controller that has
/// gone away reads as all ones, which bring-up and the queue code detect. Register
/// writes are `unsafe`: through them a caller can aim the controller at any bus address
/// (see [`Transport::write32`]); reads, DMA allocation and the description are safe.
pub trait Transport: Send + Sync + 'static {
    /// The device as a user names it, e.g. `vfio:0000:01:00.0`.
    fn describe(&self) -> String;

    /// Reads a 32-bit register at `offset` in BAR0.
    fn read32(&self, offset: usize) -> u32;

    /// Writes a 32-bit register (or doorbell) at `offset` in BAR0.
    ///
    /// # Safety
    /// A register write can make the controller read or write any bus address: ASQ/ACQ
    /// name the admin queues, a doorbell makes it fetch the commands (and their PRPs) in
    /// a queue's memory, CC enables it. The caller must make sure that every bus address
    /// the write lets the controller use names memory mapped for this controller that
    /// stays valid (and is not otherwise used) for as long as the controller may access
    /// it, and that the write does not break the driver's own use of the controller
    /// (its admin queue, the queues of live [`crate::IoQueuePair`]s).
    unsafe fn write32(&self, offset: usize, value: u32);

    /// Reads a 64-bit register as two 32-bit reads, low dword first.
    fn read64(&self, offset: usize) -> u64 {
        let lo = self.read32(offset) as u64;
        let hi = self.read32(offset + 4) as u64;
        lo | hi << 32
    }

    /// Writes a 64-bit register as two 32-bit writes, low dword first.
    ///
    /// # Safety
    /// As [`Transport::write32`].
    unsafe fn write64(&self, offset: usize, value: u64) {
        // SAFETY: the caller upholds write32's contract for the whole 64-bit value.
        unsafe {
            self.write32(offset, value as u32);
            self.write32(offset + 4, (value >> 32) as u32);
        }
    }

    /// Allocates `len` bytes (rounded up to whole 4 KiB pages) of zeroed host memory that
    /// the controller can reach by DMA.
    fn alloc_dma(&self, len: usize) -> Result<DmaBuffer>;

    /// Makes `len` bytes of GPU memory at device address `dev_ptr` reachable by the
    /// controller and returns its bus addresses.
    fn map_gpu(&self, dev_ptr: u64, len: usize) -> Result<GpuMapping> {
        let _ = (dev_ptr, len);
        Err(crate::Error::Unsupported {
            transport: self.describe(),
            what: "mapping GPU memory for DMA".into(),
        })
    }

    /// The host mapping of BAR0 and its length, when the registers are memory-mapped
    /// (used to register doorbells with the GPU). `None` for the controller model.
    fn bar0(&self) -> Option<(*mut u8, usize)> {
        None
    }
}
