//! Controller bring-up and admin commands, over any [`Transport`].
//!
//! [`Controller::new`] resets the controller (CC.EN=0, wait for CSTS.RDY=0), sets up the
//! admin queues, enables it (wait for CSTS.RDY=1), identifies it and its namespaces and
//! negotiates the number of I/O queues. Every wait is bounded by CAP.TO; a fatal status
//! (CSTS.CFS) or a timeout becomes a typed [`Error`].
//!
//! [`Controller::shutdown`] shuts the controller down (CC.SHN, then CC.EN=0) and reports
//! a failed shutdown (CSTS.CFS, a timeout, a device that is gone) as an error; dropping the last
//! handle without it does the same and only logs. [`Controller::reset`] recovers from an
//! admin timeout or a broken controller: disable, wait for CSTS.RDY=0 (after which the
//! device no longer touches any queue or data memory), enable again.
//!
//! # DMA memory that is deliberately leaked
//! When the controller may still access the admin queues or the scratch page (an admin
//! command timed out or broke the protocol and no reset followed, or the shutdown
//! failed), dropping the controller does not free that memory but leaks it: freeing it
//! would let a late DMA write into memory that belongs to someone else.

use crate::io::IoQueuePair;
use crate::queue::{CompletionRing, SubmissionRing};
use crate::spec::command::{cns, log_id};
use crate::spec::identify::{self, IdentifyController, IdentifyNamespace, IDENTIFY_SIZE};
use crate::spec::log::{ErrorLogEntry, SmartLog, ERROR_LOG_ENTRY_SIZE, SMART_LOG_SIZE};
use crate::spec::registers::{doorbell_offset, offset, ShutdownNotification, SHST_COMPLETE};
use crate::spec::{AdminOpcode, Aqa, Cap, Cc, Cqe, Csts, Sqe, Version, PAGE_SIZE};
use crate::transport::{DmaBuffer, Transport};
use crate::{Error, Result};
use parking_lot::{Mutex, RwLock};
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options for [`Controller::new`].
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// Admin queue entries (2..=4096, capped by CAP.MQES).
    pub admin_queue_entries: u16,
    /// I/O queue pairs to ask the controller for.
    pub io_queue_pairs: u16,
    /// How long an admin command may take.
    pub admin_timeout: Duration,
    /// How long an I/O command may take.
    pub io_timeout: Duration,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            admin_queue_entries: 32,
            io_queue_pairs: 64,
            admin_timeout: Duration::from_secs(10),
            io_timeout: Duration::from_secs(30),
        }
    }
}

/// A namespace: its id, size and block size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    /// Namespace id.
    pub nsid: u32,
    /// Size in logical blocks.
    pub blocks: u64,
    /// Logical block size in bytes.
    pub block_size: u32,
    /// The full Identify Namespace data.
    pub identify: IdentifyNamespace,
}

impl Namespace {
    /// Capacity in bytes.
    pub fn bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.block_size as u64)
    }
    /// Checks that `blocks` blocks at `lba` lie inside the namespace.
    pub fn check_range(&self, lba: u64, blocks: u64) -> Result<()> {
        if blocks == 0 {
            return Err(Error::ZeroLength {
                what: format!("transfer at LBA {lba}"),
            });
        }
        match lba.checked_add(blocks) {
            Some(end) if end <= self.blocks => Ok(()),
            _ => Err(Error::LbaOutOfRange {
                nsid: self.nsid,
                lba,
                blocks,
                capacity: self.blocks,
            }),
        }
    }
}

/// A summary of the controller, for display.
#[derive(Clone, Debug)]
pub struct ControllerInfo {
    /// The device string.
    pub device: String,
    /// NVMe version.
    pub version: Version,
    /// Identify Controller data.
    pub identify: IdentifyController,
    /// Largest queue, in entries.
    pub max_queue_entries: u32,
    /// Doorbell stride in bytes.
    pub doorbell_stride: usize,
    /// Maximum bytes per command (MDTS, capped by this driver's limit).
    pub max_transfer_bytes: usize,
    /// I/O queue pairs granted.
    pub io_queue_pairs: u16,
    /// CAP.TO in milliseconds.
    pub ready_timeout_ms: u64,
    /// Namespaces.
    pub namespaces: Vec<Namespace>,
}

/// The largest transfer this driver puts in one command, whatever MDTS allows: one PRP
/// list page per command covers it.
pub const DRIVER_MAX_TRANSFER: usize = 2 << 20;

pub(crate) struct AdminQueue {
    // ManuallyDrop: freed in AdminQueue's Drop only when the controller can no longer
    // access them (see `may_dma`), leaked otherwise.
    sq: ManuallyDrop<DmaBuffer>,
    cq: ManuallyDrop<DmaBuffer>,
    sq_ring: SubmissionRing,
    cq_ring: CompletionRing,
    next_cid: u16,
    /// One page for Identify / log page data.
    scratch: ManuallyDrop<DmaBuffer>,
    /// Why the admin queue is unusable, once it is: a command timed out (it stays
    /// outstanding and may complete or transfer data later), the controller broke the
    /// admin protocol or was shut down. Every later command fails with
    /// [`Error::ControllerNeedsReset`] until [`Controller::reset`].
    dead: Option<String>,
    /// The controller may still read or write the admin queues or the scratch page on
    /// its own (a command is outstanding after a timeout or a protocol violation, or the
    /// shutdown failed): the memory is leaked on drop. Cleared by a reset that saw
    /// CSTS.RDY=0.
    may_dma: bool,
    /// Whether a shutdown was done (its failure, if it failed).
    shutdown: Option<std::result::Result<(), String>>,
}

