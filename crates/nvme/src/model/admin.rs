//! Admin command execution in the controller model.

use super::queues::{Cq, Outcome, Sq};
use super::{ControllerModel, RegionKind};
use crate::spec::command::{cns, feature, log_id};
use crate::spec::identify::{self, IdentifyController, IdentifyNamespace, LbaFormat};
use crate::spec::log::{SmartLog, ERROR_LOG_ENTRY_SIZE, SMART_LOG_SIZE};
use crate::spec::status::{CommandSpecificStatus as Cs, GenericStatus as G};
use crate::spec::{AdminOpcode, Sqe, Status};
use crate::{prp, spec::PAGE_SIZE};
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Abort Command Limit and Asynchronous Event Request Limit the model reports (0-based).
const ACL: u8 = 3;
const AERL: u8 = 3;

impl ControllerModel {
    pub(super) fn execute_admin(&self, sqe: &Sqe) -> Outcome {
        if sqe.fuse() != 0 || sqe.psdt() != 0 {
            return Outcome::err(G::InvalidField);
        }
        let Some(op) = AdminOpcode::from_u8(sqe.opcode()) else {
            return Outcome::err(G::InvalidOpcode);
        };
        match op {
            AdminOpcode::Identify => self.identify(sqe),
            AdminOpcode::CreateIoCq => self.create_io_cq(sqe),
            AdminOpcode::CreateIoSq => self.create_io_sq(sqe),
            AdminOpcode::DeleteIoSq => self.delete_io_sq(sqe),
            AdminOpcode::DeleteIoCq => self.delete_io_cq(sqe),
            AdminOpcode::SetFeatures => self.set_features(sqe),
            AdminOpcode::GetFeatures => self.get_features(sqe),
            AdminOpcode::GetLogPage => self.get_log_page(sqe),
            // Commands complete inline, so there is never anything left to abort:
            // DW0 bit 0 set means "command not aborted".
            AdminOpcode::Abort => Outcome::Complete(Status::SUCCESS, 1),
            AdminOpcode::AsyncEventRequest => {
                let mut st = self.state.lock();
                if st.outstanding_aers > AERL as u32 {
                    return Outcome::err(Cs::AsyncEventRequestLimitExceeded);
                }
                st.outstanding_aers += 1;
                Outcome::Hold
            }
        }
    }

    /// Moves `data` to the host memory the command's PRPs describe.
    pub(super) fn dma_to_host(&self, sqe: &Sqe, data: &[u8]) -> Result<(), G> {
        for (addr, off, len) in self.prp_runs(sqe, data.len())? {
            self.dma_run(addr, off, len, &mut |a, o, l| {
                self.dma.write(a, &data[o..o + l])
            })?;
        }
        Ok(())
    }

    /// Fetches `len` bytes from the host memory the command's PRPs describe.
    pub(super) fn dma_from_host(&self, sqe: &Sqe, len: usize) -> Result<Vec<u8>, G> {
        let mut data = vec![0u8; len];
        for (addr, off, l) in self.prp_runs(sqe, len)? {
            self.dma_run(addr, off, l, &mut |a, o, n| {
                self.dma.read(a, &mut data[o..o + n])
            })?;
        }
        Ok(data)
    }

    /// The command's PRP segments as (bus address, offset in the transfer, length), with
    /// segments that continue one another merged into one run: a DMA engine across PCIe
    /// (the host-side controller's CUDA copies) pays per access, as a real controller
    /// bursts contiguous pages. The whole PRP structure is checked before any data moves.
    fn prp_runs(&self, sqe: &Sqe, len: usize) -> Result<Vec<(u64, usize, usize)>, G> {
        let mut runs: Vec<(u64, usize, usize)> = Vec::new();
        let mut done = 0usize;
        prp::walk(
            sqe.prp1,
            sqe.prp2,
            len,
            PAGE_SIZE,
            |addr, out| self.read_prp_list(addr, out),
            |addr, l| {
                match runs.last_mut() {
                    Some(r) if r.0.checked_add(r.2 as u64) == Some(addr) => r.2 += l,
                    _ => runs.push((addr, done, l)),
                }
                done += l;
                Ok(())
            },
        )?;
        Ok(runs)
    }

