//! Bad demand and bad input: a cache smaller than the demand (bounded wait, then an
//! error), an injected media error reaching the host with its LBA, element indices out
//! of range.

use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::protocol_config;
use crate::cache_kernels::{check_all, counts, launch_test, sim};
use bam::cache::{ArrayView, Cache, CacheConfig, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::storage::sim::SimConfig;
use bam::storage::Fault;
use bam::{Error, IoErrorKind, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One block of 32 threads: thread t < elems.len() reads element elems[t] of `view`
/// (`bam_cache_read_at_u32`, the pattern of SSD 0 from word 0); returns (failed reads,
/// wrong values). `idx` holds at least elems.len() indices, `res` two counters.
pub(super) fn read_at(
    cache: &Cache<'_>,
    view: ArrayView,
    elems: &[u64],
    idx: &DeviceBuffer,
    res: &DeviceBuffer,
) -> Result<[u64; 2]> {
    res.write(0, &[0u64, 0])?;
    idx.write(0, elems)?;
    let args: (ArrayView, u64, u32, u32, u64, u64) =
        (view, idx.ptr(), elems.len() as u32, 0, 0, res.ptr());
    // SAFETY: matches bam_cache_read_at_u32(bam_array_view, const uint64_t*, uint32_t,
    // uint32_t, uint64_t, unsigned long long*); the buffers outlive cache.sync().
    unsafe { launch_test(cache, "bam_cache_read_at_u32", 1, 32, &args)? };
    cache.sync()?;
    counts(res)
}

/// One block of 32 threads: thread t < elems.len() stores elems[t] ^ x to element
/// elems[t] of `view` and reads it back (`bam_cache_store_at_u32`); returns (failed
/// stores, failed or wrong read-backs).
pub(super) fn store_at(
    cache: &Cache<'_>,
    view: ArrayView,
    elems: &[u64],
    x: u32,
    idx: &DeviceBuffer,
    res: &DeviceBuffer,
) -> Result<[u64; 2]> {
    res.write(0, &[0u64, 0])?;
    idx.write(0, elems)?;
    let args: (ArrayView, u64, u32, u32, u64) = (view, idx.ptr(), elems.len() as u32, x, res.ptr());
    // SAFETY: matches bam_cache_store_at_u32(bam_array_view, const uint64_t*, uint32_t,
    // uint32_t, unsigned long long*); the buffers outlive cache.sync().
    unsafe { launch_test(cache, "bam_cache_store_at_u32", 1, 32, &args)? };
    cache.sync()?;
    counts(res)
}

pub(super) fn pin_hog(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(100)),
        ..protocol_config(4096, 4)
    };
    let arr = backend.build(gpu, sim(1, &cfg, 8 << 20, Duration::from_secs(2)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(1 << 20, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let args: (ArrayView, u64) = (a.view(), res.ptr());
    let t0 = Instant::now();
    // SAFETY: matches bam_cache_pin_hog(bam_array_view, unsigned long long*).
    unsafe { launch_test(&cache, "bam_cache_pin_hog", 8, 128, &args)? };
    cache.sync()?;
    let secs = t0.elapsed().as_secs_f64();
    let [okw, failw] = counts(&res)?;
    let (count, log) = cache.take_errors()?;
    let timeouts = log
        .iter()
        .filter(|e| e.kind == IoErrorKind::Timeout)
        .count();
    if failw == 0 || timeouts == 0 {
        return fail(format!("expected failed acquisitions with timeout errors: {okw} ok, {failw} failed, log {log:?}"));
    }
    a.close()?;
    cache.close()?;
    Ok(format!("{okw} warps got both lines, {failw} failed after a bounded wait; {count} errors logged ({timeouts} timeouts, first: {}); kernel returned in {secs:.2} s", log[0]))
}

/// One SSD of 4 MiB for a cache of `cfg` whose LBAs 1003 and 1004 fail reads with an
/// Unrecovered Read Error (status 0x281): line 125 of an array at LBA 0 (LBAs 1000..1008).
pub(super) fn faulty_ssd(cfg: &CacheConfig) -> SimConfig {
    let mut c = sim(1, cfg, 4 << 20, Duration::from_secs(2));
    c.fault = Some(Fault {
        lba: 1003,
        nlb: 2,
        status: 0x281,
        lie: None,
    });
    c
}

pub(super) fn injected_errors(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = protocol_config(4096, 64);
    let arr = backend.build(gpu, faulty_ssd(&cfg))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let n = (2u64 << 20) / 4;
    let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let [failed, bad] = check_all(&cache, a.view(), 0, 32, &res)?;
    let err = cache.check_errors();
    let Err(Error::Io { count, errors }) = err else {
        return fail(format!("expected a typed I/O error, got {err:?}"));
    };
    // Line 125 (LBAs 1000..1008) holds the faulty LBAs.
    let ok = errors.iter().all(|e| {
        matches!(e.kind, IoErrorKind::Nvme(s) if s.to_field() & 0x7ff == 0x281)
            && e.lba == 1000
            && e.nlb == 8
    });
    if !ok || failed == 0 || bad != 0 {
        return fail(format!(
            "{failed} failed reads, {bad} wrong values, log {errors:?}"
        ));
    }
    if failed != 1024 {
        return fail(format!(
            "{failed} failed reads; the faulty line has 1024 elements"
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "{failed} reads of the faulty line failed, {count} typed errors, first: {}",
        errors[0]
    ))
}

/// Element indices out of range, the bad input a kernel can give `bam::array`: `a[i]` /
/// `try_read` and `store` fail for exactly the lanes whose index is past the end, the
/// other lanes of the same call read and write their elements (partial warps: half a
/// warp, every other lane), each call leaves one log entry (invalid request, "element
/// index out of range", the index of its lowest lane out of range, the opcode), no line
/// stays pinned, and no other element changed. Through each path a view can take: an ordinary view (the lean
/// read), one that counts hits (the general path), one whose lines are found by division
/// (384 elements a line), and a resident view. The arrays end in a partial line.
pub(super) fn out_of_range(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let mut summary = Vec::new();
    for (what, line, count_hits, resident) in [
        ("ordinary view", 4096u32, false, false),
        ("counting view", 4096, true, false),
        ("384 elements a line", 1536, false, false),
        ("resident view", 4096, false, true),
    ] {
        let cfg = CacheConfig {
            count_hits,
            ..protocol_config(line, 256)
        };
        let epl = line as u64 / 4;
        let n = 100 * epl - 5;
        let arr = backend.build(gpu, sim(1, &cfg, 128 * line as u64, Duration::from_secs(2)))?;
        let cache = Cache::new(arr.io(), cfg)?;
        let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
        let guard = if resident {
            Some(a.make_resident()?)
        } else {
            None
        };
        let view = guard.as_ref().map_or_else(|| a.view(), |g| g.view());
        // One warp each; lane t's index.
        let calls: [(&str, Vec<u64>); 3] = [
            (
                "half a warp past the end",
                (0..32)
                    .map(|t| if t < 16 { n - 16 + t } else { n + t - 16 })
                    .collect(),
            ),
            (
                "a whole warp far out",
                (0..32).map(|t| u64::MAX - 31 + t).collect(),
            ),
            (
                "every other lane out",
                (0..32)
                    .map(|t| if t % 2 == 0 { t * 1000 } else { n + 7 * t })
                    .collect(),
            ),
        ];
        let idx = DeviceBuffer::zeroed(gpu, 8 * 32)?;
        let res = DeviceBuffer::zeroed(gpu, 16)?;
        for (call, lanes) in &calls {
            let out = lanes.iter().filter(|&&i| i >= n).count() as u64;
            let first_out = lanes.iter().copied().find(|&i| i >= n).unwrap_or(0);
            for store in [false, true] {
                let [failed, wrong] = if store {
                    store_at(&cache, view, lanes, 0x5a5a_5a5a, &idx, &res)?
                } else {
                    read_at(&cache, view, lanes, &idx, &res)?
                };
                let (logged, entries) = cache.take_errors()?;
                let op = if store { "store" } else { "read" };
                let entry_ok = entries.len() == 1
                    && matches!(entries[0].kind, IoErrorKind::Invalid)
                    && entries[0].detail == bam::abi::BAM_CACHE_ERR_RANGE
                    && entries[0].cid == 0xffff
                    && entries[0].lba == first_out
                    && entries[0].opcode == if store { 0x01 } else { 0x02 };
                if failed != out || wrong != 0 || logged != 1 || !entry_ok {
                    return fail(format!(
                        "{what}, {call}, {op}: {failed} lanes failed (expected {out}), {wrong} in-range lanes wrong; \
                         {logged} log entries (expected 1: invalid, element index out of range, index {first_out}): {entries:?}"
                    ));
                }
            }
        }
        // (Consumed whole, so that nothing of it outlives the array's close below.)
        guard.map(|g| g.release()).transpose()?;
        let held = cache.state()?;
        if !held.is_idle() {
            return fail(format!(
                "{what}: after the calls, lines are still held: {held}"
            ));
        }
        // Nothing else touched: every element holds the medium's pattern but the 32 that
        // the in-range lanes stored (n - 16 .. n - 1, and 0, 2000, .. 30000).
        let [failed, differ] = check_all(&cache, a.view(), 0, 32, &res)?;
        let (logged, _) = cache.take_errors()?;
        if failed != 0 || differ != 32 || logged != 0 {
            return fail(format!(
                "{what}: reading the whole array afterwards, {failed} reads failed, {differ} elements differ from the medium (expected the 32 stored), {logged} log entries"
            ));
        }
        a.close()?;
        cache.close()?;
        summary.push(what);
    }
    Ok(format!(
        "{}: 3 calls each (half a warp past the end, a whole warp far out, every other lane out), reads and stores",
        summary.join(", ")
    ))
}
