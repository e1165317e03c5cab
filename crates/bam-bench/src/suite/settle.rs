//! Waiting out the GPU's own memory work after large frees, before a variant is timed.
//!
//! After large frees (a UVM variant's balloon, a cache with its simulated media) the GPU's
//! memory bandwidth stays lower for a while: on the H100 a device-to-device copy and the
//! plain kernels ran 5 to 20 % slower for up to about a quarter of a second, on buffers
//! allocated before the frees as much as on new ones (benches/probe/baseline_mode_probe.cu,
//! docs/performance.md "Slow baselines: the GPU after large frees"). A variant timed then
//! measures that, not itself: the plain baselines of gather and histogram in the suite's full
//! runs were slow that way. So before each variant's runs the suite waits until a short
//! device-to-device copy runs about as fast as the fastest one it has seen in the process.

use super::report::Settled;
use bam::gpu::{DeviceBuffer, Gpu};
use bam::Result;
use cudarc::driver::{result, sys, CudaStream};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of one copy (two buffers of this size).
const COPY_BYTES: usize = 64 << 20;
/// Copies per reading (one reading takes about 0.2 ms on an H100).
const COPIES: u32 = 4;
/// A reading at most this much slower than the fastest seen counts as settled (readings
/// of a quiet GPU spread by under 1 %; the slow state costs 5 % and more).
const TOLERANCE: f64 = 1.03;
/// Time between readings.
const PAUSE: Duration = Duration::from_millis(20);
/// How long [`Settle::new`] reads to find the quiet GPU's speed (about twice the longest
/// slow state seen, so that a process started right after another one's frees still finds it).
const BOOT: Duration = Duration::from_millis(500);
/// How long [`Settle::wait`] waits at most.
const MAX_WAIT: Duration = Duration::from_secs(3);

/// Two scratch buffers and the fastest reading so far.
pub(super) struct Settle {
    gpu: Arc<Gpu>,
    src: DeviceBuffer,
    dst: DeviceBuffer,
    best_ms: Cell<f64>,
}

impl Settle {
    /// Allocates the scratch buffers and reads for [`BOOT`] to learn the quiet GPU's copy speed.
    pub(super) fn new(gpu: &Arc<Gpu>, stream: &CudaStream) -> Result<Self> {
        let s = Settle {
            gpu: gpu.clone(),
            src: DeviceBuffer::zeroed(gpu, COPY_BYTES)?,
            dst: DeviceBuffer::zeroed(gpu, COPY_BYTES)?,
            best_ms: Cell::new(f64::INFINITY),
        };
        let t0 = Instant::now();
        while t0.elapsed() < BOOT {
            s.reading(stream)?;
            std::thread::sleep(PAUSE);
        }
        Ok(s)
    }

    /// Reads until a reading is within [`TOLERANCE`] of the fastest, at most [`MAX_WAIT`].
    pub(super) fn wait(&self, stream: &CudaStream) -> Result<Settled> {
        let t0 = Instant::now();
        loop {
            let ms = self.reading(stream)?;
            let settled = ms <= self.best_ms.get() * TOLERANCE;
            if settled || t0.elapsed() >= MAX_WAIT {
                return Ok(Settled {
                    waited_ms: t0.elapsed().as_secs_f64() * 1e3,
                    copy_gbps: gbps(ms),
                    best_gbps: gbps(self.best_ms.get()),
                    settled,
                });
            }
            std::thread::sleep(PAUSE);
        }
    }

    /// One reading: ms of [`COPIES`] device-to-device copies, timed with events on
    /// `stream`; keeps the fastest.
    fn reading(&self, stream: &CudaStream) -> Result<f64> {
        self.gpu.bind()?;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let e0 = stream.record_event(flags)?;
        for _ in 0..COPIES {
            // SAFETY: both buffers are live device allocations of COPY_BYTES bytes owned
            // by self, which outlives the synchronize below; the context is bound.
            unsafe {
                result::memcpy_dtod_async(
                    self.dst.ptr(),
                    self.src.ptr(),
                    COPY_BYTES,
                    stream.cu_stream(),
                )
            }?;
        }
        let e1 = stream.record_event(flags)?;
        e1.synchronize()?;
        // (An event pair's resolution is about half a microsecond.)
        let ms = (e0.elapsed_ms(&e1)? as f64).max(1e-3);
        self.best_ms.set(self.best_ms.get().min(ms));
        Ok(ms)
    }
}

/// Decimal GB/s of a reading that took `ms` (each copy reads and writes COPY_BYTES).
fn gbps(ms: f64) -> f64 {
    2.0 * COPIES as f64 * COPY_BYTES as f64 / (ms * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_of_a_reading() {
        // 4 copies of 64 MiB, read and written, in 0.2 ms: 2.68 TB/s.
        let r = gbps(0.2);
        assert!((r - 2684.35).abs() < 0.01, "{r}");
    }
}
