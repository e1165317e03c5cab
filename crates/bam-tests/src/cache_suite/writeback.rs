//! Write-back: a failed write-back at array close, the NVMe Flush after write-backs, a
//! replicated flush with mixed failures.

use super::torture::error_summary;
use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::sim;
use bam::cache::{Cache, Layout};
use bam::cuda::Gpu;
use bam::storage::sim::SimArray;
use bam::storage::Fault;
use bam::{Error, IoErrorKind, Result, Storage};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cache_kernels::protocol_config;
use bam::pattern::{mix32, pattern_word};

/// An array's teardown whose write-back fails must not lose the line: the failed line
/// stays valid and dirty in the cache, `close` says so, `Cache::flush` retries it (and
/// still fails while the fault lasts), and once the fault is gone a flush writes exactly
/// the stored data. Needs the simulated array's run-time fault injection.
pub(super) fn failed_writeback_at_close(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    const LINES: u64 = 8;
    const FAULTY: u64 = 5;
    const STATUS: u16 = 0x280; // Write Fault (SCT 2h, SC 80h)
    let cfg = protocol_config(4096, 64);
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_secs(2)))?;
    let Some(simarr) = SimArray::of(&*arr) else {
        return fail("needs the simulated array (SimArray::set_fault)".into());
    };
    let lba = arr.io().geometry().lba_size as u64;
    let line = cfg.line_bytes as u64;
    let line_lbas = line / lba;
    let start_lba = 3 * line_lbas; // not at LBA 0, so that offsets are checked too
    let epl = line / 4;
    let n = LINES * epl;
    // The medium as created (pattern generation 0) and the data to store, which differs
    // from it in every word.
    let fresh = |byte: u64| pattern_word(0, byte / 4, 0);
    let base = start_lba * lba;
    let data: Vec<u32> = (0..n)
        .map(|i| fresh(base + 4 * i) ^ (mix32(i as u32 ^ 0x16_0016) | 1))
        .collect();
    // `words` u32 words of the medium from byte `from_byte`.
    let medium = |from_byte: u64, words: u64| -> Result<Vec<u32>> {
        let mut b = vec![0u8; (4 * words) as usize];
        simarr.read_medium(0, from_byte, &mut b)?;
        Ok(b.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    // Which lines of the array hold the stored data / the fresh pattern on the medium.
    let line_states = || -> Result<Vec<&'static str>> {
        let got = medium(base, n)?;
        Ok((0..LINES)
            .map(|l| {
                let r = (l * epl) as usize..((l + 1) * epl) as usize;
                if got[r.clone()] == data[r.clone()] {
                    "stored"
                } else if r.clone().all(|i| got[i] == fresh(base + 4 * i as u64)) {
                    "fresh"
                } else {
                    "other"
                }
            })
            .collect())
    };
    let expect = |what: &str, want: &[&str]| -> Result<()> {
        let got = line_states()?;
        if got != want {
            return fail(format!(
                "{what}: the medium's lines are {got:?}, expected {want:?}"
            ));
        }
        Ok(())
    };
    let fault = Fault {
        lba: start_lba + FAULTY * line_lbas,
        nlb: line_lbas,
        status: STATUS,
        lie: None,
    };
    // The log's entries for the faulty line: its write failed with the injected status.
    let check_log = |what: &str, count: u32, errors: &[bam::IoError]| -> Result<()> {
        let ok = !errors.is_empty()
            && errors.iter().all(|e| {
                matches!(e.kind, IoErrorKind::Nvme(s) if s.to_field() & 0x7ff == STATUS)
                    && e.lba == fault.lba
                    && e.nlb as u64 == line_lbas
                    && e.opcode == 0x01
            });
        if !ok || count as usize != errors.len() {
            return fail(format!(
                "{what}: expected write errors with status {STATUS:#x} at LBA {} only, got {count}: {errors:?}",
                fault.lba
            ));
        }
        Ok(())
    };
    let all = |s: &'static str| vec![s; LINES as usize];
    let mut after_close = all("stored");
    after_close[FAULTY as usize] = "fresh";

    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(n, start_lba, Layout::Stripe)?;
    a.load(&data, 0)?;
    // 64 slots for 8 lines: nothing was evicted, every line is dirty in the cache.
    expect("after the stores", &all("fresh"))?;
    simarr.set_fault(Some(fault))?;
    let (failed, count, errors) = match a.close() {
        Err(Error::WriteBack {
            failed,
            pinned: 0,
            count,
            errors,
            ..
        }) => (failed, count, errors),
        other => {
            return fail(format!(
                "close with a faulty line: expected a write-back error, got {other:?}"
            ))
        }
    };
    if failed != 1 {
        return fail(format!(
            "close: {failed} failed write-backs reported, expected 1"
        ));
    }
    check_log("close", count, &errors)?;
    expect("after close", &after_close)?;
    // The line is still in the cache, alone, valid and unpinned; the array's id and LBAs
    // stay reserved.
    let st = cache.state()?;
    if st.slots - st.empty - st.reserved != 1 || st.evictable != 1 || !st.is_idle() {
        return fail(format!(
            "after close, expected exactly the faulty line in the cache: {st}"
        ));
    }
    if cache.array::<u32>(n, start_lba, Layout::Stripe).is_ok() {
        return fail(
            "the closed array's LBAs were given to a new array while its line is dirty".into(),
        );
    }
    // A flush retries it and still fails while the fault lasts.
    match cache.flush() {
        Err(Error::WriteBack {
            failed: 1,
            pinned: 0,
            count,
            errors,
            ..
        }) => check_log("flush with the fault", count, &errors)?,
        other => {
            return fail(format!(
                "flush with the fault: expected 1 failed write-back, got {other:?}"
            ))
        }
    }
    expect("after the failed flush", &after_close)?;
    // Without the fault the next flush writes it back, and only it.
    simarr.set_fault(None)?;
    let r = cache.flush()?;
    if r.written != 1 || r.dropped != 0 {
        return fail(format!(
            "flush without the fault: {r:?}, expected 1 line written"
        ));
    }
    expect("after the retry", &all("stored"))?;
    // The neighbours of the array are untouched.
    let before = medium(base - line, epl)?;
    let after = medium(base + LINES * line, epl)?;
    let untouched = |from: u64, got: &[u32]| {
        got.iter()
            .enumerate()
            .all(|(i, &w)| w == fresh(from + 4 * i as u64))
    };
    if !untouched(base - line, &before) || !untouched(base + LINES * line, &after) {
        return fail("the lines next to the array changed".into());
    }
    // Now clean: nothing left to write.
    let again = cache.flush()?;
    if again.written != 0 {
        return fail(format!(
            "a second flush wrote {} line(s), expected none",
            again.written
        ));
    }
    let first = errors.first().map(|e| e.to_string()).unwrap_or_default();
    cache.close()?;
    Ok(format!(
        "line {FAULTY} of {LINES}: close reported 1 failed write-back ({first}), the other {} lines written; the line stayed dirty in the cache and a flush failed again; after set_fault(None) a flush wrote it ({} lines now equal the stored data)",
        LINES - 1,
        LINES
    ))
}