    /// One merged run; if it spans two registered regions, page by page (so that merging
    /// never changes which transfers succeed).
    fn dma_run(
        &self,
        addr: u64,
        off: usize,
        len: usize,
        op: &mut dyn FnMut(u64, usize, usize) -> Result<(), G>,
    ) -> Result<(), G> {
        if op(addr, off, len).is_ok() {
            return Ok(());
        }
        let mut done = 0usize;
        while done < len {
            let a = addr + done as u64;
            let l = (PAGE_SIZE - (a as usize % PAGE_SIZE)).min(len - done);
            op(a, off + done, l)?;
            done += l;
        }
        Ok(())
    }

    fn read_prp_list(&self, addr: u64, out: &mut [u64]) -> bool {
        let mut raw = vec![0u8; out.len() * 8];
        if self.dma.read(addr, &mut raw).is_err() {
            return false;
        }
        for (o, c) in out.iter_mut().zip(raw.chunks_exact(8)) {
            *o = u64::from_le_bytes(c.try_into().unwrap());
        }
        true
    }

    fn complete_transfer(&self, sqe: &Sqe, data: &[u8]) -> Outcome {
        match self.dma_to_host(sqe, data) {
            Ok(()) => Outcome::ok(),
            Err(s) => Outcome::err(s),
        }
    }

    pub(super) fn identify_controller(&self) -> IdentifyController {
        IdentifyController {
            vid: 0,
            ssvid: 0,
            serial: self.cfg.serial.clone(),
            model: self.cfg.model_number.clone(),
            firmware: env!("CARGO_PKG_VERSION").into(),
            mdts: self.cfg.mdts,
            cntlid: 1,
            ver: crate::spec::Version::new(1, 4, 0).0,
            oacs: 0,
            acl: ACL,
            aerl: AERL,
            lpa: 0,
            elpe: 63,
            sqes: 0x66,
            cqes: 0x44,
            maxcmd: 0,
            nn: 1,
            oncs: identify::ONCS_DSM | identify::ONCS_WRITE_ZEROES,
            vwc: self.medium.volatile_cache() as u8,
            sgls: 0,
            subnqn: format!("nqn.2026-01.io.bam:model:{}", self.cfg.serial),
        }
    }

    fn identify_namespace(&self) -> IdentifyNamespace {
        IdentifyNamespace {
            nsze: self.blocks,
            ncap: self.blocks,
            nuse: self.blocks,
            nsfeat: 0,
            flbas: 0,
            lba_formats: vec![LbaFormat {
                metadata_size: 0,
                lba_data_size_log2: self.cfg.lba_size.trailing_zeros() as u8,
                relative_performance: 0,
            }],
        }
    }

    fn identify(&self, sqe: &Sqe) -> Outcome {
        let data = match (sqe.cdw10 & 0xFF) as u8 {
            cns::CONTROLLER => self.identify_controller().to_bytes(),
            cns::NAMESPACE => {
                if sqe.nsid != 1 {
                    return Outcome::err(G::InvalidNamespaceOrFormat);
                }
                self.identify_namespace().to_bytes()
            }
            cns::ACTIVE_NAMESPACES => {
                if sqe.nsid >= 0xFFFF_FFFE {
                    return Outcome::err(G::InvalidNamespaceOrFormat);
                }
                identify::namespace_list_bytes(if sqe.nsid < 1 { &[1] } else { &[] })
            }
            _ => return Outcome::err(G::InvalidField),
        };
        self.complete_transfer(sqe, &data[..])
    }

