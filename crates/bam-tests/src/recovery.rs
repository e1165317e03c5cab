//! Queues that recover: a queue pair failed by a timeout is deleted and created again
//! ([`bam::IoArray::recover`]), I/O goes on over it, the cache gets its quarantined slots
//! back and writes the lines whose write-back did not settle ([`bam::Cache::recover`]),
//! and slots of a cache dropped while a queue was failed stay out of use until the
//! recovery.
//!
//! A queue fails the way it does on a device that stops answering: the backend stalls
//! (`Storage::set_stall`), every wait runs past a short timeout, and the backend comes
//! back before the recovery, so the commands it held arrive late into the failed queues.
//! On the simulated array a second round withholds completions past the timeout and
//! delivers them after the recovery: they must never reach the new queues.

use crate::backend::fail as bad;
use crate::backend::TestBackend;
use crate::cache_kernels::protocol_config;
use bam::cache::{Cache, Layout};
use bam::cuda::Gpu;
use bam::storage::sim::DriveProfile;
use bam::storage::sim::SimArray;
use bam::storage::sim::{Media, SimConfig};
use bam::storage::Storage;
use bam::storage::{Fault, Lie};
use bam::{Error, IoArray, IoErrorKind, Result};
use bam_bench::raw::{run_job, Job, JobResult, Rw};
use std::sync::Arc;
use std::time::Duration;

/// The bound of every GPU-side wait here.
const TIMEOUT: Duration = Duration::from_millis(300);

/// 512 threads, 8 verified random 4 KiB reads each, over every queue pair of SSD 0.
fn reads(io: &IoArray) -> Result<JobResult> {
    let job = Job {
        rw: Rw::RandRead,
        rwmix_read: 100,
        bs: 4096,
        threads: 512,
        queues: io.geometry().queues,
        ssds: 1,
        runtime: Duration::from_secs(1),
        ios_per_thread: Some(8),
        verify: true,
        gen: 0,
        warp_io: false,
        seed: 11,
        span_lbas: 0,
        threads_per_block: 0,
    };
    run_job(io, &job, None)
}

/// A clean run: every read verified, nothing logged.
fn clean(what: &str, r: &JobResult) -> Result<()> {
    if r.errors != 0 || r.verify_failures != 0 || !r.error_log.is_empty() {
        return bad(format!(
            "{what}: {} errors, {} wrong values, first: {:?}",
            r.errors,
            r.verify_failures,
            r.error_log.first().map(|e| e.to_string())
        ));
    }
    Ok(())
}

fn storage(gpu: &Arc<Gpu>, b: TestBackend, mut c: SimConfig) -> Result<Box<dyn Storage>> {
    c.io.timeout = TIMEOUT;
    b.build(gpu, c)
}

/// Raw I/O: a stall fails the queue pairs; after `IoArray::recover` the same queue pairs
/// carry verified reads again, and (simulated array) completions withheld past the
/// timeout never reach the recreated queues.
pub fn io_recovers(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let mut c = crate::backend::test_sim();
    c.io.queues = 2;
    c.io.depth = 64;
    c.io.nslots = 512;
    c.io.slot_bytes = 4096;
    c.media = Media::Hbm;
    c.capacity_bytes = 16 << 20;
    let s = storage(gpu, b, c)?;
    let io = s.io();
    clean("before the stall", &reads(io)?)?;
    s.set_stall(true)?;
    let stalled = reads(io)?;
    s.set_stall(false)?;
    let failed = io.failed_queue_pairs()?;
    if failed.is_empty()
        || !stalled
            .error_log
            .iter()
            .any(|e| e.kind == IoErrorKind::Timeout)
    {
        return bad(format!(
            "a stall failed no queue pair ({} errors logged)",
            stalled.error_log.len()
        ));
    }
    if stalled.verify_failures != 0 {
        return bad(format!(
            "{} wrong values while stalled",
            stalled.verify_failures
        ));
    }
    // The commands the stalled backend held may land now, into the failed queues.
    std::thread::sleep(Duration::from_millis(100));
    let r = io.recover()?;
    if r.queue_pairs != failed || !io.failed_queue_pairs()?.is_empty() {
        return bad(format!(
            "recovered {:?} of failed {failed:?}; still failed: {:?}",
            r.queue_pairs,
            io.failed_queue_pairs()?
        ));
    }
    for round in 0..3 {
        clean(&format!("after the recovery, round {round}"), &reads(io)?)?;
    }
    let mut detail = format!(
        "{} queue pairs failed by a stall, recovered, 3 clean runs",
        failed.len()
    );
    if let Some(sim) = SimArray::of(s.as_ref()) {
        // Completions withheld past the timeout, delivered after the recovery.
        let late = Duration::from_millis(900);
        sim.set_fault(Some(Fault {
            lba: 0,
            nlb: u64::MAX / 2,
            status: 0,
            lie: Some(Lie::Withhold(late)),
        }))?;
        let withheld = reads(io)?;
        sim.set_fault(None)?;
        if withheld.verify_failures != 0 || io.failed_queue_pairs()?.is_empty() {
            return bad(format!(
                "withheld completions: {} wrong values, failed queue pairs {:?}",
                withheld.verify_failures,
                io.failed_queue_pairs()?
            ));
        }
        let r = io.recover()?;
        std::thread::sleep(late + Duration::from_millis(200)); // when they would have come
        clean("after withheld completions were due", &reads(io)?)?;
        detail += &format!(
            "; {} queue pairs failed by withheld completions, recovered, none came late",
            r.queue_pairs.len()
        );
    }
    Ok(detail)
}

