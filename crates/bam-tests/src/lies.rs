//! A lying controller: the simulated controller breaks the completion protocol
//! ([`bam::storage::Lie`]: duplicate, stale and early CQEs, CQEs naming another command or an
//! unsubmitted slot, phase glitches, SQ heads outside the queue, completions withheld past
//! the timeout) for the commands of an LBA range, and the GPU's queues must end every run
//! in typed errors (a protocol violation, a timeout, the queue failed) with no wrong value
//! taken as success.
//!
//! Each lie runs twice: raw I/O through the GPU I/O layer (random 4 KiB reads, every one
//! verified against the medium's pattern), and a cache (every element of an array read
//! through `bam::array`, checked against the pattern). The simulated array alone can lie:
//! the suites register these on it and say SKIPPED on other backends.

use crate::backend::fail as bad;
use crate::backend::TestBackend;
use crate::cache_kernels::protocol_config;
use bam::cache::{Cache, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::storage::sim::DriveProfile;
use bam::storage::sim::{Media, SimConfig};
use bam::storage::{Fault, Lie};
use bam::{Error, IoError, IoErrorKind, Result};
use bam_bench::raw::{run_job, Job, Rw};
use std::sync::Arc;
use std::time::Duration;

/// The bound of every GPU-side wait in these tests; withheld completions come twice as late.
const TIMEOUT: Duration = Duration::from_millis(300);

/// Every lie, named for test names.
pub fn lies() -> Vec<(String, Lie)> {
    Lie::all(2 * TIMEOUT)
        .into_iter()
        .map(|l| (format!("{l:?}"), l))
        .collect()
}

/// The kinds of error a lie must end in: a protocol violation for the lies a reaper can
/// see, a timeout for those it cannot (phase glitch, withheld), and queues failed either
/// way (aborted). A flood ends in protocol violations too: the reaper's bound
/// (`BAM_PROTO_CQ_FLOOD`: it stopped after D - 1 CQEs) or, when a flooded CQE names no
/// command in flight before D - 1 of them pile up, that check; which one comes first is a
/// matter of timing (the summary counts the floods stopped at the bound), and a reaper
/// without a bound would never end the run. Returns a summary, or why the log falls
/// short.
fn judge(lie: Lie, log: &[IoError], wrong: u64) -> std::result::Result<String, String> {
    let count = |k: IoErrorKind| log.iter().filter(|e| e.kind == k).count();
    let (proto, timeouts, aborted) = (
        count(IoErrorKind::Protocol),
        count(IoErrorKind::Timeout),
        count(IoErrorKind::Aborted),
    );
    let other = log.len() - proto - timeouts - aborted;
    let floods = log
        .iter()
        .filter(|e| e.kind == IoErrorKind::Protocol && e.opcode == bam::abi::BAM_PROTO_CQ_FLOOD)
        .count();
    let wanted = match lie {
        Lie::PhaseGlitch | Lie::Withhold(_) => timeouts > 0,
        _ => proto > 0,
    };
    let summary = format!(
        "{} log entries: {proto} protocol violations ({floods} floods stopped at the bound), {timeouts} timeouts, {aborted} aborted, {other} other; {wrong} wrong values",
        log.len()
    );
    if wrong != 0 || !wanted || other != 0 {
        return Err(summary + &format!("; first: {:?}", log.first().map(|e| e.to_string())));
    }
    Ok(summary
        + &log
            .iter()
            .find(|e| e.kind == IoErrorKind::Protocol || e.kind == IoErrorKind::Timeout)
            .map(|e| format!("; first: {e}"))
            .unwrap_or_default())
}

/// A simulated array whose commands on LBAs [0, `nlb`) of every SSD lie as `lie` says.
fn lying(mut c: SimConfig, lie: Lie, nlb: u64) -> SimConfig {
    c.fault = Some(Fault {
        lba: 0,
        nlb,
        status: 0,
        lie: Some(lie),
    });
    c.io.timeout = TIMEOUT;
    c
}

/// Raw I/O: 1024 threads read random 4 KiB blocks of one SSD, verified; a quarter of the
/// LBAs lie.
pub fn io_case(gpu: &Arc<Gpu>, backend: TestBackend, lie: Lie) -> Result<String> {
    let mut c = crate::backend::test_sim();
    c.io.queues = 4;
    c.io.depth = 256;
    c.io.nslots = 1024;
    c.io.slot_bytes = 4096;
    c.media = Media::Hbm;
    c.capacity_bytes = 64 << 20;
    let blocks = c.capacity_bytes / 512;
    let arr = backend.build(gpu, lying(c, lie, blocks / 4))?;
    let job = Job {
        rw: Rw::RandRead,
        rwmix_read: 100,
        bs: 4096,
        threads: 1024,
        queues: 4,
        ssds: 1,
        runtime: Duration::from_secs(1),
        ios_per_thread: Some(16),
        verify: true,
        gen: 0,
        warp_io: false,
        seed: 7,
        span_lbas: 0,
        threads_per_block: 0,
    };
    let r = run_job(arr.io(), &job, None)?;
    judge(lie, &r.error_log, r.verify_failures).or_else(bad)
}

/// A cache: every element of a 16 MiB array read through `bam::array` and checked; the
/// first quarter of its lines lie.
pub fn cache_case(gpu: &Arc<Gpu>, backend: TestBackend, lie: Lie) -> Result<String> {
    let cfg = protocol_config(4096, 4096);
    let mut c = crate::backend::sim_for_cache(DriveProfile::ideal(), &cfg);
    c.io.queues = 8;
    c.io.depth = 256;
    c.capacity_bytes = 32 << 20;
    let bytes = 16u64 << 20;
    let arr = backend.build(gpu, lying(c, lie, bytes / 512 / 4))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(bytes / 4, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let [failed, wrong] = crate::cache_kernels::check_all(&cache, a.view(), 0, 64, &res)?;
    let log = match cache.check_errors() {
        Err(Error::Io { errors, .. }) => errors,
        Ok(()) => Vec::new(),
        Err(e) => return Err(e),
    };
    if failed == 0 {
        return bad(format!("no read failed ({} log entries)", log.len()));
    }
    let s = judge(lie, &log, wrong).or_else(bad)?;
    drop(a);
    drop(cache);
    drop(arr);
    Ok(format!("{failed} reads failed; {s}"))
}
