//! A strict in-process NVMe controller: registers, admin queue, I/O queues, and a RAM or
//! file medium, behind the same [`Transport`](crate::Transport) interface as hardware.
//!
//! It is the single host-side definition of controller behaviour in this project: the
//! CPU tests run bring-up and I/O against it, and the simulated SSD array on the GPU uses
//! it for registers and admin commands, serving the I/O queues itself
//! ([`ModelConfig::external_io_queues`]).
//!
//! Strictness: doorbell values, queue ids and sizes, CID reuse while a command is
//! outstanding, PRPs and PRP lists (every address must lie in registered DMA memory),
//! namespace and LBA range, transfer size against MDTS, reserved fields the driver must
//! leave zero (fused operations, SGLs) are all checked, and failures complete with the
//! specification's status codes and an Error Information log entry.
//!
//! Commands are executed in the thread that rings the doorbell, before the doorbell
//! write returns; completions are posted with the device's ordering (status word last).
//!
//! ```
//! use bam_nvme::model::ModelConfig;
//! use bam_nvme::{Controller, ControllerOptions};
//! let mut cfg = ModelConfig::ram(1 << 20);
//! cfg.lba_size = 4096;
//! let ctrl = Controller::new(cfg.build_transport()?, ControllerOptions::default())?;
//! assert_eq!(ctrl.namespace(1)?.blocks, 256);
//! # Ok::<(), bam_nvme::Error>(())
//! ```

mod admin;
pub mod dma_space;
mod image_creation;
mod image_header;
mod io;
pub mod medium;
mod queues;
#[cfg(test)]
mod strictness_tests;
mod transport;

pub use dma_space::{DmaSpace, ExternalMemory, RegionKind};
pub use image_header::{ImageHeader, ImageProblem, IMAGE_HEADER_BYTES, IMAGE_MAGIC, IMAGE_VERSION};
pub use medium::{FileMedium, ImageOptions, Medium, RamMedium};
pub use transport::ModelTransport;

use crate::spec::log::ErrorLogEntry;
use crate::spec::registers::{offset, ShutdownNotification, SHST_COMPLETE};
use crate::spec::{Aqa, Cap, Cc, Csts, Version};
use crate::{Error, Result, Transport};
use parking_lot::{Mutex, RwLock};
use queues::QueueTable;
use std::collections::VecDeque;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where the model keeps its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MediumSpec {
    /// Sparse RAM, lost when the model is dropped.
    Ram,
    /// A model image file (see [`FileMedium`]), opened as [`ModelConfig::image`] says.
    File(PathBuf),
}

/// How a file-backed model opens its image (see [`FileMedium`] for the format and the
/// lock). Ignored for a RAM medium.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageMode {
    /// A missing (or empty) image is created with [`ModelConfig::capacity_bytes`] (a whole
    /// number of blocks) and [`ModelConfig::lba_size`]. Without it, a missing image is
    /// [`ImageProblem::Missing`].
    pub create: bool,
    /// An existing image must have [`ModelConfig::lba_size`]-byte blocks
    /// ([`ImageProblem::LbaMismatch`]); without it the image's block size is used.
    pub check_lba: bool,
    /// An existing image must hold [`ModelConfig::capacity_bytes`]
    /// ([`ImageProblem::CapacityMismatch`]); without it the image keeps its size.
    pub check_capacity: bool,
}

/// Faults the model can be told to show, for testing error paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// CSTS.RDY never becomes 1 after enabling.
    pub never_ready: bool,
    /// Enabling sets CSTS.CFS (controller fatal status).
    pub fatal_on_enable: bool,
    /// Reads of these LBAs fail with Unrecovered Read Error, writes with Write Fault.
    pub media_error_lbas: Option<Range<u64>>,
    /// After this many I/O commands, I/O commands are fetched but never completed.
    pub stall_after_io_commands: Option<u64>,
    /// Making the medium durable fails: Flush completes with Write Fault, and a shutdown
    /// reports CSTS.CFS.
    pub flush_fails: bool,
}

/// Configuration of a controller model.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// Namespace 1's capacity in bytes (rounded down to whole blocks).
    pub capacity_bytes: u64,
    /// Logical block size: a power of two from 512 to 65536.
    pub lba_size: u32,
    /// The medium.
    pub medium: MediumSpec,
    /// How a file medium's image is opened, created and checked.
    pub image: ImageMode,
    /// Namespace 1 is write protected: Write, Write Zeroes and Deallocate complete with
    /// Namespace Is Write Protected (generic status 20h), and an image file is opened
    /// read-only under a shared lock.
    pub read_only: bool,
    /// CAP.MQES + 1: the largest queue, in entries (2..=65536).
    pub max_queue_entries: u32,
    /// I/O submission and completion queues the controller can grant.
    pub max_io_queues: u16,
    /// MDTS as a power of two of 4 KiB pages (0: no limit).
    pub mdts: u8,
    /// CAP.TO in units of 500 ms.
    pub timeout_500ms: u8,
    /// CAP.DSTRD: doorbell stride is `4 << dstrd` bytes.
    pub dstrd: u8,
    /// Serial number reported by Identify.
    pub serial: String,
    /// Model number reported by Identify.
    pub model_number: String,
    /// I/O queues are served elsewhere (the simulated array on the GPU); the model only
    /// creates and deletes them and accepts external memory for them.
    pub external_io_queues: bool,
    /// Injected faults.
    pub faults: Faults,
}

