//! NVM command set I/O execution in the controller model.

use super::queues::Outcome;
use super::ControllerModel;
use crate::spec::command::DsmRange;
use crate::spec::status::{GenericStatus as G, MediaStatus};
use crate::spec::{IoOpcode, Sqe};
use std::sync::atomic::Ordering;

impl ControllerModel {
    pub(super) fn execute_io(&self, sqe: &Sqe) -> Outcome {
        if let Some(n) = self.cfg.faults.stall_after_io_commands {
            if self.io_commands.fetch_add(1, Ordering::Relaxed) >= n {
                return Outcome::Hold;
            }
        }
        if sqe.fuse() != 0 || sqe.psdt() != 0 {
            return Outcome::err(G::InvalidField);
        }
        let Some(op) = IoOpcode::from_u8(sqe.opcode()) else {
            return Outcome::err(G::InvalidOpcode);
        };
        let all_namespaces = op == IoOpcode::Flush && sqe.nsid == 0xFFFF_FFFF;
        if sqe.nsid != 1 && !all_namespaces {
            return Outcome::err(G::InvalidNamespaceOrFormat);
        }
        // A write-protected namespace refuses every command that would change its data
        // (Deallocate included); reads and Flush go on.
        let modifies = match op {
            IoOpcode::Write | IoOpcode::WriteZeroes => true,
            IoOpcode::DatasetManagement => sqe.cdw11 & 4 != 0,
            IoOpcode::Read | IoOpcode::Flush => false,
        };
        if modifies && self.cfg.read_only {
            return Outcome::err(G::NamespaceWriteProtected);
        }
        match op {
            IoOpcode::Read | IoOpcode::Write => self.read_write(sqe, op),
            IoOpcode::Flush => match self.flush_medium() {
                Ok(()) => {
                    self.stats.flushes.fetch_add(1, Ordering::Relaxed);
                    Outcome::ok()
                }
                Err(_) => Outcome::err(MediaStatus::WriteFault),
            },
            IoOpcode::WriteZeroes => {
                let (slba, n) = (sqe.slba(), sqe.block_count() as u64);
                if !self.in_range(slba, n) {
                    return Outcome::err(G::LbaOutOfRange);
                }
                self.zero_blocks(slba, n)
            }
            IoOpcode::DatasetManagement => self.dataset_management(sqe),
        }
    }

    fn in_range(&self, slba: u64, blocks: u64) -> bool {
        slba.checked_add(blocks)
            .is_some_and(|end| end <= self.blocks)
    }

    fn media_fault(&self, slba: u64, blocks: u64) -> bool {
        self.cfg
            .faults
            .media_error_lbas
            .as_ref()
            .is_some_and(|r| slba < r.end && r.start < slba + blocks)
    }

    fn read_write(&self, sqe: &Sqe, op: IoOpcode) -> Outcome {
        let (slba, blocks) = (sqe.slba(), sqe.block_count() as u64);
        if !self.in_range(slba, blocks) {
            return Outcome::err(G::LbaOutOfRange);
        }
        let lba = self.cfg.lba_size as u64;
        let bytes = (blocks * lba) as usize;
        if self.cfg.mdts != 0 && bytes > crate::spec::PAGE_SIZE << self.cfg.mdts {
            return Outcome::err(G::InvalidField);
        }
        let offset = slba * lba;
        if op == IoOpcode::Write {
            let data = match self.dma_from_host(sqe, bytes) {
                Ok(d) => d,
                Err(s) => return Outcome::err(s),
            };
            if self.media_fault(slba, blocks) || self.medium.write_at(offset, &data).is_err() {
                return Outcome::err(MediaStatus::WriteFault);
            }
            self.stats.writes.fetch_add(1, Ordering::Relaxed);
            self.stats
                .bytes_written
                .fetch_add(bytes as u64, Ordering::Relaxed);
        } else {
            if self.media_fault(slba, blocks) {
                return Outcome::err(MediaStatus::UnrecoveredReadError);
            }
            let mut data = vec![0u8; bytes];
            if self.medium.read_at(offset, &mut data).is_err() {
                return Outcome::err(MediaStatus::UnrecoveredReadError);
            }
            if let Err(s) = self.dma_to_host(sqe, &data) {
                return Outcome::err(s);
            }
            self.stats.reads.fetch_add(1, Ordering::Relaxed);
            self.stats
                .bytes_read
                .fetch_add(bytes as u64, Ordering::Relaxed);
        }
        Outcome::ok()
    }

    fn zero_blocks(&self, slba: u64, blocks: u64) -> Outcome {
        let lba = self.cfg.lba_size as u64;
        match self.medium.zero(slba * lba, blocks * lba) {
            Ok(()) => Outcome::ok(),
            Err(_) => Outcome::err(MediaStatus::WriteFault),
        }
    }

    fn dataset_management(&self, sqe: &Sqe) -> Outcome {
        let nr = (sqe.cdw10 & 0xFF) as usize + 1;
        let raw = match self.dma_from_host(sqe, nr * 16) {
            Ok(r) => r,
            Err(s) => return Outcome::err(s),
        };
        let ranges: Vec<DsmRange> = raw
            .chunks_exact(16)
            .map(|c| DsmRange::from_bytes(c.try_into().unwrap()))
            .collect();
        if ranges
            .iter()
            .any(|r| !self.in_range(r.slba, r.blocks as u64))
        {
            return Outcome::err(G::LbaOutOfRange);
        }
        // Deallocated blocks read as zeroes in this model.
        if sqe.cdw11 & 4 != 0 {
            for r in &ranges {
                if let Outcome::Complete(s, _) = self.zero_blocks(r.slba, r.blocks as u64) {
                    if !s.is_success() {
                        return Outcome::err(s);
                    }
                }
            }
        }
        Outcome::ok()
    }
}
