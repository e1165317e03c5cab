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
//!
//! # Files
//! This file holds the [`Controller`] handle, its bring-up, reset and shutdown; a file
//! per job beside it: `registers` (the CC/CSTS handshakes), `admin_queue` (the admin
//! queue), `admin` (admin commands run on demand, log pages), `queues` (I/O queue ids and
//! the commands that create and delete queues, raw queue pairs) and `namespace`. The CPU
//! I/O queue pairs live in the crate's `io` module.

mod admin;
mod admin_queue;
mod namespace;
mod queues;
pub(crate) mod registers;

pub use namespace::Namespace;

use crate::spec::command::cns;
use crate::spec::identify::{self, IdentifyController};
use crate::spec::registers::offset;
use crate::spec::{Cap, Version, PAGE_SIZE};
use crate::transport::Transport;
use crate::{Error, Result};
use admin_queue::AdminQueue;
use parking_lot::{Mutex, RwLock};
use registers::{disable, ready_timeout, shutdown_now};
use std::sync::Arc;
use std::time::Duration;

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

/// The largest transfer this driver puts in one command, whatever MDTS allows: one PRP
/// list page per command covers it.
pub const DRIVER_MAX_TRANSFER: usize = 2 << 20;

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
/// queue. Create one I/O queue pair per thread for I/O
/// ([`Controller::create_io_queue_pair`]).
#[derive(Clone)]
pub struct Controller {
    pub(crate) inner: Arc<Inner>,
}

impl Controller {
    /// Brings up the controller behind `transport`.
    pub fn new(transport: Arc<dyn Transport>, options: ControllerOptions) -> Result<Self> {
        let t = &*transport;
        let cap = Cap(t.read64(offset::CAP));
        check_cap(t, cap)?;
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
        let mut admin = AdminQueue::new(t, entries)?;
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
        let page = admin.identify(t, stride, timeout, cns::CONTROLLER, 0)?;
        let identify = IdentifyController::from_bytes(page);
        let page = admin.identify(t, stride, timeout, cns::ACTIVE_NAMESPACES, 0)?;
        let nsids = identify::parse_namespace_list(page);
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
}

/// Checks that the controller behind `t` reads as present and supports what this driver
/// needs: the NVM command set, 4 KiB memory pages, queues of at least 2 entries.
fn check_cap(t: &dyn Transport, cap: Cap) -> Result<()> {
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
    Ok(())
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
        let r = shutdown_now(t, self.ready_timeout());
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
