//! The real-SSD backend: NVMe controllers bound to the bam kernel module
//! (`/dev/bam-nvmeN`), driven by GPU threads with no CPU in the I/O path.
//!
//! - **Doorbells**: BAR0, mapped by the module (`mmap`) and registered with the GPU with
//!   `cuMemHostRegister(..., CU_MEMHOSTREGISTER_IOMEMORY)`; GPU threads store to its
//!   device address (`BAM_QP_F_MMIO`: a system-scope fence before every doorbell).
//! - **Queues and buffers**: GPU memory on 64 KiB GPU pages with
//!   `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`, made DMA-reachable with the module's `MAP_GPU`
//!   (nvidia_p2p); the I/O queue pairs are created at the bus addresses it returns.
//! - **Teardown**, in this order: the controllers are shut down (no more DMA), the GPU
//!   mappings are undone (`UNMAP`), the GPU memory is freed, BAR0 is unregistered from the
//!   GPU, and the device files are closed (the module then disables the controller and
//!   releases anything left). If the NVIDIA driver revokes a mapping (its free callback)
//!   the module releases the page table and `UNMAP` reports it; see docs/real-hardware.md.
//!
//! Where the platform cannot do this, [`KmodArray::new`] fails with
//! [`Error::Platform`] naming what is missing; `bam doctor` checks all of it up front.

use crate::cuda::Gpu;
use crate::error::{Error, Result};
use crate::io::{attach_gpus, DoorbellWindow, IoArray, IoConfig};
use crate::storage::{Backend, GpuDevice, SsdCounters, Storage};
use bam_nvme::transport::kmod::{KmodTransport, INFO_P2P_AVAILABLE, INFO_P2P_BUILT};
use bam_nvme::Transport;
use cudarc::driver::sys;
use serde::Serialize;
use std::sync::Arc;

/// Configuration of a real-SSD array.
#[derive(Clone, Debug, Serialize)]
pub struct KmodConfig {
    /// The controllers: `/dev/bam-nvmeN` nodes or PCI addresses bound to the module.
    /// Data is striped (or replicated) over them in this order.
    pub devices: Vec<String>,
    /// Queues per controller, depth, buffer slots, timeout.
    pub io: IoConfig,
}

/// Why a controller's P2P path is unusable, from the module's INFO flags.
pub fn p2p_problem(device: &str, flags: u32) -> Option<Error> {
    if flags & INFO_P2P_BUILT == 0 {
        return Some(Error::Platform {
            what: format!("{device}: the bam_nvme module was built without GPU support (P2P=0)"),
            fix: "rebuild it with `make -C kernel-module` on a machine with the NVIDIA driver and reload it".into(),
        });
    }
    if flags & INFO_P2P_AVAILABLE == 0 {
        return Some(Error::Platform {
            what: format!(
                "{device}: the NVIDIA driver's nvidia_p2p interface is not available to the module"
            ),
            fix: "load the NVIDIA kernel driver (nvidia.ko) and check `bam doctor`".into(),
        });
    }
    None
}

/// Real NVMe controllers attached to the GPU I/O layer.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// use bam::storage::kmod::{KmodArray, KmodConfig};
/// let gpu = bam::Gpu::new(0)?;
/// let cfg = KmodConfig { devices: vec!["/dev/bam-nvme0".into()], io: bam::io::IoConfig::new() };
/// let ssds = KmodArray::new(&gpu, cfg)?;
/// let io = ssds.io(); // to the cache, `Array<T>` or the benchmark
/// # let _ = io;
/// # Ok(()) }
/// ```
pub struct KmodArray {
    // Drop order matters: the I/O layer (controllers shut down, UNMAP, GPU memory freed),
    // then the BAR registrations, then the device files with their BAR mappings.
    ios: Vec<IoArray>,
    _bars: Vec<RegisteredBar>,
    transports: Vec<Arc<KmodTransport>>,
    cfg: KmodConfig,
}

impl KmodArray {
    /// Opens the controllers, registers their doorbells with the GPU, and attaches them.
    pub fn new(gpu: &Arc<Gpu>, cfg: KmodConfig) -> Result<Self> {
        Self::on_gpus(std::slice::from_ref(gpu), cfg)
    }

