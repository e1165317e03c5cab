//! A cache after a queue pair failed: its I/O layer recovered, its quarantined slots
//! given back, the write-backs that did not settle made dirty lines again.

use super::abi::*;
use super::state::tag_id;
use super::Cache;
use crate::error::Result;
use crate::io::Recovery;
use serde::Serialize;

/// What [`Cache::recover`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheRecovery {
    /// The I/O layer's recovery (queue pairs deleted and created again).
    pub io: Recovery,
    /// Quarantined slots of fills (reads that did not settle) that are empty again.
    pub slots_freed: u64,
    /// Quarantined lines whose write-back did not settle: valid and dirty in their slots
    /// again, written by the next [`Cache::flush`] (or eviction).
    pub lines_to_write: u64,
}

impl Cache<'_> {
    /// Recovers from failed queue pairs: stops the fill service, has the I/O layer delete
    /// and create its failed queue pairs again ([`crate::io::IoArray::recover`]), and, once the
    /// controllers have confirmed that no command is left in their hands, gives back the
    /// cache's quarantined slots. A slot whose read did not settle becomes empty; a line
    /// whose write-back did not settle becomes an ordinary dirty line again, with the data
    /// it had, so that the next [`Cache::flush`] retries its write. Then the fill service
    /// starts again and the cache works as before. No kernel may be using the cache.
    ///
    /// When a queue pair cannot be recovered the error says which; nothing is released
    /// and the fill service runs again on the queue pairs that work.
    ///
    /// ```no_run
    /// # fn main() -> bam::Result<()> {
    /// # let gpu = bam::Gpu::new(0)?;
    /// # let arr = "sim:ideal".parse::<bam::storage::GpuDevice>()?.open(&gpu, &bam::io::IoConfig::new())?;
    /// # let cache = bam::cache::Cache::new(arr.io(), bam::cache::CacheConfig::new(4096, 1024))?;
    /// if let Err(e) = cache.flush() {
    ///     eprintln!("flush failed: {e}");
    ///     let r = cache.recover()?; // queues back, quarantined lines dirty again
    ///     eprintln!("{} line(s) to write again", r.lines_to_write);
    ///     cache.flush()?; // retries them
    /// }
    /// # Ok(()) }
    /// ```
    pub fn recover(&self) -> Result<CacheRecovery> {
        self.inner.stop_service()?;
        let io = match self.arr.recover_queues() {
            Ok(r) => r,
            Err(e) => {
                if let Err(s) = self.inner.start_service() {
                    tracing::error!("bam cache: the fill service did not start again: {s}");
                }
                return Err(e);
            }
        };
        let released = self.release_quarantine();
        let started = self.inner.start_service();
        let (slots_freed, lines_to_write) = released?;
        started?;
        Ok(CacheRecovery {
            io,
            slots_freed,
            lines_to_write,
        })
    }

    /// Every quarantined slot back in the cache (no queue pair is failed, the service is
    /// stopped, no kernel runs): (slots emptied, lines dirty again).
    fn release_quarantine(&self) -> Result<(u64, u64)> {
        let tags = self.read_tags()?;
        let arrs = self.read_arrs()?;
        let (mut freed, mut lines) = (0, 0);
        for (s, &t) in tags.iter().enumerate() {
            if t & BAM_TAG_QUARANTINE == 0 {
                continue;
            }
            let off = self.inner.off_tags + 8 * s;
            if t & BAM_TAG_USED == 0 {
                // A fill's read: the line stayed invalid; the slot is empty again.
                self.inner.mem.write(off, &[0u64])?;
                freed += 1;
                continue;
            }
            // A write-back: the line word kept VALID, DIRTY and BUSY (quarantine_writeback
            // in cache_service.cuh); without BUSY it is a dirty line in this slot again.
            let (id, line) = (tag_id(t), t & BAM_TAG_LINE_MASK);
            let Some(a) = arrs.get(id).filter(|a| a.live != 0 && line < a.nlines) else {
                continue; // no such line: the slot stays out (never seen; kept safe)
            };
            let addr = a.words + 8 * line;
            let mut w = [0u8; 8];
            crate::cuda::read_device_beside(self.gpu(), addr, &mut w)?;
            let word = u64::from_le_bytes(w) & !BAM_LINE_BUSY;
            crate::cuda::write_device_beside(self.gpu(), addr, &word.to_le_bytes())?;
            self.inner
                .mem
                .write(off, &[t & !(BAM_TAG_LOCK | BAM_TAG_QUARANTINE)])?;
            lines += 1;
        }
        Ok((freed, lines))
    }
}
