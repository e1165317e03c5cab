//! A stalled device: a miss, the fill queues and write-back end in errors, never a hang.

use super::errors::read_at;
use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::{check_all, sim};
use bam::cache::{Array, Cache, CacheConfig, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::{Error, IoErrorKind, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cache_kernels::protocol_config;
use bam::pattern::{mix32, pattern_word};

/// A device that stops answering: misses end in timeout errors within the bound and the
/// kernel returns.
pub(super) fn stalled_device(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(200)),
        ..protocol_config(4096, 256)
    };
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_millis(200)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    // 16 lines, 64 reads per thread: each miss waits at most the 200 ms bound.
    let n = (64u64 << 10) / 4;
    let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let check = |seed_word: u64| check_all(&cache, a.view(), seed_word, 1, &res);
    arr.set_stall(true)?;
    let t0 = Instant::now();
    let [failed, bad] = check(0)?;
    let secs = t0.elapsed().as_secs_f64();
    let (count, log) = cache.take_errors()?;
    let timeouts = log
        .iter()
        .filter(|e| e.kind == IoErrorKind::Timeout)
        .count();
    arr.set_stall(false)?;
    if failed == 0 || timeouts == 0 || bad != 0 {
        return fail(format!(
            "stalled: {failed} failed reads, {bad} wrong values, {timeouts} timeouts in {count} errors"
        ));
    }
    // The fill service's reads that timed out end a little after the kernel: wait until
    // no line is busy, then every slot such a read went to must be quarantined (its data
    // may still arrive), and nothing else held.
    let t1 = Instant::now();
    let st = loop {
        let st = cache.state()?;
        if st.lines_busy == 0 || t1.elapsed() > Duration::from_secs(5) {
            break st;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if st.quarantined == 0 || !st.is_idle() {
        return fail(format!(
            "stalled: after the timeouts the cache should hold nothing and have quarantined the \
             slots of the timed-out reads: {st}"
        ));
    }
    Ok(format!(
        "stalled device: {failed} reads failed with {timeouts} timeout errors (of {count}), kernel returned in {secs:.2} s; {} slot(s) quarantined",
        st.quarantined
    ))
}

/// The fill queues (a warp's lone request reads on its service block's own queue pair):
/// lone misses read right; one whose read times out on a stalled device fails with a
/// timeout (its slot quarantined), the block's fill queue is left broken, and the lone
/// misses after it still read right (on another block's fill queue or the shared
/// queues). The first cache's slots stay held after its drop (the broken queue pair, now
/// marked failed, may still deliver the late read into one of them) until
/// `IoArray::recover`; then a second cache over the same I/O layer, whose service takes
/// the queue pairs over from the first, reads right too.
pub(super) fn fill_queue_stall(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(200)),
        ..protocol_config(4096, 256)
    };
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_millis(200)))?;
    let epl = cfg.line_bytes as u64 / 4;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let idx = DeviceBuffer::zeroed(gpu, 8)?;
    // One thread reads element `i` (a lone miss if its line is not cached): (failed, wrong).
    let read_one =
        |cache: &Cache<'_>, a: &Array<'_, u32>, i: u64| read_at(cache, a.view(), &[i], &idx, &res);
    // Lone misses of lines `lines`, one after the other, element `off` of each: summed
    // (failed, wrong).
    let read_lines =
        |cache: &Cache<'_>, a: &Array<'_, u32>, lines: std::ops::Range<u64>, off: u64| {
            let mut sum = [0u64; 2];
            for l in lines {
                let [f, w] = read_one(cache, a, l * epl + off)?;
                sum[0] += f;
                sum[1] += w;
            }
            Ok::<_, Error>(sum)
        };
    let first_pass = {
        let cache = Cache::new(arr.io(), cfg.clone())?;
        if cache.fill_queues() == 0 {
            return fail("a cache over 32 queue pairs per SSD should own fill queues".into());
        }
        let a = cache.array::<u32>(64 * epl, 0, Layout::Stripe)?;
        let ok = read_lines(&cache, &a, 0..4, 5)?;
        cache.check_errors()?;
        arr.set_stall(true)?;
        let [sf, sw] = read_one(&cache, &a, 10 * epl)?;
        let (_, log) = cache.take_errors()?;
        arr.set_stall(false)?;
        let timeouts = log
            .iter()
            .filter(|e| e.kind == IoErrorKind::Timeout)
            .count();
        // The timed-out read ends in the service a little after the kernel.
        let t1 = Instant::now();
        while cache.state()?.lines_busy != 0 && t1.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let after = read_lines(&cache, &a, 20..36, 1)?;
        let late = cache.take_errors()?.1;
        if ok != [0, 0] || sf != 1 || sw != 0 || timeouts == 0 || after != [0, 0] {
            return fail(format!(
                "lone misses before the stall {ok:?} (failed, wrong; expected none), the stalled one {sf} failed / {sw} wrong with {timeouts} timeouts logged (expected 1 failed, a timeout), 16 after it {after:?} (expected none; errors {late:?})"
            ));
        }
        a.close()?;
        cache.close()?;
        ok
    };
    // The first cache's slots wait for the recovery of the queue pair that broke.
    let held = arr.io().held_slots();
    if held.is_empty() || Cache::new(arr.io(), cfg.clone()).is_ok() {
        return fail(format!(
            "the first cache's slots went back with a queue pair failed (held {held:?})"
        ));
    }
    let r = arr.io().recover()?;
    // A second cache takes the queue pairs over from the first.
    let cache = Cache::new(arr.io(), cfg.clone())?;
    let a = cache.array::<u32>(64 * epl, 0, Layout::Stripe)?;
    let second = read_lines(&cache, &a, 40..56, 2)?;
    let errs = cache.take_errors()?.1;
    if second != [0, 0] {
        return fail(format!(
            "a second cache over the same queue pairs: {second:?} (failed, wrong; expected none); errors {errs:?}"
        ));
    }
    let fq = cache.fill_queues();
    a.close()?;
    cache.close()?;
    Ok(format!(
        "{fq} fill queues per SSD; lone misses {first_pass:?} failed/wrong, the stalled one timed out, 16 after it read right; slots held until {} queue pair(s) were recovered, then 16 through a second cache read right",
        r.queue_pairs.len()
    ))
}