pub(crate) struct Inner {
    pub transport: Arc<dyn Transport>,
    pub cap: Cap,
    pub version: Version,
    pub options: ControllerOptions,
    admin: Mutex<AdminQueue>,
    pub identify: IdentifyController,
    pub namespaces: Vec<Namespace>,
    pub max_transfer: usize,
    pub granted: u16,
    qids: Mutex<Vec<bool>>,
    /// Counts resets: an I/O queue pair belongs to the epoch it was created in. Writers
    /// (a reset) hold it across disable..enable; queue pairs hold it for reading while
    /// they ring doorbells or create and delete their queues, so that no doorbell of an
    /// old pair reaches a queue of the same id created after the reset.
    pub(crate) epoch: RwLock<u64>,
}

/// A controller that has been brought up. Cheap to clone; each clone shares the admin
/// queue. Create one [`IoQueuePair`] per thread for I/O.
#[derive(Clone)]
pub struct Controller {
    pub(crate) inner: Arc<Inner>,
}

/// Reads CSTS and fails if the controller is gone (registers read all ones) or reports a
/// fatal error (CSTS.CFS). `during` says what was going on, for the error.
pub(crate) fn check_alive(t: &dyn Transport, during: &str) -> Result<Csts> {
    let csts = Csts(t.read32(offset::CSTS));
    if csts.0 == u32::MAX {
        return Err(Error::DeviceUnavailable {
            device: t.describe(),
            reason: "controller registers read as all ones: the device is gone or not responding"
                .into(),
        });
    }
    if csts.fatal() {
        return Err(Error::ControllerFatal {
            during: during.into(),
        });
    }
    Ok(csts)
}

/// As [`check_alive`], and fails with [`Error::ControllerNotReady`] if CSTS.RDY reads 0
/// while the driver has the controller enabled (it was reset behind the driver's back;
/// no command will complete).
pub(crate) fn check_running(t: &dyn Transport, during: &str) -> Result<Csts> {
    let csts = check_alive(t, during)?;
    if !csts.ready() {
        return Err(Error::ControllerNotReady {
            during: during.into(),
        });
    }
    Ok(csts)
}

