//! Writing dirty lines back: flushes, the NVMe Flush the SSDs owe afterwards
//! ([`FlushBook`]), and the last flush before a cache goes away.

use super::abi::*;
use super::{Cache, FlushReport};
use crate::cuda::DeviceBuffer;
use crate::error::{Error, IoError, Result};
use std::time::Duration;

/// A flush kernel's outcome (`r`, and the `count` errors the device logged meanwhile) as
/// the host API reports it: [`Error::WriteBack`] (`what` says what became of the lines)
/// when lines failed to write back or, with `pinned_fail`, were skipped as pinned or busy;
/// [`Error::Io`] for other logged errors; else what was written and dropped.
pub(crate) fn flush_outcome(
    r: &FlushResult,
    count: u32,
    errors: Vec<IoError>,
    pinned_fail: bool,
    what: impl FnOnce() -> String,
) -> Result<FlushReport> {
    if r.failed > 0 || (pinned_fail && r.pinned > 0) {
        return Err(Error::WriteBack {
            what: what(),
            failed: r.failed,
            pinned: r.pinned,
            count,
            errors,
        });
    }
    if count > 0 {
        return Err(Error::Io { count, errors });
    }
    Ok(FlushReport {
        written: r.written,
        dropped: r.dropped,
    })
}

/// When the SSDs owe an NVMe Flush: the bookkeeping of [`Cache::flush`], kept apart from
/// the GPU so that it can be tested on the CPU.
///
/// A Flush is owed when lines were written back since the last *confirmed* Flush. The
/// write-back count is recorded only once the Flush is known to have succeeded
/// ([`FlushBook::confirm`]): recording it when the Flush is sent (as before) meant a
/// Flush that failed was never sent again, and the data it should have made durable
/// could stay in a volatile write cache.
#[derive(Debug, Default)]
pub(crate) struct FlushBook {
    /// The statistics' write-back count at the last confirmed Flush.
    confirmed: u64,
    /// A Flush was sent (or tried) and not confirmed yet: the write-back count it covers.
    unconfirmed: Option<u64>,
}

impl FlushBook {
    /// Whether to send a Flush now, with `written` lines written by this flush and `wb`
    /// the statistics' write-back count; if so it is recorded as sent, unconfirmed.
    pub(crate) fn begin(&mut self, written: u64, wb: u64) -> bool {
        if written == 0 && wb == self.confirmed && self.unconfirmed.is_none() {
            return false;
        }
        self.unconfirmed = Some(wb);
        true
    }

    /// The outcome of the Flush sent last (`ok`: it succeeded). A failure keeps it owed.
    pub(crate) fn confirm(&mut self, ok: bool) {
        if ok {
            if let Some(wb) = self.unconfirmed.take() {
                self.confirmed = wb;
            }
        }
    }
}