    fn check_queue_create(
        &self,
        sqe: &Sqe,
        entry_size: u64,
        grant: u16,
    ) -> Result<(u16, u16), Status> {
        let qid = sqe.cdw10 as u16;
        let entries = (sqe.cdw10 >> 16) + 1;
        if qid == 0 || qid > grant {
            return Err(Cs::InvalidQueueIdentifier.into());
        }
        if entries < 2 || entries > self.cap.max_queue_entries() {
            return Err(Cs::InvalidQueueSize.into());
        }
        if sqe.cdw11 & 1 == 0 {
            return Err(G::InvalidField.into()); // CAP.CQR: queues must be contiguous
        }
        if !sqe.prp1.is_multiple_of(PAGE_SIZE as u64) {
            return Err(G::InvalidField.into());
        }
        let cc = self.regs.lock().cc;
        let want = if entry_size == 64 {
            cc.iosqes()
        } else {
            cc.iocqes()
        };
        if 1u64 << want != entry_size {
            return Err(G::InvalidField.into());
        }
        let bytes = entries as u64 * entry_size;
        match self.dma.lookup(sqe.prp1, bytes) {
            Some(RegionKind::Host(_)) => {}
            Some(RegionKind::External)
                if self.cfg.external_io_queues || self.dma.external_reachable() => {}
            _ => return Err(G::DataTransferError.into()),
        }
        Ok((qid, entries as u16))
    }

    fn create_io_cq(&self, sqe: &Sqe) -> Outcome {
        let grant = self.state.lock().granted.1;
        let (qid, entries) = match self.check_queue_create(sqe, 16, grant) {
            Ok(v) => v,
            Err(s) => return Outcome::err(s),
        };
        if sqe.cdw11 & 2 != 0 && (sqe.cdw11 >> 16) != 0 {
            return Outcome::err(Cs::InvalidInterruptVector);
        }
        let mut q = self.queues.write();
        if q.cqs.contains_key(&qid) {
            return Outcome::err(Cs::InvalidQueueIdentifier);
        }
        q.cqs
            .insert(qid, Arc::new(Mutex::new(Cq::new(sqe.prp1, entries))));
        self.state.lock().any_io_queue_created = true;
        Outcome::ok()
    }

    fn create_io_sq(&self, sqe: &Sqe) -> Outcome {
        let grant = self.state.lock().granted.0;
        let (qid, entries) = match self.check_queue_create(sqe, 64, grant) {
            Ok(v) => v,
            Err(s) => return Outcome::err(s),
        };
        let cqid = (sqe.cdw11 >> 16) as u16;
        let mut q = self.queues.write();
        if q.sqs.contains_key(&qid) {
            return Outcome::err(Cs::InvalidQueueIdentifier);
        }
        let Some(cq) = q.cqs.get(&cqid).filter(|_| cqid != 0) else {
            return Outcome::err(Cs::CompletionQueueInvalid);
        };
        cq.lock().sqs.push(qid);
        q.sqs.insert(
            qid,
            Arc::new(Mutex::new(Sq::new(qid, sqe.prp1, entries, cqid))),
        );
        self.state.lock().any_io_queue_created = true;
        Outcome::ok()
    }

    fn delete_io_sq(&self, sqe: &Sqe) -> Outcome {
        let qid = sqe.cdw10 as u16;
        if qid == 0 {
            return Outcome::err(Cs::InvalidQueueIdentifier);
        }
        let Some(sq) = self.queues.write().sqs.remove(&qid) else {
            return Outcome::err(Cs::InvalidQueueIdentifier);
        };
        let mut s = sq.lock();
        self.abort_held(&mut s, G::AbortedSqDeletion.into());
        if let Some(cq) = self.queues.read().cqs.get(&s.cqid) {
            cq.lock().sqs.retain(|&id| id != qid);
        }
        Outcome::ok()
    }

    fn delete_io_cq(&self, sqe: &Sqe) -> Outcome {
        let qid = sqe.cdw10 as u16;
        if qid == 0 {
            return Outcome::err(Cs::InvalidQueueIdentifier);
        }
        let mut q = self.queues.write();
        match q.cqs.get(&qid) {
            None => Outcome::err(Cs::InvalidQueueIdentifier),
            Some(cq) if !cq.lock().sqs.is_empty() => Outcome::err(Cs::InvalidQueueDeletion),
            Some(_) => {
                q.cqs.remove(&qid);
                Outcome::ok()
            }
        }
    }