/// Waits (bounded) until `done(CSTS)`. Registers reading all ones fail at once; so does
/// CSTS.CFS when `fatal_fails` (a controller being disabled may show CFS until RDY=0).
fn wait_until(
    transport: &dyn Transport,
    timeout: Duration,
    what: &str,
    fatal_fails: bool,
    mut done: impl FnMut(Csts) -> bool,
) -> Result<Csts> {
    let start = Instant::now();
    loop {
        let csts = Csts(transport.read32(offset::CSTS));
        if csts.0 != u32::MAX && done(csts) {
            return Ok(csts);
        }
        match check_alive(transport, &format!("while waiting for {what}")) {
            Err(Error::ControllerFatal { .. }) if !fatal_fails => {}
            r => {
                r?;
            }
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout {
                what: what.into(),
                after: timeout,
            });
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// How long to wait for CSTS.RDY and for a shutdown: CAP.TO, at least 500 ms.
fn ready_timeout(cap: Cap) -> Duration {
    Duration::from_millis(cap.timeout_ms().max(500))
}

/// Disables the controller (CC.EN=0) and waits (bounded) for CSTS.RDY=0. Once it
/// returns Ok the controller has stopped processing: it no longer reads or writes any
/// queue or data memory, and every queue is deleted. CSTS.CFS does not fail the wait
/// (disabling is how a fatal status is cleared); a device that is gone does.
fn disable(t: &dyn Transport, timeout: Duration) -> Result<()> {
    let cc = Cc(t.read32(offset::CC));
    if cc.0 == u32::MAX {
        check_alive(t, "while disabling the controller")?;
    }
    if cc.enabled() {
        // SAFETY: clearing CC.EN stops the controller; it points it at no memory.
        unsafe { t.write32(offset::CC, cc.with_enabled(false).0) };
    }
    wait_until(
        t,
        timeout,
        "the controller to reset (CSTS.RDY=0)",
        false,
        |s| !s.ready(),
    )?;
    Ok(())
}

impl Controller {
    /// Brings up the controller behind `transport`.
    pub fn new(transport: Arc<dyn Transport>, options: ControllerOptions) -> Result<Self> {
        let t = &*transport;
        let cap = Cap(t.read64(offset::CAP));
        if cap.0 == u64::MAX {
            return Err(Error::DeviceUnavailable {
                device: t.describe(),
                reason: "CAP reads as all ones: the device is gone or BAR0 is not mapped".into(),
            });
        }
        if cap.css() & 1 == 0 {
            return Err(Error::Unsupported {
                transport: t.describe(),
                what: "the NVM command set (CAP.CSS)".into(),
            });
        }
        if cap.mps_min_bytes() > PAGE_SIZE || cap.mps_max_bytes() < PAGE_SIZE {
            return Err(Error::Unsupported {
                transport: t.describe(),
                what: "4 KiB memory pages (CAP.MPSMIN/MPSMAX)".into(),
            });
        }
        if cap.max_queue_entries() < 2 {
            return Err(Error::Protocol(format!(
                "CAP.MQES is {} (a queue of {} entry); the minimum is 1 (2 entries)",
                cap.max_queue_entries() - 1,
                cap.max_queue_entries()
            )));
        }
        let version = Version(t.read32(offset::VS));
        // CAP.TO of 0 would make every wait fail at once; treat it as the minimum unit.
        let ready_timeout = ready_timeout(cap);

        // Reset.
        disable(t, ready_timeout)?;

        // Admin queues.
        let entries = options
            .admin_queue_entries
            .clamp(2, 4096)
            .min(cap.max_queue_entries().min(4096) as u16);
        let sq = t.alloc_dma(entries as usize * 64)?;
        let cq = t.alloc_dma(entries as usize * 16)?;
        let scratch = t.alloc_dma(IDENTIFY_SIZE)?;
        let mut admin = AdminQueue {
            sq: ManuallyDrop::new(sq),
            cq: ManuallyDrop::new(cq),
            sq_ring: SubmissionRing::new(entries),
            cq_ring: CompletionRing::new(entries),
            next_cid: 0,
            scratch: ManuallyDrop::new(scratch),
            dead: None,
            may_dma: false,
            shutdown: None,
        };
        let (identify, namespaces, granted) =
            match Self::identify_and_negotiate(t, cap, &options, &mut admin, ready_timeout) {
                Ok(v) => v,
                Err(e) => {
                    // Bring-up failed with the controller perhaps enabled and a command
                    // perhaps outstanding: disable it, so that its memory can be freed
                    // (AdminQueue's Drop leaks it if the controller may still touch it).
                    // Once CSTS.RDY=0 the controller no longer touches it, whatever was
                    // outstanding.
                    admin.may_dma = disable(t, ready_timeout).is_err();
                    return Err(e);
                }
            };

        let max_transfer = identify
            .max_transfer_bytes(cap.mps_min_bytes())
            .unwrap_or(usize::MAX)
            .min(DRIVER_MAX_TRANSFER);

        tracing::debug!(device = %t.describe(), %version, granted, max_transfer, "controller ready");
        Ok(Controller {
            inner: Arc::new(Inner {
                transport,
                cap,
                version,
                options,
                admin: Mutex::new(admin),
                identify,
                namespaces,
                max_transfer,
                granted,
                qids: Mutex::new(vec![false; granted as usize + 1]),
                epoch: RwLock::new(0),
            }),
        })
    }

    /// Enables the controller with `admin`'s queues, identifies it and its namespaces and
    /// negotiates the number of I/O queues.
    fn identify_and_negotiate(
        t: &dyn Transport,
        cap: Cap,
        options: &ControllerOptions,
        admin: &mut AdminQueue,
        ready_timeout: Duration,
    ) -> Result<(IdentifyController, Vec<Namespace>, u16)> {
        admin.enable(t, ready_timeout)?;
        let stride = cap.doorbell_stride();
        let timeout = options.admin_timeout;

        // Identify.
        admin.command(
            t,
            stride,
            timeout,
            Sqe::identify(cns::CONTROLLER, 0, 0),
            true,
        )?;
        let identify = IdentifyController::from_bytes(admin.scratch_page());
        admin.command(
            t,
            stride,
            timeout,
            Sqe::identify(cns::ACTIVE_NAMESPACES, 0, 0),
            true,
        )?;
        let nsids = identify::parse_namespace_list(admin.scratch_page());
        let mut namespaces: Vec<Namespace> = Vec::new();
        for nsid in nsids {
            if nsid == u32::MAX || namespaces.iter().any(|n| n.nsid == nsid) {
                return Err(Error::Protocol(format!(
                    "the active namespace list names namespace {nsid:#x} {}",
                    if nsid == u32::MAX {
                        "(the broadcast value)"
                    } else {
                        "twice"
                    }
                )));
            }
            if let Some(ns) = admin.identify_namespace(t, stride, timeout, nsid)? {
                namespaces.push(ns);
            }
        }

        let granted = admin.negotiate_queues(t, stride, timeout, options.io_queue_pairs)?;
        Ok((identify, namespaces, granted))
    }

    /// The transport. Its register writes are `unsafe` ([`Transport::write32`]): safe
    /// code can read registers, allocate DMA memory and describe the device, but not
    /// re-point the controller's queues or ring its doorbells.
    ///
    /// ```compile_fail,E0133
    /// # fn f(ctrl: &bam_nvme::Controller) {
    /// // Rewriting ASQ would aim the controller at an arbitrary bus address: not in safe code.
    /// ctrl.transport().write64(bam_nvme::spec::registers::offset::ASQ, 0x1000);
    /// # }
    /// ```
    ///
    /// ```compile_fail,E0133
    /// # fn f(ctrl: &bam_nvme::Controller) {
    /// ctrl.transport().write32(0x1000, 1); // a doorbell
    /// # }
    /// ```
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.inner.transport
    }

    /// Shuts the controller down (CC.SHN = normal) and waits, bounded by CAP.TO, for
    /// the shutdown to complete (CSTS.SHST), then disables it (CC.EN = 0, CSTS.RDY = 0:
    /// it touches no memory after that). Fails if the controller reports a fatal status
    /// (CSTS.CFS, also when set together with SHST = complete: the shutdown did not make
    /// the data durable), is gone, or does not complete or stop in time.
    ///
    /// Every handle shares the controller: afterwards admin commands fail with
    /// [`Error::ControllerNeedsReset`] (and I/O queue pairs still alive cannot delete
    /// their queues: one with commands outstanding leaks its memory; drop them first).
    /// After a failed shutdown
    /// the admin queue memory is leaked when the controller is dropped (the device may
    /// still access it). [`Controller::reset`] brings the controller back.
    ///
    /// Dropping the last handle without calling this shuts down too, but can only log a
    /// failure.
    pub fn shutdown(self) -> Result<()> {
        self.inner.shutdown()
    }

    /// Resets the controller, the way out of [`Error::ControllerNeedsReset`],
    /// [`Error::ControllerFatal`] and [`Error::ControllerNotReady`]: disables it
    /// (CC.EN=0) and waits, bounded by CAP.TO, for CSTS.RDY=0, after which it no longer
    /// touches any memory (so the buffers of timed-out commands are released); then sets
    /// the admin queue up afresh, enables the controller, negotiates the number of I/O
    /// queues again and checks that the namespaces kept their geometry.
    ///
    /// Every I/O queue pair created before the reset is invalid afterwards: its queues
    /// no longer exist, its commands fail with [`Error::QueueInvalidated`], and dropping
    /// it frees its memory without sending anything. Create new ones.
    ///
    /// If the controller does not reach CSTS.RDY=0 the error is returned and the admin
    /// queue stays unusable (its memory is leaked on drop); a reset can be tried again.
    pub fn reset(&self) -> Result<()> {
        let i = &self.inner;
        let t = &*i.transport;
        // Lock order: epoch, then admin (as queue pairs creating or deleting queues).
        let mut epoch = i.epoch.write();
        let mut admin = i.admin.lock();
        let ready_timeout = i.ready_timeout();
        if let Err(e) = disable(t, ready_timeout) {
            tracing::warn!(device = %t.describe(), "reset: {e}");
            admin.dead = Some(format!("a reset that failed ({e})"));
            return Err(e);
        }
        // CSTS.RDY=0: the controller has stopped and every I/O queue is gone. Queue pairs
        // of the old epoch may free their memory; their queue ids are free again.
        *epoch = epoch.wrapping_add(1);
        i.qids.lock().fill(false);
        admin.may_dma = false;
        admin.dead = None;
        admin.shutdown = None;
        let r = Self::bring_back(i, t, &mut admin, ready_timeout);
        if let Err(e) = &r {
            tracing::warn!(device = %t.describe(), "reset: {e}");
            if admin.dead.is_none() {
                admin.dead = Some(format!("a reset that failed ({e})"));
            }
            // Enabled halfway or with a command outstanding: assume the worst.
            admin.may_dma = true;
        }
        r
    }

    /// After the disable of a reset: enable, negotiate queues, check namespaces.
    fn bring_back(
        i: &Inner,
        t: &dyn Transport,
        admin: &mut AdminQueue,
        ready_timeout: Duration,
    ) -> Result<()> {
        admin.enable(t, ready_timeout)?;
        let stride = i.cap.doorbell_stride();
        let timeout = i.options.admin_timeout;
        let granted = admin.negotiate_queues(t, stride, timeout, i.options.io_queue_pairs)?;
        if granted < i.granted {
            return Err(Error::Protocol(format!(
                "after a reset the controller grants {granted} I/O queue pair(s), fewer \
                 than the {} it granted at bring-up",
                i.granted
            )));
        }
        for ns in &i.namespaces {
            let now = admin.identify_namespace(t, stride, timeout, ns.nsid)?;
            let same = now
                .as_ref()
                .is_some_and(|n| n.blocks == ns.blocks && n.block_size == ns.block_size);
            if !same {
                return Err(Error::Protocol(format!(
                    "after a reset namespace {} reports {}, not the {} blocks of {} bytes \
                     it had: bring the controller up again",
                    ns.nsid,
                    now.map_or("nothing (inactive)".to_string(), |n| format!(
                        "{} blocks of {} bytes",
                        n.blocks, n.block_size
                    )),
                    ns.blocks,
                    ns.block_size
                )));
            }
        }
        Ok(())
    }

    /// The reset epoch (see [`Inner::epoch`]).
    pub(crate) fn epoch(&self) -> u64 {
        *self.inner.epoch.read()
    }
    /// CAP.
    pub fn cap(&self) -> Cap {
        self.inner.cap
    }
    /// Identify Controller data.
    pub fn identify(&self) -> &IdentifyController {
        &self.inner.identify
    }
    /// Active namespaces.
    pub fn namespaces(&self) -> &[Namespace] {
        &self.inner.namespaces
    }
    /// The namespace `nsid`.
    pub fn namespace(&self, nsid: u32) -> Result<Namespace> {
        self.inner
            .namespaces
            .iter()
            .find(|n| n.nsid == nsid)
            .cloned()
            .ok_or_else(|| Error::NoSuchNamespace {
                nsid,
                active: self.inner.namespaces.iter().map(|n| n.nsid).collect(),
            })
    }
    /// Largest transfer in one command, in bytes.
    pub fn max_transfer_bytes(&self) -> usize {
        self.inner.max_transfer
    }
    /// Largest I/O queue, in entries (CAP.MQES + 1, at most 65536 but our rings use u16 so
    /// at most 32768 here).
    pub fn max_queue_entries(&self) -> u32 {
        self.inner.cap.max_queue_entries().min(32768)
    }
    /// I/O queue pairs granted by the controller.
    pub fn io_queue_pairs(&self) -> u16 {
        self.inner.granted
    }
    /// A summary for display.
    pub fn info(&self) -> ControllerInfo {
        ControllerInfo {
            device: self.inner.transport.describe(),
            version: self.inner.version,
            identify: self.inner.identify.clone(),
            max_queue_entries: self.max_queue_entries(),
            doorbell_stride: self.inner.cap.doorbell_stride(),
            max_transfer_bytes: self.inner.max_transfer,
            io_queue_pairs: self.inner.granted,
            ready_timeout_ms: self.inner.cap.timeout_ms(),
            namespaces: self.inner.namespaces.clone(),
        }
    }

    /// Runs an admin command as given (any opcode, any PRPs) and returns its completion.
    /// A failure status is an error.
    ///
    /// # Safety
    /// The command is sent as is: its PRPs, queue base addresses or any other bus address
    /// it carries make the controller read or write that memory, and commands such as
    /// Format NVM, Sanitize or Firmware Commit change the device. The caller must make
    /// sure every bus address in `sqe` names memory mapped for this controller that
    /// stays valid (and is not otherwise used) until the command completes, or for as
    /// long as the object it creates (e.g. a queue) exists; and that the command does
    /// not break the driver's own use of the controller (e.g. deleting queues this
    /// driver owns).
    pub unsafe fn admin_command(&self, sqe: Sqe) -> Result<Cqe> {
        self.admin(sqe)
    }

    /// Runs an admin command built by this crate (no PRPs to caller memory).
    fn admin(&self, sqe: Sqe) -> Result<Cqe> {
        let i = &self.inner;
        i.admin.lock().command(
            &*i.transport,
            i.cap.doorbell_stride(),
            i.options.admin_timeout,
            sqe,
            false,
        )
    }

    /// Reads the Error Information log page (newest first; empty entries dropped).
    pub fn error_log(&self) -> Result<Vec<ErrorLogEntry>> {
        let bytes = self.log_page(log_id::ERROR, PAGE_SIZE)?;
        Ok(bytes
            .chunks_exact(ERROR_LOG_ENTRY_SIZE)
            .map(|c| ErrorLogEntry::from_bytes(c.try_into().unwrap()))
            .filter(|e| e.error_count != 0)
            .collect())
    }

    /// Reads the SMART / Health Information log page.
    pub fn smart_log(&self) -> Result<SmartLog> {
        let bytes = self.log_page(log_id::SMART, SMART_LOG_SIZE)?;
        Ok(SmartLog::from_bytes(
            bytes[..SMART_LOG_SIZE].try_into().unwrap(),
        ))
    }

    fn log_page(&self, lid: u8, len: usize) -> Result<Vec<u8>> {
        let i = &self.inner;
        let mut admin = i.admin.lock();
        let sqe = Sqe::get_log_page(lid, 0xFFFF_FFFF, len as u32, 0, 0);
        admin.command(
            &*i.transport,
            i.cap.doorbell_stride(),
            i.options.admin_timeout,
            sqe,
            true,
        )?;
        Ok(admin.scratch.as_slice()[..len].to_vec())
    }

    /// Creates an I/O queue pair of `depth` entries in host memory, for CPU I/O.
    pub fn create_io_queue_pair(&self, depth: u32) -> Result<IoQueuePair> {
        IoQueuePair::new(self.clone(), depth)
    }

    /// Creates an I/O CQ and SQ at caller-provided bus addresses (e.g. GPU memory) and
    /// returns their ids and doorbell offsets.
    ///
    /// ```compile_fail
    /// # fn f(ctrl: &bam_nvme::Controller) {
    /// // Points the device at arbitrary bus addresses: only in an unsafe block.
    /// let _ = ctrl.create_raw_queue_pair(0x1000, 0x2000, 64);
    /// # }
    /// ```
    ///
    /// # Safety
    /// `sq_bus` must be the bus address of `entries * 64` bytes and `cq_bus` of
    /// `entries * 16` bytes of memory mapped for DMA by this controller, page aligned,
    /// used for nothing else, and kept mapped and alive until
    /// [`Controller::delete_raw_queue_pair`] has returned for the pair (or the
    /// controller is reset): the controller reads commands from the first and writes
    /// completions into the second at any time meanwhile.
    pub unsafe fn create_raw_queue_pair(
        &self,
        sq_bus: u64,
        cq_bus: u64,
        entries: u32,
    ) -> Result<RawQueuePair> {
        self.check_depth(entries)?;
        let qid = self.alloc_qid()?;
        // SAFETY: the caller guarantees the memory at sq_bus and cq_bus (this function's
        // contract, which is the same as create_queues').
        match unsafe { self.create_queues(qid, sq_bus, cq_bus, entries as u16) } {
            Ok(()) => {
                let stride = self.inner.cap.doorbell_stride();
                Ok(RawQueuePair {
                    qid,
                    entries: entries as u16,
                    sq_doorbell: doorbell_offset(qid, false, stride),
                    cq_doorbell: doorbell_offset(qid, true, stride),
                })
            }
            Err(e) => {
                self.free_qid(qid);
                Err(e)
            }
        }
    }

    /// Deletes a queue pair made by [`Controller::create_raw_queue_pair`].
    pub fn delete_raw_queue_pair(&self, pair: RawQueuePair) -> Result<()> {
        let r = self.delete_queues(pair.qid);
        self.free_qid(pair.qid);
        r
    }

    /// Deletes the SQ and the CQ of a queue pair made by
    /// [`Controller::create_raw_queue_pair`] and keeps its queue id for
    /// [`Controller::recreate_raw_queue_pair`]: the recovery of a queue pair that failed.
    /// When this returns Ok the controller has confirmed both deletions, so no command of
    /// the pair is in its hands any more (Delete I/O SQ aborts the commands still queued)
    /// and it neither reads the SQ nor writes the CQ again. On an error the caller must
    /// assume it still may.
    pub fn delete_raw_queue_pair_for_reuse(&self, pair: RawQueuePair) -> Result<()> {
        self.delete_queues(pair.qid)
    }

    /// Creates again, empty (head and tail 0, phase 1), a queue pair that
    /// [`Controller::delete_raw_queue_pair_for_reuse`] deleted: the same queue id, so the
    /// same doorbells. The caller zeroes the CQ memory before (a CQE left from before
    /// would look posted to a reaper of the new queue's second lap).
    ///
    /// # Safety
    /// As [`Controller::create_raw_queue_pair`].
    pub unsafe fn recreate_raw_queue_pair(
        &self,
        pair: RawQueuePair,
        sq_bus: u64,
        cq_bus: u64,
    ) -> Result<()> {
        // SAFETY: the caller's contract (this function's), which is create_queues'.
        unsafe { self.create_queues(pair.qid, sq_bus, cq_bus, pair.entries) }
    }

    pub(crate) fn check_depth(&self, depth: u32) -> Result<()> {
        let max = self.max_queue_entries();
        if depth < 2 || depth > max {
            return Err(Error::InvalidQueueDepth { depth, max });
        }
        Ok(())
    }

    pub(crate) fn alloc_qid(&self) -> Result<u16> {
        let mut q = self.inner.qids.lock();
        match (1..q.len()).find(|&i| !q[i]) {
            Some(i) => {
                q[i] = true;
                Ok(i as u16)
            }
            None => Err(Error::TooManyQueues {
                requested: q.len(),
                granted: self.inner.granted as usize,
            }),
        }
    }

    pub(crate) fn free_qid(&self, qid: u16) {
        self.inner.qids.lock()[qid as usize] = false;
    }

    /// Creates I/O CQ and SQ `qid`.
    ///
    /// # Safety
    /// As [`Controller::create_raw_queue_pair`]: the memory at `sq_bus` and `cq_bus`
    /// (`entries` SQEs and CQEs) is DMA-mapped for this controller and outlives the
    /// queues.
    pub(crate) unsafe fn create_queues(
        &self,
        qid: u16,
        sq_bus: u64,
        cq_bus: u64,
        entries: u16,
    ) -> Result<()> {
        self.admin(Sqe::create_io_cq(qid, entries, cq_bus))?;
        if let Err(e) = self.admin(Sqe::create_io_sq(qid, entries, sq_bus, qid)) {
            let _ = self.admin(Sqe::delete_io_cq(qid));
            return Err(e);
        }
        Ok(())
    }

    pub(crate) fn delete_queues(&self, qid: u16) -> Result<()> {
        let sq = self.admin(Sqe::delete_io_sq(qid));
        let cq = self.admin(Sqe::delete_io_cq(qid));
        sq.and(cq).map(|_| ())
    }
}

/// An I/O queue pair created at caller-provided memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawQueuePair {
    /// Queue id (SQ and CQ share it).
    pub qid: u16,
    /// Entries in each queue.
    pub entries: u16,
    /// Offset of the SQ tail doorbell in BAR0.
    pub sq_doorbell: usize,
    /// Offset of the CQ head doorbell in BAR0.
    pub cq_doorbell: usize,
}