impl ModelConfig {
    /// A RAM-backed model of `capacity_bytes` with 512-byte blocks.
    pub fn ram(capacity_bytes: u64) -> Self {
        ModelConfig {
            capacity_bytes,
            lba_size: 512,
            medium: MediumSpec::Ram,
            image: ImageMode::default(),
            read_only: false,
            max_queue_entries: 1024,
            max_io_queues: 128,
            mdts: 5,
            timeout_500ms: 2,
            dstrd: 0,
            serial: "BAM0000000001".into(),
            model_number: "bam controller model".into(),
            external_io_queues: false,
            faults: Faults::default(),
        }
    }

    /// A file-backed model: the image at `path` is created with `capacity_bytes` (a whole
    /// number of [`lba_size`](Self::lba_size) blocks) if missing; an existing image keeps
    /// its size but must have `lba_size`-byte blocks.
    pub fn file(path: impl Into<PathBuf>, capacity_bytes: u64) -> Self {
        ModelConfig {
            medium: MediumSpec::File(path.into()),
            image: ImageMode {
                create: true,
                check_lba: true,
                check_capacity: false,
            },
            ..Self::ram(capacity_bytes)
        }
    }

    /// A model on the existing image at `path`, with the image's block size and capacity;
    /// a missing image is an error ([`ImageProblem::Missing`]).
    pub fn open_file(path: impl Into<PathBuf>) -> Self {
        ModelConfig {
            medium: MediumSpec::File(path.into()),
            ..Self::ram(0)
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if !self.lba_size.is_power_of_two() || !(512..=65536).contains(&self.lba_size) {
            return bad(format!(
                "LBA size {} must be a power of two from 512 to 65536",
                self.lba_size
            ));
        }
        if !(2..=65536).contains(&self.max_queue_entries) {
            return bad(format!(
                "max queue entries {} must be 2..=65536",
                self.max_queue_entries
            ));
        }
        if self.max_io_queues == 0 || self.max_io_queues == u16::MAX {
            return bad("max I/O queues must be 1..=65534".into());
        }
        if self.dstrd > 15 || self.mdts > 20 {
            return bad("DSTRD must be <= 15 and MDTS <= 20".into());
        }
        if matches!(self.medium, MediumSpec::File(_)) && self.image.create {
            let lba = self.lba_size as u64;
            if self.capacity_bytes < lba || !self.capacity_bytes.is_multiple_of(lba) {
                return bad(format!(
                    "an image of {} bytes is not a whole number of {lba}-byte blocks",
                    self.capacity_bytes
                ));
            }
        }
        Ok(())
    }

    /// Builds the model.
    pub fn build(mut self) -> Result<Arc<ControllerModel>> {
        self.validate()?;
        let medium: Box<dyn Medium> = match &self.medium {
            MediumSpec::Ram => Box::new(RamMedium::new(self.capacity_bytes)),
            MediumSpec::File(p) => {
                let opts = ImageOptions {
                    create: self.image.create.then_some(ImageHeader {
                        lba_size: self.lba_size,
                        blocks: self.capacity_bytes / self.lba_size as u64,
                    }),
                    read_only: self.read_only,
                    lba_size: self.image.check_lba.then_some(self.lba_size),
                    capacity_bytes: self.image.check_capacity.then_some(self.capacity_bytes),
                };
                let file = FileMedium::open(p, &opts)?;
                // The image's geometry is the namespace's.
                self.lba_size = file.header().lba_size;
                self.capacity_bytes = file.len();
                Box::new(file)
            }
        };
        let blocks = medium.len() / self.lba_size as u64;
        if blocks == 0 {
            return Err(Error::InvalidArgument(format!(
                "capacity of {} bytes holds no {}-byte block",
                medium.len(),
                self.lba_size
            )));
        }
        let cap = Cap::new(
            self.max_queue_entries,
            true,
            self.timeout_500ms,
            self.dstrd,
            0,
            4,
        );
        Ok(Arc::new(ControllerModel {
            cap,
            blocks,
            medium,
            dma: DmaSpace::new(),
            regs: Mutex::new(Regs::default()),
            queues: RwLock::new(QueueTable::default()),
            state: Mutex::new(AdminState::new(self.max_io_queues)),
            stats: Stats::default(),
            doorbell_errors: Mutex::new(Vec::new()),
            io_commands: AtomicU64::new(0),
            cfg: self,
        }))
    }

    /// Builds the model and a transport to reach it.
    pub fn build_transport(self) -> Result<Arc<dyn Transport>> {
        Ok(Arc::new(ModelTransport::new(self.build()?)))
    }
}

#[derive(Default)]
struct Regs {
    cc: Cc,
    csts: Csts,
    aqa: Aqa,
    asq: u64,
    acq: u64,
}

struct AdminState {
    /// Granted (I/O SQs, I/O CQs).
    granted: (u16, u16),
    any_io_queue_created: bool,
    volatile_write_cache: bool,
    error_log: VecDeque<ErrorLogEntry>,
    error_count: u64,
    outstanding_aers: u32,
}

impl AdminState {
    fn new(max: u16) -> Self {
        AdminState {
            granted: (max, max),
            any_io_queue_created: false,
            volatile_write_cache: false,
            error_log: VecDeque::new(),
            error_count: 0,
            outstanding_aers: 0,
        }
    }
}

/// Counters of what the model has done.
#[derive(Debug, Default)]
pub struct Stats {
    /// Commands completed (admin and I/O).
    pub commands: AtomicU64,
    /// Read commands completed successfully.
    pub reads: AtomicU64,
    /// Write commands completed successfully.
    pub writes: AtomicU64,
    /// Bytes moved to the host.
    pub bytes_read: AtomicU64,
    /// Bytes moved from the host.
    pub bytes_written: AtomicU64,
    /// Commands completed with an error status.
    pub errors: AtomicU64,
    /// Flush commands completed successfully.
    pub flushes: AtomicU64,
}

/// A created I/O queue pair, as the model knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoQueueInfo {
    /// Submission queue id.
    pub sqid: u16,
    /// Submission queue base bus address.
    pub sq_base: u64,
    /// Submission queue entries.
    pub sq_entries: u16,
    /// Completion queue id.
    pub cqid: u16,
    /// Completion queue base bus address.
    pub cq_base: u64,
    /// Completion queue entries.
    pub cq_entries: u16,
}

