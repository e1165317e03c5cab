//! The controller's admin commands on demand: any command as given, and the log pages.

use super::Controller;
use crate::spec::command::log_id;
use crate::spec::log::{ErrorLogEntry, SmartLog, ERROR_LOG_ENTRY_SIZE, SMART_LOG_SIZE};
use crate::spec::{Cqe, Sqe, PAGE_SIZE};
use crate::Result;

impl Controller {
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
    pub(super) fn admin(&self, sqe: Sqe) -> Result<Cqe> {
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
        Ok(admin.scratch_page()[..len].to_vec())
    }
}
