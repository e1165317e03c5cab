//! Waiting out the GPU's own memory work after large frees, before a variant is timed.
//!
//! After large frees (a UVM variant's balloon, a cache with its simulated media) the GPU's
//! memory bandwidth stays lower for a while: the plain histogram and gather kernels run
//! measurably slower for a fraction of a second, on buffers allocated before the frees as
//! much as on new ones (benches/probe/baseline_mode_probe.cu shows it). A variant timed then
//! measures that, not itself: the plain baselines of gather and histogram in the suite's
//! full runs were slow that way. So before each variant's runs the suite waits until a
//! gauge kernel that streams through 256 MiB (`suite_settle_read`, launched as the plain
//! kernels are) runs about as fast as the fastest run of it in the process.
//!
//! (A device-to-device copy is no gauge: after a cache's teardown its rate stays low for
//! seconds while the plain kernels already run at full speed.)

use super::report::Settled;
use bam::cuda::{DeviceBuffer, Gpu};
use bam::{Module, Result};
use cudarc::driver::{sys, CudaStream};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes the gauge reads per launch.
const GAUGE_BYTES: usize = 256 << 20;
/// Gauge launches per reading (each one pass over `GAUGE_BYTES`: a reading stays short).
const LAUNCHES: u32 = 2;
/// The gauge's threads per block (its launch bounds say 256, as every suite kernel's).
const GAUGE_BLOCK: u32 = 256;
/// The gauge's blocks per SM (its launch bounds: 256 threads, 8 blocks).
const GAUGE_BLOCKS_PER_SM: u32 = 8;
/// A reading at most this much slower than the fastest counts as settled (readings of a
/// quiet GPU spread by less than that; the slow state costs more).
const TOLERANCE: f64 = 1.03;
/// Time between readings.
const PAUSE: Duration = Duration::from_millis(10);
/// How long [`Settle::new`] reads to find the quiet GPU's speed (about twice the longest
/// slow state seen, so that a process started right after another's frees still finds it).
const BOOT: Duration = Duration::from_millis(500);
/// How long [`Settle::wait`] waits at most.
const MAX_WAIT: Duration = Duration::from_secs(3);

/// The gauge's buffers and the fastest reading so far.
pub(super) struct Settle<'a> {
    gpu: Arc<Gpu>,
    m: &'a Module,
    data: DeviceBuffer,
    sink: DeviceBuffer,
    best_ms: Cell<f64>,
}

impl<'a> Settle<'a> {
    /// Allocates the gauge's buffers and reads for [`BOOT`] to learn the quiet GPU's speed.
    pub(super) fn new(gpu: &Arc<Gpu>, m: &'a Module, stream: &CudaStream) -> Result<Self> {
        let s = Settle {
            gpu: gpu.clone(),
            m,
            data: DeviceBuffer::zeroed(gpu, GAUGE_BYTES)?,
            sink: DeviceBuffer::zeroed(gpu, 4)?,
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
                    read_gbps: gbps(ms),
                    best_gbps: gbps(self.best_ms.get()),
                    settled,
                });
            }
            std::thread::sleep(PAUSE);
        }
    }

    /// One reading: ms of [`LAUNCHES`] gauge launches over the whole GPU, timed with
    /// events on `stream` after one untimed launch (the GPU idled during the pause before);
    /// keeps the fastest.
    fn reading(&self, stream: &CudaStream) -> Result<f64> {
        self.gpu.bind()?;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        self.launch(stream)?;
        let e0 = stream.record_event(flags)?;
        for _ in 0..LAUNCHES {
            self.launch(stream)?;
        }
        let e1 = stream.record_event(flags)?;
        e1.synchronize()?;
        // (An event pair's resolution is about half a microsecond.)
        let ms = (e0.elapsed_ms(&e1)? as f64).max(1e-3);
        self.best_ms.set(self.best_ms.get().min(ms));
        Ok(ms)
    }

    /// One gauge launch over the whole GPU on `stream`.
    fn launch(&self, stream: &CudaStream) -> Result<()> {
        let words = (GAUGE_BYTES / 16) as u64;
        let args = (self.data.ptr(), words, self.sink.ptr());
        let grid = self.gpu.sms * GAUGE_BLOCKS_PER_SM;
        // SAFETY: suite_settle_read(const uint4*, uint64_t, uint32_t*): `data` holds
        // `words` 16-byte words and `sink` 4 bytes, both owned by self; every reading
        // synchronizes on its stream before it returns, and self outlives it.
        unsafe {
            self.m
                .launch(stream, "suite_settle_read", grid, GAUGE_BLOCK, 0, &args)
        }
    }
}

/// Decimal GB/s of a reading that took `ms`.
fn gbps(ms: f64) -> f64 {
    LAUNCHES as f64 * GAUGE_BYTES as f64 / (ms * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_of_a_reading() {
        // 2 reads of 256 MiB in 0.2 ms: 2.68 TB/s.
        let r = gbps(0.2);
        assert!((r - 2684.35).abs() < 0.01, "{r}");
    }
}