impl AdminQueue {
    /// Identifies namespace `nsid` and checks its geometry. `None` if it is inactive.
    fn identify_namespace(
        &mut self,
        t: &dyn Transport,
        stride: usize,
        timeout: Duration,
        nsid: u32,
    ) -> Result<Option<Namespace>> {
        self.command(
            t,
            stride,
            timeout,
            Sqe::identify(cns::NAMESPACE, nsid, 0),
            true,
        )?;
        let id = IdentifyNamespace::from_bytes(self.scratch_page());
        let Some(fmt) = id.current_format() else {
            return Err(Error::Protocol(format!(
                "namespace {nsid} reports LBA format {} of {}",
                id.format_index(),
                id.lba_formats.len()
            )));
        };
        if id.nsze == 0 {
            return Ok(None); // inactive
        }
        // LBADS below 9 (512 bytes) is invalid per the specification; above 16 this
        // driver (and every real device) has no use for it. Checked before any shift.
        if !(9..=16).contains(&fmt.lba_data_size_log2) {
            return Err(Error::Protocol(format!(
                "namespace {nsid} reports LBA data size 2^{} bytes (LBADS must be 9..=16)",
                fmt.lba_data_size_log2
            )));
        }
        let block_size = 1u32 << fmt.lba_data_size_log2;
        if id.nsze.checked_mul(block_size as u64).is_none() {
            return Err(Error::Protocol(format!(
                "namespace {nsid} reports {} blocks of {block_size} bytes, more bytes \
                 than 64 bits hold",
                id.nsze
            )));
        }
        Ok(Some(Namespace {
            nsid,
            blocks: id.nsze,
            block_size,
            identify: id,
        }))
    }

