//! Persistent kernels: kernels that run until asked to stop, and the rule that module
//! loads wait for none of them.

use super::Gpu;
use crate::error::{Error, Result};
use cudarc::driver::CudaStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A persistent kernel: one that runs until it is asked to stop (a simulated array's
/// controllers, a cache's fill service), on a stream of its own. While one runs, module
/// loads are refused ([`Gpu::check_no_persistent_kernel`]). It counts as running from its
/// launch until it has been seen to finish, so that its owner, after a failed stop, leaks
/// the memory the kernel may still touch rather than free it under it.
pub(crate) struct PersistentKernel {
    gpu: Arc<Gpu>,
    stream: Arc<CudaStream>,
    running: bool,
}

impl PersistentKernel {
    /// Not launched yet; `start` launches it.
    pub(crate) fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        Ok(PersistentKernel {
            gpu: gpu.clone(),
            stream: gpu.stream()?,
            running: false,
        })
    }

    /// Launched and not yet seen to finish.
    pub(crate) fn running(&self) -> bool {
        self.running
    }

    /// Launches the kernel (`launch`, on the kernel's stream) and waits until `started`
    /// reports all `blocks` of it running (bounded: 10 s, then an error naming `what`; the
    /// kernel then counts as running, and the owner stops it).
    pub(crate) fn start(
        &mut self,
        what: &str,
        blocks: u32,
        launch: impl FnOnce(&CudaStream) -> Result<()>,
        started: impl Fn() -> Result<u32>,
    ) -> Result<()> {
        launch(&self.stream)?;
        self.running = true;
        self.gpu
            .persistent
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let t0 = Instant::now();
        loop {
            let n = started()?;
            if n == blocks {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(Error::Timeout(format!(
                    "only {n} of {blocks} blocks of {what} became resident (is another kernel \
                     filling the GPU?)"
                )));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Asks the kernel to stop (`ask`) and waits for it, up to `timeout`. Nothing to do if
    /// it is not running.
    pub(crate) fn stop(
        &mut self,
        ask: impl FnOnce() -> Result<()>,
        timeout: Duration,
    ) -> Result<()> {
        if !self.running {
            return Ok(());
        }
        ask()?;
        self.gpu.sync_timeout(&self.stream, timeout)?;
        self.running = false;
        self.gpu
            .persistent
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }
}