impl Cache<'_> {
    /// Waits for the cache's stream, bounded by [`CacheConfig::sync_timeout`].
    pub fn sync(&self) -> Result<()> {
        let t = self.inner.cfg.sync_timeout.unwrap_or_else(|| {
            Duration::from_nanos(self.arr.io_view().timeout_ns).saturating_mul(8)
                + Duration::from_secs(60)
        });
        self.inner.gpu.sync_timeout(&self.inner.stream, t)
    }

    pub(crate) fn flush_kernel(&self, only_id: u32, invalidate: bool) -> Result<FlushResult> {
        let mut res = DeviceBuffer::zeroed(&self.inner.gpu, std::mem::size_of::<FlushResult>())?;
        let args: (u64, u32, u32, u64) = (self.device_ptr(), only_id, invalidate as u32, res.ptr());
        let warps = self.inner.nslots.min(self.inner.gpu.sms * 32);
        // SAFETY: matches bam_cache_flush(const bam_cache_dev*, uint32_t, uint32_t,
        // bam_flush_result*); both buffers outlive the synchronisation below.
        unsafe {
            self.inner.gpu.module(crate::runtime::CACHE)?.launch(
                &self.inner.stream,
                "bam_cache_flush",
                warps.div_ceil(4),
                128,
                0,
                &args,
            )?
        };
        DeviceBuffer::keep_unless_synced(self.sync(), &mut [&mut res])?;
        let mut out = [FlushResult::default()];
        res.read(0, &mut out)?;
        self.flush_ssds(out[0].written)?;
        Ok(out[0])
    }

    /// Sends an NVMe Flush to every SSD when lines were written back since the last one
    /// that succeeded (by this flush, `written`, or by evictions: the statistics'
    /// write-back count moved, or was reset), or when an earlier Flush was not confirmed,
    /// so that closed or flushed data does not stay in a volatile write cache. Failures
    /// land in the device error log, which the callers read; [`Cache::flush`] confirms
    /// the Flush only when that log is empty ([`FlushBook`]).
    fn flush_ssds(&self, written: u64) -> Result<()> {
        let wb = self.stats()?.writebacks;
        if !self
            .inner
            .flush_book
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .begin(written, wb)
        {
            return Ok(());
        }
        let nssd = self.arr.geometry().ssds;
        let args: (u64,) = (self.device_ptr(),);
        // SAFETY: matches bam_cache_flush_ssds(const bam_cache_dev*); the descriptor lives
        // as long as the cache, past the synchronisation below.
        unsafe {
            self.inner.gpu.module(crate::runtime::CACHE)?.launch(
                &self.inner.stream,
                "bam_cache_flush_ssds",
                nssd.div_ceil(128),
                128,
                0,
                &args,
            )?
        };
        self.sync()
    }

    /// Writes every dirty line back (no kernel may be using the cache), the lines of
    /// every array the cache holds, also those of arrays whose handle is gone after a
    /// failed write-back at their teardown ([`Array::close`]). A line whose write-back
    /// fails stays valid and dirty in the cache, so that a later flush retries it: then
    /// (and for lines still pinned or busy) the error is [`Error::WriteBack`] with the
    /// counts and the device's I/O error log; other errors the log holds come back as
    /// [`Error::Io`].
    pub fn flush(&self) -> Result<FlushReport> {
        let r = self.flush_kernel(u32::MAX, false)?;
        let (count, errors) = self.take_errors()?;
        // The NVMe Flush (if one was sent) succeeded only if nothing was logged.
        self.inner
            .flush_book
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .confirm(count == 0);
        flush_outcome(&r, count, errors, true, || {
            format!(
                "flush: {} line(s) failed to write back and stay dirty in the cache (a later \
                 flush retries them), {} line(s) skipped as still pinned or busy",
                r.failed, r.pinned
            )
        })
    }

    /// Flushes and tears the cache down, reporting any error: lines that still fail to
    /// write back ([`Error::WriteBack`]) are lost with the cache, and said so.
    pub fn close(mut self) -> Result<()> {
        self.closed = true;
        self.final_flush()
    }

    /// The last flush before the cache goes away ([`Self::close`], Drop).
    pub(super) fn final_flush(&self) -> Result<()> {
        match self.flush() {
            Ok(_) => Ok(()),
            Err(Error::WriteBack {
                failed,
                pinned,
                count,
                errors,
                ..
            }) => Err(Error::WriteBack {
                what: format!(
                    "cache close: {failed} dirty line(s) failed to write back and are lost \
                     with the cache, {pinned} line(s) skipped as still pinned or busy"
                ),
                failed,
                pinned,
                count,
                errors,
            }),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod flush_book_tests {
    use super::FlushBook;

    /// The write-back count is recorded only once the NVMe Flush succeeded, so a Flush
    /// that failed is sent again by the next flush.
    #[test]
    fn a_failed_flush_is_sent_again() {
        let mut b = FlushBook::default();
        assert!(!b.begin(0, 0), "nothing written: no Flush");
        assert!(b.begin(3, 3), "lines written: Flush");
        b.confirm(false); // the Flush failed
        assert!(b.begin(0, 3), "a failed Flush must be sent again");
        b.confirm(true);
        assert!(!b.begin(0, 3), "confirmed: nothing owed");
        // Write-backs by evictions since the last Flush; an unconfirmed one (a caller that
        // does not confirm) stays owed.
        assert!(b.begin(0, 5));
        assert!(b.begin(0, 5));
        b.confirm(true);
        assert!(!b.begin(0, 5));
        // Statistics reset (the count went down): owed.
        assert!(b.begin(0, 0));
    }
}