    /// Set Features (Number of Queues): returns the I/O queue pairs granted (at least 1,
    /// at most what was asked for).
    fn negotiate_queues(
        &mut self,
        t: &dyn Transport,
        stride: usize,
        timeout: Duration,
        io_queue_pairs: u16,
    ) -> Result<u16> {
        let want = io_queue_pairs.clamp(1, 65534);
        let cqe = self.command(
            t,
            stride,
            timeout,
            Sqe::set_number_of_queues(want, want),
            false,
        )?;
        // NSQA/NCQA are 0's based: 0xFFFF would mean 65536, one more than any queue id
        // allows; computed in u32 and capped by what was asked for (at most 65534).
        let nsq = (cqe.dw0 & 0xFFFF) + 1;
        let ncq = (cqe.dw0 >> 16) + 1;
        Ok(nsq.min(ncq).min(want as u32) as u16)
    }

    /// Points the controller at this admin queue (rings empty, completion queue zeroed)
    /// and enables it. The controller must be disabled (CSTS.RDY=0).
    fn enable(&mut self, t: &dyn Transport, ready_timeout: Duration) -> Result<()> {
        let entries = self.sq_ring.size();
        self.sq.as_mut_slice().fill(0);
        self.cq.as_mut_slice().fill(0);
        self.sq_ring = SubmissionRing::new(entries);
        self.cq_ring = CompletionRing::new(entries);
        // SAFETY: ASQ/ACQ name this queue's own DMA buffers of `entries` SQEs and CQEs,
        // which live as long as the controller may use them (freed in Drop only once it
        // cannot, leaked otherwise).
        unsafe {
            t.write32(offset::AQA, Aqa::new(entries, entries).0);
            t.write64(offset::ASQ, self.sq.bus_addr(0));
            t.write64(offset::ACQ, self.cq.bus_addr(0));
            t.write32(offset::CC, Cc::standard().0);
            t.write32(offset::CC, Cc::standard().with_enabled(true).0);
        }
        wait_until(
            t,
            ready_timeout,
            "the controller to become ready (CSTS.RDY=1)",
            true,
            |s| s.ready(),
        )?;
        Ok(())
    }

