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

    /// [`Self::start`] for a kernel with a control block in GPU memory: the block's
    /// `control_len` bytes at `control` are zeroed first (the handshake, stop and stall
    /// words), and the kernel counts its resident blocks in the `u32` at `started`.
    pub(crate) fn start_controlled(
        &mut self,
        what: &str,
        blocks: u32,
        (control, control_len, started): (u64, usize, u64),
        launch: impl FnOnce(&CudaStream) -> Result<()>,
    ) -> Result<()> {
        super::write_device_beside(&self.gpu, control, &vec![0u8; control_len])?;
        let gpu = self.gpu.clone();
        self.start(what, blocks, launch, || {
            let mut b = [0u8; 4];
            super::read_device_beside(&gpu, started, &mut b)?;
            Ok(u32::from_le_bytes(b))
        })
    }

    /// [`Self::stop`] by storing 1 in the `u32` at `stop` (the control block's stop word).
    pub(crate) fn stop_at(&mut self, stop: u64, timeout: Duration) -> Result<()> {
        let gpu = self.gpu.clone();
        self.stop(
            || super::write_device_beside(&gpu, stop, &1u32.to_le_bytes()),
            timeout,
        )
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