/// The cache: a flush during a stall leaves the lines quarantined; `Cache::recover`
/// makes them dirty lines again and the next flush writes them (read back from the SSDs
/// after an invalidate); a read that failed during a stall leaves a quarantined slot,
/// which the recovery empties, and the read then succeeds.
pub fn cache_recovers(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let lines = 1024u32;
    let cfg = protocol_config(4096, lines);
    let mut c = crate::backend::sim_for_cache(DriveProfile::ideal(), &cfg);
    c.io.queues = 4;
    c.io.depth = 64;
    c.capacity_bytes = 16 << 20;
    c.media = Media::Host;
    let s = storage(gpu, b, c)?;
    let cache = Cache::new(s.io(), cfg)?;
    let n = (lines as u64 * 1024) / 2; // half the cache
    let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
    let data: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    a.load(&data, 0)?;
    s.set_stall(true)?;
    let flushed = cache.flush();
    s.set_stall(false)?;
    let failed = match flushed {
        Err(Error::WriteBack { failed, .. }) if failed > 0 => failed,
        other => return bad(format!("a flush during a stall: {other:?}")),
    };
    std::thread::sleep(Duration::from_millis(100));
    // The cache's fill service uses the queue pairs: only the cache may recover them.
    if !matches!(s.io().recover(), Err(Error::InvalidArgument(_))) {
        return bad("IoArray::recover went ahead under a live cache's fill service".into());
    }
    let r = cache.recover()?;
    if r.lines_to_write == 0 || r.io.queue_pairs.is_empty() {
        return bad(format!("recovery after the failed flush: {r:?}"));
    }
    cache.flush()?;
    a.invalidate()?;
    let mut back = vec![0u32; n as usize];
    a.read(0, &mut back)?;
    if back != data {
        let wrong = back.iter().zip(&data).filter(|(x, y)| x != y).count();
        return bad(format!(
            "{wrong} of {n} elements wrong after the retried write-back"
        ));
    }
    // A read that fails during a stall: its slot is quarantined, then given back.
    a.invalidate()?;
    s.set_stall(true)?;
    let read = a.read(0, &mut back);
    s.set_stall(false)?;
    if read.is_ok() {
        return bad("a read during a stall succeeded".into());
    }
    let _ = cache.take_errors();
    std::thread::sleep(Duration::from_millis(100));
    let r2 = cache.recover()?;
    back.fill(0);
    a.read(0, &mut back)?;
    if back != data {
        return bad("wrong data read after the second recovery".into());
    }
    cache.check_errors()?;
    Ok(format!(
        "{failed} line write-backs failed, {} made dirty again and written; {} quarantined fill slots emptied; data read back whole",
        r.lines_to_write, r2.slots_freed
    ))
}

/// A cache dropped while a queue pair is failed: its slots stay out of use (a late DMA may
/// still land in them) until `IoArray::recover`, and a new cache gets them after it.
pub fn dropped_cache_slots_wait_for_recovery(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let lines = 512u32;
    let cfg = protocol_config(4096, lines);
    let mut c = crate::backend::sim_for_cache(DriveProfile::ideal(), &cfg);
    c.io.queues = 4;
    c.io.depth = 64;
    c.capacity_bytes = 8 << 20;
    let s = storage(gpu, b, c)?;
    let io = s.io();
    {
        let cache = Cache::new(io, cfg.clone())?;
        let a = cache.array::<u32>(lines as u64 * 1024, 0, Layout::Stripe)?;
        let mut out = vec![0u32; 1 << 16];
        s.set_stall(true)?;
        let r = a.read(0, &mut out);
        s.set_stall(false)?;
        if r.is_ok() {
            return bad("a read during a stall succeeded".into());
        }
        let _ = cache.take_errors();
    }
    let held = io.held_slots();
    if held.is_empty() {
        return bad("the dropped cache's slots went back while a queue pair was failed".into());
    }
    match Cache::new(io, cfg.clone()) {
        Err(Error::InvalidArgument(_)) => {}
        Ok(_) => return bad("a new cache got slots held in quarantine".into()),
        Err(e) => return Err(e),
    }
    let r = io.recover()?;
    if r.released_slots == 0 || !io.held_slots().is_empty() {
        return bad(format!(
            "recovery released {r:?}; still held {:?}",
            io.held_slots()
        ));
    }
    let cache = Cache::new(io, cfg)?;
    let a = cache.array::<u32>(lines as u64 * 1024, 0, Layout::Stripe)?;
    let mut out = vec![0u32; 1 << 16];
    a.read(0, &mut out)?;
    cache.check_errors()?;
    Ok(format!(
        "{held:?} held after the drop; {} slots released by the recovery of {} queue pairs",
        r.released_slots,
        r.queue_pairs.len()
    ))
}