    fn scratch_page(&self) -> &[u8; IDENTIFY_SIZE] {
        self.scratch.as_slice()[..IDENTIFY_SIZE].try_into().unwrap()
    }

    /// Submits one admin command and waits for its completion. With `scratch`, PRP1
    /// points at the scratch page. After a timeout or a protocol violation the queue is
    /// dead: this and every later command fails with [`Error::ControllerNeedsReset`].
    fn command(
        &mut self,
        t: &dyn Transport,
        stride: usize,
        timeout: Duration,
        sqe: Sqe,
        scratch: bool,
    ) -> Result<Cqe> {
        let name = AdminOpcode::from_u8(sqe.opcode()).map_or("admin command", |o| o.name());
        if let Some(reason) = &self.dead {
            return Err(Error::ControllerNeedsReset {
                reason: reason.clone(),
            });
        }
        let r = self.command_inner(t, stride, timeout, sqe, scratch, name);
        if let Err(e) = &r {
            if !matches!(e, Error::Command { .. }) {
                // A timeout (the command stays outstanding and may still transfer into
                // the scratch page or complete later), a dead controller or a protocol
                // violation: the queue's state can no longer be trusted.
                tracing::warn!("admin queue unusable: {e}");
                self.dead = Some(e.to_string());
                self.may_dma = true;
            }
        }
        r
    }