    /// The same controllers serving queue pairs of every GPU in `gpus`: bring-up once,
    /// then `cfg.io.queues` queue pairs per controller for each GPU, in its memory
    /// (mapped with `MAP_GPU`), ringing BAR0 through its own registration
    /// ([`Storage::ios`], in the order of `gpus`).
    pub fn on_gpus(gpus: &[Arc<Gpu>], cfg: KmodConfig) -> Result<Self> {
        if gpus.is_empty() {
            return Err(Error::InvalidArgument("kmod: no GPU given".into()));
        }
        if cfg.devices.is_empty() {
            return Err(Error::InvalidArgument(
                "kmod: name at least one controller, e.g. kmod:/dev/bam-nvme0".into(),
            ));
        }
        cfg.io.validate()?;
        let mut transports = Vec::new();
        let mut bars = Vec::new();
        let mut bar_lens = Vec::new();
        for dev in &cfg.devices {
            let t = KmodTransport::open(dev)?;
            let name = t.describe();
            if let Some(e) = p2p_problem(&name, t.info().flags) {
                return Err(e);
            }
            if t.info().flags & bam_nvme::transport::kmod::INFO_IOMMU_LAZY != 0 {
                tracing::warn!(
                    "{name}: the IOMMU invalidates lazily: pages unmapped from the controller may \
                     stay reachable for a while (iommu.strict=1 makes it strict)"
                );
            }
            if t.info().iommu() == "dma" {
                tracing::warn!(
                    "{name}: the IOMMU translates DMA; peer-to-peer DMA to GPU memory may fail \
                     (iommu=pt on the kernel command line avoids it; see `bam doctor`)"
                );
            }
            let (host, len) = t.bar0().ok_or_else(|| Error::Platform {
                what: format!("{name}: BAR0 is not memory-mapped"),
                fix: "use a kernel-module device (kmod:/dev/bam-nvmeN)".into(),
            })?;
            // SAFETY: `host` is the transport's live mmap of BAR0 of `len` bytes; the
            // transport is kept in `transports`, which drops after `bars`.
            let bar = unsafe { RegisteredBar::register(gpus, host, len) }.map_err(|e| {
                Error::Platform {
                    what: format!("{name}: registering BAR0 with the GPU (cuMemHostRegister IOMEMORY) failed: {e}"),
                    fix: "the GPU and driver must support GPUDirect RDMA to PCIe devices (data-center or professional GPUs on Linux); see `bam doctor`".into(),
                }
            })?;
            bar_lens.push(len);
            bars.push(bar);
            transports.push(t);
        }
        let platform = |e: Error| {
            match e {
            Error::Nvme(bam_nvme::Error::Unsupported { transport, what }) => Error::Platform {
                what: format!("{transport}: {what}"),
                fix: "load the NVIDIA driver, rebuild and reload bam_nvme, and check `bam doctor`".into(),
            },
            Error::Nvme(bam_nvme::Error::Os { context, source }) if context.contains("MAP_GPU") => {
                Error::Platform {
                    what: format!("{context}: {source}"),
                    fix: "the GPU's BAR1 must hold the queues and buffers (enable large/resizable BAR), \
                          and the IOMMU must allow peer-to-peer DMA (iommu=pt); see `bam doctor` and dmesg"
                        .into(),
                }
            }
            e => e,
        }
        };
        let ts: Vec<Arc<dyn Transport>> = transports
            .iter()
            .map(|t| t.clone() as Arc<dyn Transport>)
            .collect();
        let window = |g: usize, c: usize| DoorbellWindow {
            addr: bars[c].devs[g],
            len: bar_lens[c],
            mmio: true,
        };
        let ios = attach_gpus(gpus, &ts, window, |_| &cfg.io).map_err(platform)?;
        Ok(KmodArray {
            ios,
            _bars: bars,
            transports,
            cfg,
        })
    }

    /// The GPU I/O layer over the controllers (the first GPU's).
    pub fn io(&self) -> &IoArray {
        &self.ios[0]
    }

    /// The configuration.
    pub fn config(&self) -> &KmodConfig {
        &self.cfg
    }