    fn set_features(&self, sqe: &Sqe) -> Outcome {
        let mut st = self.state.lock();
        match sqe.cdw10 as u8 {
            feature::NUMBER_OF_QUEUES => {
                if st.any_io_queue_created {
                    return Outcome::err(G::CommandSequenceError);
                }
                let nsq = (sqe.cdw11 & 0xFFFF) + 1;
                let ncq = (sqe.cdw11 >> 16) + 1;
                if nsq == 0x10000 || ncq == 0x10000 {
                    return Outcome::err(G::InvalidField);
                }
                let max = self.cfg.max_io_queues as u32;
                st.granted = (nsq.min(max) as u16, ncq.min(max) as u16);
                Outcome::Complete(Status::SUCCESS, number_of_queues_dw0(st.granted))
            }
            feature::VOLATILE_WRITE_CACHE => {
                st.volatile_write_cache = sqe.cdw11 & 1 == 1;
                Outcome::ok()
            }
            feature::ARBITRATION => Outcome::ok(),
            _ => Outcome::err(G::InvalidField),
        }
    }

    fn get_features(&self, sqe: &Sqe) -> Outcome {
        let st = self.state.lock();
        match sqe.cdw10 as u8 {
            feature::NUMBER_OF_QUEUES => {
                Outcome::Complete(Status::SUCCESS, number_of_queues_dw0(st.granted))
            }
            feature::VOLATILE_WRITE_CACHE => {
                Outcome::Complete(Status::SUCCESS, st.volatile_write_cache as u32)
            }
            feature::ARBITRATION => Outcome::ok(),
            _ => Outcome::err(G::InvalidField),
        }
    }

    fn get_log_page(&self, sqe: &Sqe) -> Outcome {
        let numd = ((sqe.cdw10 >> 16) | (sqe.cdw11 & 0xFFFF) << 16) as usize + 1;
        let len = numd * 4;
        let offset = sqe.cdw12 as u64 | (sqe.cdw13 as u64) << 32;
        let page: Vec<u8> = match sqe.cdw10 as u8 {
            log_id::ERROR => {
                let st = self.state.lock();
                let mut v = vec![0u8; 64 * ERROR_LOG_ENTRY_SIZE];
                for (i, e) in st.error_log.iter().enumerate() {
                    v[i * ERROR_LOG_ENTRY_SIZE..(i + 1) * ERROR_LOG_ENTRY_SIZE]
                        .copy_from_slice(&e.to_bytes());
                }
                v
            }
            log_id::SMART => {
                let s = &self.stats;
                let st = self.state.lock();
                let units = |b: u64| (b / 512).div_ceil(1000) as u128;
                SmartLog {
                    temperature_kelvin: 273 + 35,
                    available_spare: 100,
                    data_units_read: units(s.bytes_read.load(Ordering::Relaxed)),
                    data_units_written: units(s.bytes_written.load(Ordering::Relaxed)),
                    host_read_commands: s.reads.load(Ordering::Relaxed) as u128,
                    host_write_commands: s.writes.load(Ordering::Relaxed) as u128,
                    power_cycles: 1,
                    media_errors: st
                        .error_log
                        .iter()
                        .filter(|e| e.status.media_code().is_some())
                        .count() as u128,
                    error_log_entries: st.error_count as u128,
                    ..Default::default()
                }
                .to_bytes()
                .to_vec()
            }
            _ => return Outcome::err(Cs::InvalidLogPage),
        };
        debug_assert!(page.len() >= SMART_LOG_SIZE);
        if !offset.is_multiple_of(4) || offset > page.len() as u64 {
            return Outcome::err(G::InvalidField);
        }
        let mut out = vec![0u8; len];
        let avail = &page[offset as usize..];
        let n = avail.len().min(len);
        out[..n].copy_from_slice(&avail[..n]);
        self.complete_transfer(sqe, &out)
    }
}

fn number_of_queues_dw0((nsq, ncq): (u16, u16)) -> u32 {
    (ncq as u32 - 1) << 16 | (nsq as u32 - 1)
}