    fn command_inner(
        &mut self,
        t: &dyn Transport,
        stride: usize,
        timeout: Duration,
        mut sqe: Sqe,
        scratch: bool,
        name: &'static str,
    ) -> Result<Cqe> {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe.set_cid(cid);
        if scratch {
            sqe.prp1 = self.scratch.bus_addr(0);
            sqe.prp2 = 0;
        }
        let slot = self.sq_ring.push().ok_or_else(|| {
            Error::Protocol("admin submission queue full with no command outstanding".into())
        })?;
        self.sq.write_volatile(slot as usize * 64, sqe);
        // Entry stores before the doorbell store (MMIO writes are ordered after normal
        // writes on x86; the fence keeps the compiler from reordering them).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: the admin SQ tail doorbell: the entries up to the tail are this
        // command (whose PRPs name the scratch page or memory the caller vouched for)
        // and earlier ones the controller has consumed.
        unsafe {
            t.write32(
                doorbell_offset(0, false, stride),
                self.sq_ring.tail() as u32,
            )
        };

        let start = Instant::now();
        let mut polls = 0u32;
        let cqe = loop {
            let cqe: Cqe = self.cq.read_volatile(self.cq_ring.head() as usize * 16);
            if self.cq_ring.is_new(&cqe) {
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                break self
                    .cq
                    .read_volatile::<Cqe>(self.cq_ring.head() as usize * 16);
            }
            polls += 1;
            if polls.is_multiple_of(64) {
                check_running(t, &format!("during {name}"))?;
                if start.elapsed() > timeout {
                    return Err(Error::Timeout {
                        what: format!("completion of {name} (cid {cid})"),
                        after: timeout,
                    });
                }
                std::thread::yield_now();
            }
        };
        self.cq_ring.advance();
        // SAFETY: the admin CQ head doorbell, moved past the entry just consumed.
        unsafe { t.write32(doorbell_offset(0, true, stride), self.cq_ring.head() as u32) };
        if !self.sq_ring.update_head(cqe.sq_head) {
            return Err(Error::Protocol(format!(
                "admin completion reports SQ head {} outside the queue",
                cqe.sq_head
            )));
        }
        if cqe.cid != cid {
            return Err(Error::Protocol(format!(
                "admin completion for cid {} while waiting for {cid}",
                cqe.cid
            )));
        }
        let status = cqe.status();
        if !status.is_success() {
            return Err(Error::Command {
                command: name,
                qid: 0,
                cid,
                status,
            });
        }
        Ok(cqe)
    }
}