/// A device that stops answering while dirty lines are written back. The write-backs time
/// out, and the device may still read their slots for those writes later, so each slot is
/// quarantined with its line (cache_service.cuh, quarantine_writeback): the flush reports
/// every line as failed, the lines can no longer be written (a store that changed a slot
/// under a late write would put torn data on the SSD; before the quarantine such stores
/// succeeded), and once the device runs again each line on the medium is either the
/// stored data (its late write landed) or the old data (never sent), nothing else. Later
/// flushes keep reporting the lines as not settled.
pub(super) fn stalled_writeback(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    const LINES: u64 = 8;
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(200)),
        ..protocol_config(4096, 64)
    };
    let line = cfg.line_bytes as u64;
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_millis(200)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let epl = line / 4;
    let n = LINES * epl;
    // The medium as created (pattern generation 0) and the data to store, which differs
    // from it in every word.
    let fresh = |byte: u64| pattern_word(0, byte / 4, 0);
    let data: Vec<u32> = (0..n)
        .map(|i| fresh(4 * i) ^ (mix32(i as u32 ^ 0x7b_0016) | 1))
        .collect();
    let line_states = || -> Result<Vec<&'static str>> {
        let mut b = vec![0u8; (4 * n) as usize];
        arr.read_medium(0, 0, &mut b)?;
        let got: Vec<u32> = b
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok((0..LINES)
            .map(|l| {
                let r = (l * epl) as usize..((l + 1) * epl) as usize;
                if got[r.clone()] == data[r.clone()] {
                    "stored"
                } else if r.clone().all(|i| got[i] == fresh(4 * i as u64)) {
                    "fresh"
                } else {
                    "other"
                }
            })
            .collect())
    };
    let line_lbas = line / arr.io().geometry().lba_size as u64;
    let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
    a.load(&data, 0)?;
    arr.set_stall(true)?;
    // The controllers poll the stall switch: give them time to see it. A write-back the
    // device still took completes and leaves its line clean (checked below).
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    let (failed, count, first) = match cache.flush() {
        Err(Error::WriteBack {
            failed,
            count,
            errors,
            ..
        }) => {
            // A line whose write did not settle: the first one named by a write error.
            let first = errors
                .iter()
                .find(|e| e.opcode == 0x01 && e.kind != IoErrorKind::Invalid)
                .map(|e| e.lba / line_lbas);
            (failed, count, first)
        }
        other => {
            arr.set_stall(false)?;
            return fail(format!(
                "flush on a stalled device: expected a write-back error, got {other:?}"
            ));
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let st = cache.state()?;
    let Some(q) = first.filter(|&l| l < LINES) else {
        arr.set_stall(false)?;
        return fail(format!(
            "stalled write-backs: no write error names a line of the array ({failed} failed)"
        ));
    };
    if failed == 0 || st.quarantined_lines != failed || !st.is_idle() {
        arr.set_stall(false)?;
        return fail(format!(
            "stalled write-backs: {failed} failed; every one should be quarantined with its \
             slot and nothing else held: {st}"
        ));
    }
    // Stores into a quarantined line must fail (bounded by the cache timeout), not change
    // the slot the device may still read.
    cache.take_errors()?;
    let range = (q * epl) as usize..((q + 1) * epl) as usize;
    let other: Vec<u32> = data[range].iter().map(|w| !w).collect();
    let store = a.load(&other, q * epl);
    arr.set_stall(false)?;
    match store {
        Err(Error::Io { errors, .. })
            if !errors.is_empty() && errors.iter().all(|e| e.kind == IoErrorKind::Timeout) => {}
        Ok(()) => {
            return fail(
                "stores into lines whose write-back may still be in the device's hands succeeded"
                    .into(),
            )
        }
        Err(e) => {
            return fail(format!(
                "stores into quarantined lines: expected cache timeouts only, got {e:?}"
            ))
        }
    }
    // The device runs again: late writes land. Wait for them, then check the medium.
    std::thread::sleep(Duration::from_millis(500));
    let states = line_states()?;
    if states.contains(&"other") {
        return fail(format!(
            "after the stall the medium's lines are {states:?}: a late write carried changed data"
        ));
    }
    // Every later flush reports the lines as not settled (the data is in the cache): one
    // entry per line. The NVMe Flush owed since the failed flush is sent again and may
    // fail too (the stalled queue failed for good); nothing else may be in the log.
    let quarantined = |errors: &[bam::IoError]| {
        errors
            .iter()
            .filter(|e| e.detail == bam::abi::BAM_CACHE_ERR_QUARANTINED)
            .count() as u64
    };
    let lines = failed;
    match cache.flush() {
        Err(Error::WriteBack { failed, errors, .. })
            if failed == lines
                && quarantined(&errors) == lines
                && errors.iter().all(|e| {
                    e.detail == bam::abi::BAM_CACHE_ERR_QUARANTINED || e.opcode == 0x00
                }) => {}
        other => {
            return fail(format!(
                "flush after the stall: expected {lines} quarantined lines reported, got {other:?}"
            ))
        }
    }
    let landed = states.iter().filter(|s| **s == "stored").count();
    Ok(format!(
        "{lines} of {LINES} write-backs did not settle ({count} errors, flush returned in {secs:.2} s): {lines} lines quarantined with their slots, stores into line {q} failed with timeouts, {landed} line(s) of the medium hold the stored data (late or settled writes) and the rest kept the old data; a later flush reports the {lines} lines as not settled"
    ))
}