/// The controller model. Reach it through [`ModelTransport`].
pub struct ControllerModel {
    cfg: ModelConfig,
    cap: Cap,
    blocks: u64,
    medium: Box<dyn Medium>,
    dma: Arc<DmaSpace>,
    regs: Mutex<Regs>,
    queues: RwLock<QueueTable>,
    state: Mutex<AdminState>,
    stats: Stats,
    doorbell_errors: Mutex<Vec<String>>,
    io_commands: AtomicU64,
}

impl ControllerModel {
    /// The configuration it was built with.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }
    /// Namespace 1's size in blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }
    /// The medium (for checking contents in tests).
    pub fn medium(&self) -> &dyn Medium {
        &*self.medium
    }
    /// The DMA table.
    pub fn dma(&self) -> &Arc<DmaSpace> {
        &self.dma
    }
    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Invalid doorbell writes seen (the model ignores them, as the specification lets a
    /// controller do, and records them here).
    pub fn doorbell_errors(&self) -> Vec<String> {
        self.doorbell_errors.lock().clone()
    }
    /// The Error Information log, newest first.
    pub fn error_log(&self) -> Vec<ErrorLogEntry> {
        self.state.lock().error_log.iter().copied().collect()
    }
    /// The I/O queue pairs created so far (for an external I/O engine to serve).
    pub fn io_queues(&self) -> Vec<IoQueueInfo> {
        self.queues.read().io_queue_infos()
    }

    /// Register read, as the CPU sees it through BAR0.
    pub fn read_register(&self, off: usize) -> u32 {
        let r = self.regs.lock();
        match off {
            offset::CAP => self.cap.0 as u32,
            o if o == offset::CAP + 4 => (self.cap.0 >> 32) as u32,
            offset::VS => Version::new(1, 4, 0).0,
            offset::CC => r.cc.0,
            offset::CSTS => r.csts.0,
            offset::AQA => r.aqa.0,
            offset::ASQ => r.asq as u32,
            o if o == offset::ASQ + 4 => (r.asq >> 32) as u32,
            offset::ACQ => r.acq as u32,
            o if o == offset::ACQ + 4 => (r.acq >> 32) as u32,
            _ => 0,
        }
    }

    /// Register write, as the CPU does through BAR0. Doorbell writes execute commands.
    pub fn write_register(&self, off: usize, value: u32) {
        if off >= offset::DOORBELLS {
            return self.doorbell(off, value);
        }
        let mut r = self.regs.lock();
        match off {
            offset::CC => self.write_cc(&mut r, Cc(value)),
            offset::AQA => r.aqa = Aqa(value),
            offset::ASQ => r.asq = (r.asq & !0xFFFF_FFFF) | value as u64,
            o if o == offset::ASQ + 4 => r.asq = (r.asq & 0xFFFF_FFFF) | (value as u64) << 32,
            offset::ACQ => r.acq = (r.acq & !0xFFFF_FFFF) | value as u64,
            o if o == offset::ACQ + 4 => r.acq = (r.acq & 0xFFFF_FFFF) | (value as u64) << 32,
            _ => {} // read-only or unimplemented registers ignore writes
        }
    }

    fn write_cc(&self, r: &mut Regs, cc: Cc) {
        let was = r.cc;
        r.cc = cc;
        if !was.enabled() && cc.enabled() {
            if self.cfg.faults.fatal_on_enable || !self.admin_config_valid(r) {
                r.csts = Csts::new(false, true, 0);
                return;
            }
            let (sq, cq) = (r.aqa.sq_entries() as u16, r.aqa.cq_entries() as u16);
            self.queues.write().reset_with_admin(r.asq, sq, r.acq, cq);
            r.csts = Csts::new(!self.cfg.faults.never_ready, false, 0);
        } else if was.enabled() && !cc.enabled() {
            self.reset();
            r.csts = Csts::default();
        } else if cc.enabled() && cc.shn() != ShutdownNotification::None as u32 && was.shn() == 0 {
            // A shutdown that cannot make the data durable is a fatal controller status
            // (CSTS.CFS), which the host's shutdown wait reports, not a silent success.
            let fatal = match self.flush_medium() {
                Ok(()) => r.csts.fatal(),
                Err(e) => {
                    tracing::error!(device = %self.cfg.serial, "shutdown: flushing the medium failed: {e}");
                    true
                }
            };
            r.csts = Csts::new(r.csts.ready(), fatal, SHST_COMPLETE);
        }
    }

    /// Makes the medium durable (or fails as the fault injection says).
    pub(crate) fn flush_medium(&self) -> std::io::Result<()> {
        if self.cfg.faults.flush_fails {
            return Err(std::io::Error::other(
                "injected: the medium cannot be made durable",
            ));
        }
        self.medium.flush()
    }

    fn admin_config_valid(&self, r: &Regs) -> bool {
        let aligned = |a: u64| a != 0 && a.is_multiple_of(crate::spec::PAGE_SIZE as u64);
        let sq_bytes = r.aqa.sq_entries() as u64 * 64;
        let cq_bytes = r.aqa.cq_entries() as u64 * 16;
        r.aqa.sq_entries() >= 2
            && r.aqa.cq_entries() >= 2
            && aligned(r.asq)
            && aligned(r.acq)
            && matches!(self.dma.lookup(r.asq, sq_bytes), Some(RegionKind::Host(_)))
            && matches!(self.dma.lookup(r.acq, cq_bytes), Some(RegionKind::Host(_)))
            && r.cc.css() == 0
            && r.cc.mps_bytes() >= self.cap.mps_min_bytes()
            && r.cc.mps_bytes() <= self.cap.mps_max_bytes()
            && r.cc.mps_bytes() == crate::spec::PAGE_SIZE
    }

    /// Controller reset: queues deleted, features back to defaults. The medium keeps its
    /// data.
    fn reset(&self) {
        *self.queues.write() = QueueTable::default();
        let mut st = self.state.lock();
        let log = std::mem::take(&mut st.error_log);
        let count = st.error_count;
        *st = AdminState::new(self.cfg.max_io_queues);
        st.error_log = log;
        st.error_count = count;
    }

    fn doorbell(&self, off: usize, value: u32) {
        let stride = self.cap.doorbell_stride();
        let Some((qid, is_cq)) = crate::spec::registers::doorbell_from_offset(off, stride) else {
            return self.doorbell_error(format!(
                "write of {value} to {off:#x}, which is not a doorbell"
            ));
        };
        if !self.regs.lock().csts.ready() {
            return self.doorbell_error(format!(
                "doorbell write to queue {qid} while the controller is not ready"
            ));
        }
        if value > u16::MAX as u32 {
            return self.doorbell_error(format!(
                "doorbell value {value} for queue {qid} exceeds 16 bits"
            ));
        }
        if is_cq {
            self.cq_head_doorbell(qid, value as u16);
        } else {
            self.sq_tail_doorbell(qid, value as u16);
        }
    }

    fn doorbell_error(&self, what: String) {
        tracing::warn!(target: "bam_nvme::model", "invalid doorbell write: {what}");
        self.doorbell_errors.lock().push(what);
    }

    fn record_error(&self, entry: ErrorLogEntry) {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        st.error_count += 1;
        let entry = ErrorLogEntry {
            error_count: st.error_count,
            ..entry
        };
        st.error_log.push_front(entry);
        st.error_log.truncate(64);
    }
}