impl Inner {
    fn ready_timeout(&self) -> Duration {
        ready_timeout(self.cap)
    }

    /// Orderly shutdown: CC.SHN = normal, then a bounded wait for SHST = complete with
    /// CSTS.CFS checked, then CC.EN = 0 and a bounded wait for CSTS.RDY = 0. Done once; a
    /// second call returns the first one's result.
    fn shutdown(&self) -> Result<()> {
        let t = &*self.transport;
        let mut admin = self.admin.lock();
        if let Some(r) = &admin.shutdown {
            return r
                .clone()
                .map_err(|during| Error::ControllerFatal { during });
        }
        let r = Self::shutdown_now(t, self.ready_timeout());
        admin.shutdown = Some(
            r.as_ref()
                .map(|_| ())
                .map_err(|e| format!("at shutdown ({e})")),
        );
        if admin.dead.is_none() {
            admin.dead = Some("the controller was shut down".into());
        }
        if let Err(e) = &r {
            // The controller may still process commands and access the admin queues.
            admin.may_dma = true;
            tracing::warn!(device = %t.describe(), "shutdown failed: {e}");
        }
        r
    }

    fn shutdown_now(t: &dyn Transport, timeout: Duration) -> Result<()> {
        let cc = Cc(t.read32(offset::CC));
        if cc.0 == u32::MAX {
            check_alive(t, "at shutdown")?;
        }
        if !cc.enabled() {
            return Ok(());
        }
        // SAFETY: CC.SHN asks the controller to shut down; it points it at no memory.
        unsafe { t.write32(offset::CC, cc.with_shn(ShutdownNotification::Normal).0) };
        let csts = wait_until(t, timeout, "shutdown to complete (CSTS.SHST)", true, |s| {
            s.shst() == SHST_COMPLETE
        })?;
        // SHST = complete with CFS set: the shutdown did not complete cleanly (e.g. the
        // data could not be made durable). wait_until returns as soon as SHST says
        // complete, so check CFS on that same value.
        if csts.fatal() {
            return Err(Error::ControllerFatal {
                during: "at shutdown (CSTS.SHST=complete with CSTS.CFS=1)".into(),
            });
        }
        // Then disable it (CC.EN=0, bounded wait for CSTS.RDY=0): a disabled controller
        // touches no memory, so what was mapped for it can be released at once (the
        // kernel module defers releases while CC.EN or CSTS.RDY is set and no strict
        // IOMMU protects the memory).
        disable(t, timeout)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Without an explicit Controller::shutdown: shut down now, and only log a failure.
        if let Err(e) = self.shutdown() {
            tracing::warn!(device = %self.transport.describe(), "shutdown on drop: {e}");
        }
        // The admin queue memory is freed (or leaked) by AdminQueue's Drop.
    }
}

impl Drop for AdminQueue {
    fn drop(&mut self) {
        if self.may_dma {
            // Deliberate leak: a command may still be outstanding (it timed out or the
            // controller broke the protocol) or the shutdown failed, and no reset saw
            // CSTS.RDY=0 since; the controller may still read the queues or write the
            // completion queue and the scratch page. Freeing them would let that DMA land
            // in memory that belongs to someone else.
            tracing::warn!(
                "leaking the admin queue memory ({} bytes): the controller may still access it",
                self.sq.len() + self.cq.len() + self.scratch.len()
            );
            return;
        }
        // SAFETY: the controller can no longer access these buffers (nothing is
        // outstanding, or it was disabled and reported CSTS.RDY=0, or it is shut down);
        // they are dropped once, here, and not used again.
        unsafe {
            ManuallyDrop::drop(&mut self.sq);
            ManuallyDrop::drop(&mut self.cq);
            ManuallyDrop::drop(&mut self.scratch);
        }
    }
}
