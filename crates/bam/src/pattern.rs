//! The deterministic data pattern of `crates/bam/cuda/include/bam/pattern.cuh`, on the host: what
//! a fresh medium holds (generation 0) and what a benchmark or test writes (its own
//! generation), so that a read can tell "never written", "written" and "written
//! somewhere else" apart. [`fill_gpu`] writes it into GPU memory with the runtime's
//! kernel.

use crate::cuda::{CudaStream, DeviceBuffer, Gpu};
use crate::error::{Error, Result};
use std::time::Duration;

/// `bam::mix32`: a 32-bit finaliser.
pub fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846ca68b);
    x ^= x >> 16;
    x
}

/// `bam::pattern_word`: word `word` (bytes `4 * word ..`) of SSD `ssd`, generation `gen`.
pub fn pattern_word(ssd: u32, word: u64, gen: u32) -> u32 {
    mix32(
        (word as u32)
            ^ mix32(
                ((word >> 32) as u32) ^ ssd.wrapping_mul(0x9e3779b9) ^ gen.wrapping_mul(0x85ebca6b),
            ),
    )
}

/// Fills `out` with the pattern of SSD `ssd` from byte `off` (a multiple of 4).
pub fn fill(out: &mut [u8], ssd: u32, off: u64, gen: u32) {
    debug_assert!(off.is_multiple_of(4));
    for (i, c) in out.chunks_mut(4).enumerate() {
        let w = pattern_word(ssd, off / 4 + i as u64, gen).to_le_bytes();
        c.copy_from_slice(&w[..c.len()]);
    }
}

/// Fills `buf` (whole 16-byte groups of it) with SSD `ssd`'s pattern, generation `gen`,
/// as if it were that SSD's medium from byte 0.
pub fn fill_gpu(buf: &DeviceBuffer, ssd: u32, gen: u32) -> Result<()> {
    let gpu = buf.gpu();
    let stream = gpu.stream()?;
    // SAFETY: `buf` holds `buf.len()` bytes and outlives the synchronisation below.
    unsafe { fill_raw(gpu, &stream, buf.ptr(), buf.len() as u64, ssd, gen)? };
    gpu.sync_timeout(&stream, Duration::from_secs(120))
}

/// Launches the fill of `bytes` bytes at device address `ptr` on `stream`.
///
/// # Safety
/// `[ptr, ptr + bytes)` must be writable device-visible memory (GPU memory or mapped
/// host memory) that stays allocated until the kernel has finished.
pub(crate) unsafe fn fill_raw(
    gpu: &Gpu,
    stream: &CudaStream,
    ptr: u64,
    bytes: u64,
    ssd: u32,
    gen: u32,
) -> Result<()> {
    if !ptr.is_multiple_of(16) {
        return Err(Error::InvalidArgument(format!(
            "pattern fill at {ptr:#x}: not 16-byte aligned"
        )));
    }
    let args: (u64, u64, u32, u32) = (ptr, bytes / 16 * 4, ssd, gen);
    // SAFETY: matches bam_fill_pattern(uint64_t, uint64_t, uint32_t, uint32_t); the
    // caller guarantees the memory.
    unsafe {
        gpu.module(crate::runtime::PATTERN)?.launch(
            stream,
            "bam_fill_pattern",
            gpu.sms * 4,
            256,
            0,
            &args,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_fill() {
        // Distinct per SSD, word and generation.
        assert_ne!(pattern_word(0, 0, 0), pattern_word(1, 0, 0));
        assert_ne!(pattern_word(0, 0, 0), pattern_word(0, 1, 0));
        assert_ne!(pattern_word(0, 0, 0), pattern_word(0, 0, 1));
        assert_eq!(mix32(0), 0);
        let mut b = [0u8; 12];
        fill(&mut b, 3, 8, 0);
        assert_eq!(&b[4..8], &pattern_word(3, 3, 0).to_le_bytes());
    }
}