/// Flush and close send an NVMe Flush to every SSD once lines were written back (so no
/// written data stays in a volatile write cache), and none when nothing was written.
pub(super) fn flush_reaches_ssds(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = protocol_config(4096, 256);
    let arr = backend.build(gpu, sim(2, &cfg, 16 << 20, Duration::from_secs(5)))?;
    let flushes =
        |arr: &dyn Storage| -> Result<u64> { Ok(arr.counters()?.iter().map(|c| c.others).sum()) };
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(64 << 10, 0, Layout::Stripe)?;
    let f0 = flushes(&*arr)?;
    let mut back = vec![0u32; 1024];
    a.read(0, &mut back)?;
    cache.flush()?;
    // The simulated array publishes its counters every ~1000 service loops: wait a bit.
    let settle = |want: u64| -> Result<u64> {
        let t0 = Instant::now();
        loop {
            let f = flushes(&*arr)?;
            if f >= want || t0.elapsed() > Duration::from_secs(2) {
                return Ok(f);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let f1 = settle(f0)?;
    if f1 != f0 {
        return fail(format!(
            "a flush after reads only sent {} NVMe Flush(es)",
            f1 - f0
        ));
    }
    a.load(&vec![7u32; 64 << 10], 0)?;
    let r = cache.flush()?;
    let f2 = settle(f1 + 2)?;
    if r.written == 0 || f2 != f1 + 2 {
        return fail(format!(
            "a flush that wrote {} lines sent {} NVMe Flush(es) to 2 SSDs",
            r.written,
            f2 - f1
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "reads only: no Flush; {} lines written back: one Flush per SSD",
        r.written
    ))
}

/// A replicated line's write-back fails on SSD 0 with a media error (settled) and times
/// out on SSD 1 (the device may still read the slot): the flush must keep the slot
/// quarantined, as eviction does, not unlock it as an ordinary failed write-back. A
/// second flush then reports the line quarantined (not written again).
pub(super) fn replicated_flush_mixed_failures(
    gpu: &Arc<Gpu>,
    backend: TestBackend,
) -> Result<String> {
    const LINE: u64 = 5;
    let cfg = protocol_config(4096, 64);
    let timeout = Duration::from_millis(300);
    let arr = backend.build(gpu, sim(2, &cfg, 4 << 20, timeout))?;
    let Some(simarr) = SimArray::of(&*arr) else {
        return fail("needs the simulated array".into());
    };
    let cache = Cache::new(arr.io(), cfg)?;
    let epl = 1024u64;
    let a = cache.array::<u32>(64 * epl, 0, Layout::Replicate)?;
    a.load(&vec![0xfeed_beefu32; epl as usize], LINE * epl)?;
    let lbas = Fault {
        lba: LINE * 8,
        nlb: 8,
        status: 0x281,
        lie: None,
    };
    simarr.set_fault_on(0, Some(lbas))?;
    simarr.set_fault_on(
        1,
        Some(Fault {
            status: 0,
            lie: Some(bam::storage::Lie::Withhold(4 * timeout)),
            ..lbas
        }),
    )?;
    let first = cache.flush();
    let second = cache.flush();
    simarr.set_fault(None)?;
    let quarantined = |r: &Result<bam::cache::FlushReport>| match r {
        Err(Error::WriteBack { errors, .. }) => errors.iter().any(|e| {
            e.kind == IoErrorKind::Timeout && e.detail == bam::abi::BAM_CACHE_ERR_QUARANTINED
        }),
        _ => false,
    };
    let timed_out = match &first {
        Err(Error::WriteBack { errors, .. }) => errors
            .iter()
            .any(|e| e.ssd == 1 && matches!(e.kind, IoErrorKind::Timeout | IoErrorKind::Aborted)),
        _ => false,
    };
    if !timed_out || !quarantined(&second) {
        return fail(format!(
            "first flush: {first:?}; second flush: {second:?} (the second must report the line quarantined)"
        ));
    }
    Ok(format!(
        "first flush: {}; second: the line quarantined",
        first.err().map(|e| error_summary(&e)).unwrap_or_default()
    ))
}
