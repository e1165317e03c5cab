//! Read-ahead: lines a scan will read are filled ahead; a failed read-ahead is quiet.

use super::errors::read_at;
use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::protocol_config;
use crate::cache_kernels::sim;
use bam::cache::{Cache, CacheConfig, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::storage::sim::SimArray;
use bam::storage::Fault;
use bam::{Error, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Read-ahead (docs/cache.md, "Read-ahead"). Line FAULTY of the medium fails every read.
/// Lines 390..398 except 398 are read first by lanes that each read another line (such
/// warps never read ahead). Then one full warp reads line 398, misses, finds both
/// neighbours cached and reads lines 399..406 ahead (one grid stride is one line here):
/// 399 is cached already, the read of FAULTY fails on the device (the simulated SSD
/// counts one error status) and must leave no log entry, and 401..406 must be filled. A
/// read of those lines afterwards finds them (no new miss) with the right values; a read
/// of FAULTY itself reads it again and reports the error with its LBA; the array closes
/// cleanly (its read-aheads are all accounted for).
pub(super) fn readahead(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    const FAULTY: u64 = 400;
    let cfg = CacheConfig {
        readahead: 8,
        ..protocol_config(4096, 256)
    };
    let lba_size = 512u64;
    let line_lbas = cfg.line_bytes as u64 / lba_size;
    let mut c = sim(1, &cfg, 4 << 20, Duration::from_secs(2));
    c.fault = Some(Fault {
        lba: FAULTY * line_lbas + 3,
        nlb: 2,
        status: 0x281,
        lie: None,
    });
    let arr = backend.build(gpu, c)?;
    let Some(simarr) = SimArray::of(&*arr) else {
        return fail("needs the simulated array (fault injection, command counters)".into());
    };
    if arr.io().geometry().lba_size as u64 != lba_size {
        return fail(format!(
            "expected {lba_size}-byte LBAs, the simulated SSD has {}",
            arr.io().geometry().lba_size
        ));
    }
    let cache = Cache::new(arr.io(), cfg.clone())?;
    let epl = cfg.line_bytes as u64 / 4;
    let a = cache.array::<u32>(512 * epl, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let idx = DeviceBuffer::zeroed(gpu, 8 * 32)?;
    // One warp reads the listed elements; returns (failed, wrong).
    let read = |elems: &[u64]| read_at(&cache, a.view(), elems, &idx, &res);
    let line = |l: u64| (0..32).map(|k| l * epl + k * 31).collect::<Vec<u64>>();
    // 1. Neighbours in, one lane per line.
    let warm: Vec<u64> = (390..398).chain([399]).map(|l| l * epl).collect();
    let [f, w] = read(&warm)?;
    cache.check_errors()?;
    let before = cache.stats()?;
    let dev_before = simarr.counters()?[0].errors;
    // 2. A full warp misses line 398 and reads ahead. The read-aheads outlive the kernel:
    // wait (bounded) until the service has done all seven before looking at the log.
    let [f2, w2] = read(&line(398))?;
    let t0 = Instant::now();
    let (mut mid, mut dev_errors) = (cache.stats()?, 0);
    while t0.elapsed() < Duration::from_secs(2) {
        mid = cache.stats()?;
        dev_errors = simarr.counters()?[0].errors - dev_before;
        if mid.readaheads - before.readaheads >= 6 && dev_errors >= 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let quiet = cache.check_errors();
    let ahead = mid.readaheads - before.readaheads;
    if f + w + f2 + w2 != 0 || quiet.is_err() || dev_errors != 1 || ahead != 6 {
        return fail(format!(
            "warm-up {f} failed / {w} wrong, line 398 {f2} failed / {w2} wrong; log after the read-ahead: {quiet:?} (must be empty); device error statuses {dev_errors} (expected 1: the read-ahead of line {FAULTY}); lines read ahead {ahead} (expected 6: 401..406)"
        ));
    }
    // 3. The lines read ahead are there, with the right values: no new miss.
    let [f3, w3] = read(&(401..407).map(|l| l * epl + 7).collect::<Vec<u64>>())?;
    let after = cache.stats()?;
    if f3 + w3 != 0 || after.misses != mid.misses {
        return fail(format!(
            "lines 401..406: {f3} failed, {w3} wrong, {} new misses (expected none)",
            after.misses - mid.misses
        ));
    }
    // 4. The faulty line read by somebody: its own error, with its LBA.
    let [f4, _] = read(&line(FAULTY))?;
    let err = cache.check_errors();
    let Err(Error::Io { errors, .. }) = &err else {
        return fail(format!(
            "reading line {FAULTY}: expected a typed I/O error, got {err:?}"
        ));
    };
    let lba_ok = errors.iter().all(|e| e.lba == FAULTY * line_lbas);
    if f4 != 32 || !lba_ok {
        return fail(format!(
            "reading line {FAULTY}: {f4} of 32 reads failed; log {errors:?}"
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "6 lines read ahead, 1 read-ahead failed on the device without a log entry, the lines read ahead hit with the right values, a read of line {FAULTY} failed with its own error ({})",
        errors[0]
    ))
}
