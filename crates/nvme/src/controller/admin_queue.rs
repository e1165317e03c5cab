//! The admin queue: one command at a time, polled to completion, with a scratch page for
//! Identify and log page data. Memory the controller may still access is leaked on drop,
//! never freed (see "DMA memory that is deliberately leaked" in the `controller` module).

use super::namespace::Namespace;
use super::registers::{check_running, wait_until};
use crate::queue::{CompletionRing, SubmissionRing};
use crate::spec::command::cns;
use crate::spec::identify::{IdentifyNamespace, IDENTIFY_SIZE};
use crate::spec::registers::{doorbell_offset, offset};
use crate::spec::{AdminOpcode, Aqa, Cc, Cqe, Sqe};
use crate::transport::{DmaBuffer, Transport};
use crate::{Error, Result};
use std::mem::ManuallyDrop;
use std::time::{Duration, Instant};

pub(super) struct AdminQueue {
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
    /// [`Error::ControllerNeedsReset`] until `Controller::reset`.
    pub(super) dead: Option<String>,
    /// The controller may still read or write the admin queues or the scratch page on
    /// its own (a command is outstanding after a timeout or a protocol violation, or the
    /// shutdown failed): the memory is leaked on drop. Cleared by a reset that saw
    /// CSTS.RDY=0.
    pub(super) may_dma: bool,
    /// Whether a shutdown was done (its failure, if it failed).
    pub(super) shutdown: Option<std::result::Result<(), String>>,
}

impl AdminQueue {
    /// An admin queue of `entries` entries (SQ, CQ) and its scratch page, not yet given
    /// to the controller ([`AdminQueue::enable`] does).
    pub(super) fn new(t: &dyn Transport, entries: u16) -> Result<Self> {
        let sq = t.alloc_dma(entries as usize * 64)?;
        let cq = t.alloc_dma(entries as usize * 16)?;
        let scratch = t.alloc_dma(IDENTIFY_SIZE)?;
        Ok(AdminQueue {
            sq: ManuallyDrop::new(sq),
            cq: ManuallyDrop::new(cq),
            sq_ring: SubmissionRing::new(entries),
            cq_ring: CompletionRing::new(entries),
            next_cid: 0,
            scratch: ManuallyDrop::new(scratch),
            dead: None,
            may_dma: false,
            shutdown: None,
        })
    }

    /// Identifies namespace `nsid` and checks its geometry. `None` if it is inactive.
    pub(super) fn identify_namespace(
        &mut self,
        t: &dyn Transport,
        stride: usize,
        timeout: Duration,
        nsid: u32,
    ) -> Result<Option<Namespace>> {
        let page = self.identify(t, stride, timeout, cns::NAMESPACE, nsid)?;
        Namespace::from_identify(nsid, IdentifyNamespace::from_bytes(page))
    }

    /// Runs Identify with `cns` for `nsid` into the scratch page and returns the page.
    pub(super) fn identify(
        &mut self,
        t: &dyn Transport,
        stride: usize,
        timeout: Duration,
        cns: u8,
        nsid: u32,
    ) -> Result<&[u8; IDENTIFY_SIZE]> {
        self.command(t, stride, timeout, Sqe::identify(cns, nsid, 0), true)?;
        Ok(self.scratch_page())
    }

    /// Set Features (Number of Queues): returns the I/O queue pairs granted (at least 1,
    /// at most what was asked for).
    pub(super) fn negotiate_queues(
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
    pub(super) fn enable(&mut self, t: &dyn Transport, ready_timeout: Duration) -> Result<()> {
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

    pub(super) fn scratch_page(&self) -> &[u8; IDENTIFY_SIZE] {
        self.scratch.as_slice()[..IDENTIFY_SIZE].try_into().unwrap()
    }

    /// Submits one admin command and waits for its completion. With `scratch`, PRP1
    /// points at the scratch page. After a timeout or a protocol violation the queue is
    /// dead: this and every later command fails with [`Error::ControllerNeedsReset`].
    pub(super) fn command(
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