    /// A typed error if the NVIDIA driver revoked a GPU mapping of any controller (GPU
    /// memory freed under it): the module then stopped that controller, so commands never
    /// complete and GPU waits end in timeouts; this says why.
    pub fn check_revoked(&self) -> Result<()> {
        for (t, info) in self.transports.iter().zip(self.module_info()?) {
            if info.revoked() {
                return Err(Error::Platform {
                    what: format!(
                        "{}: the NVIDIA driver revoked a GPU mapping (GPU memory freed while the SSD used it); the module stopped the controller",
                        t.describe()
                    ),
                    fix: "drop this array and build a new one (the device files are reopened)".into(),
                });
            }
        }
        Ok(())
    }

    /// The module's facts about each controller now (mappings held, pinned bytes).
    pub fn module_info(&self) -> Result<Vec<bam_nvme::transport::kmod::Info>> {
        self.transports
            .iter()
            .map(|t| t.query().map_err(Error::from))
            .collect()
    }
}

impl Storage for KmodArray {
    fn ios(&self) -> &[IoArray] {
        &self.ios
    }
    fn device(&self) -> GpuDevice {
        GpuDevice::Kmod {
            devices: self.cfg.devices.clone(),
        }
    }
    fn backend(&self) -> Backend<'_> {
        Backend::Kmod(self)
    }
    /// From each controller's SMART log (commands since manufacture; take differences).
    fn counters(&self) -> Result<Vec<SsdCounters>> {
        self.io()
            .controllers()
            .iter()
            .map(|c| {
                let s = c.smart_log()?;
                let sat = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
                Ok(SsdCounters {
                    reads: sat(s.host_read_commands),
                    writes: sat(s.host_write_commands),
                    read_bytes: sat(s.data_units_read.saturating_mul(512_000)),
                    write_bytes: sat(s.data_units_written.saturating_mul(512_000)),
                    errors: sat(s.media_errors),
                    ..Default::default()
                })
            })
            .collect()
    }
}

/// A real controller's BAR0 registered with the GPUs (cuMemHostRegister IOMEMORY), so
/// that GPU threads can store to its doorbells.
pub struct RegisteredBar {
    gpu: Arc<Gpu>,
    host: *mut u8,
    /// Device address of BAR0's first byte, for each GPU it was registered with (in the
    /// order given).
    pub devs: Vec<u64>,
}

// SAFETY: MMIO mapping handle only.
unsafe impl Send for RegisteredBar {}
// SAFETY: as above.
unsafe impl Sync for RegisteredBar {}

impl RegisteredBar {
    /// Registers `len` bytes of a BAR mapping at `host` with every GPU of `gpus` (one
    /// registration, portable to every context when there are several).
    ///
    /// # Safety
    /// `host` must be a live mmap of the device's BAR of at least `len` bytes that stays
    /// mapped for the lifetime of the result.
    pub unsafe fn register(gpus: &[Arc<Gpu>], host: *mut u8, len: usize) -> Result<Self> {
        let first = gpus
            .first()
            .ok_or_else(|| Error::InvalidArgument("register a BAR with at least one GPU".into()))?;
        first.bind()?;
        let mut flags = sys::CU_MEMHOSTREGISTER_IOMEMORY | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        if gpus.len() > 1 {
            flags |= sys::CU_MEMHOSTREGISTER_PORTABLE;
        }
        // SAFETY: caller's contract.
        unsafe { sys::cuMemHostRegister_v2(host.cast(), len, flags) }.result()?;
        // Unregistered again on drop, should a device pointer be refused below.
        let mut bar = RegisteredBar {
            gpu: first.clone(),
            host,
            devs: Vec::new(),
        };
        bar.devs = gpus
            .iter()
            .map(|g| {
                g.bind()?;
                let mut dev: sys::CUdeviceptr = 0;
                // SAFETY: registered above (portable to every context when several).
                unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host.cast(), 0) }.result()?;
                Ok(dev)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(bar)
    }
}

impl Drop for RegisteredBar {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: registered by us.
        let _ = unsafe { sys::cuMemHostUnregister(self.host.cast()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p2p_flags_say_what_is_missing() {
        let e = p2p_problem("kmod:/dev/bam-nvme0", 0).unwrap();
        assert!(e.to_string().contains("without GPU support"), "{e}");
        let e = p2p_problem("kmod:/dev/bam-nvme0", INFO_P2P_BUILT).unwrap();
        assert!(e.to_string().contains("nvidia_p2p"), "{e}");
        assert!(p2p_problem("x", INFO_P2P_BUILT | INFO_P2P_AVAILABLE).is_none());
    }
}
