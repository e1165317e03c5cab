//! Timing GPU work with CUDA events: how long a stream took between two points, as the
//! GPU measured it (not the host's view, which adds launch and wake-up latency).

use super::context::CudaStream;
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaEvent};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A timer over one stream: [`GpuTimer::start`] records an event on it, [`GpuTimer::stop`]
/// records a second one, waits (bounded) for the stream to reach it and returns the time
/// between the two. Put the launches to time between them, on the same stream.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use bam::cuda::GpuTimer;
/// use std::time::Duration;
/// let gpu = bam::Gpu::new(0)?;
/// let stream = gpu.stream()?; // or cache.stream()
/// let t = GpuTimer::start(&stream)?;
/// // module.launch(&stream, ...) ...
/// let took = t.stop(Duration::from_secs(10))?; // an error if the work runs longer
/// println!("{:.3} ms", took.as_secs_f64() * 1e3);
/// # Ok(()) }
/// ```
pub struct GpuTimer {
    start: CudaEvent,
    stream: Arc<CudaStream>,
}

impl GpuTimer {
    /// Records the start on `stream` (after everything already queued on it).
    pub fn start(stream: &Arc<CudaStream>) -> Result<Self> {
        let start = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        Ok(GpuTimer {
            start,
            stream: stream.clone(),
        })
    }

    /// Records the end, waits until the stream has reached it (an [`Error::Timeout`] after
    /// `timeout`: the GPU work goes on, the timer is gone) and returns the GPU time between
    /// start and end.
    pub fn stop(self, timeout: Duration) -> Result<Duration> {
        let end = self
            .stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        let t0 = Instant::now();
        while !end.try_is_complete()? {
            if t0.elapsed() > timeout {
                return Err(Error::Timeout(format!(
                    "the timed GPU work did not finish within {timeout:?}"
                )));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        let ms = self.start.elapsed_ms(&end)?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}
