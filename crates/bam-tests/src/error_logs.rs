//! Errors reach their owner: each cache, scan and raw job has its own device log, each
//! array takes its own share of its cache's, a drain never loses what kernels log while
//! it reads, and an array's drop gives the errors it could not return back to its cache.

use crate::backend::fail as bad;
use crate::backend::TestBackend;
use crate::cache_kernels::protocol_config;
use bam::abi::IoView;
use bam::cache::{Cache, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::storage::sim::DriveProfile;
use bam::storage::sim::Media;
use bam::storage::Fault;
use bam::{Error, IoArray, Result};
use bam_bench::raw::{run_job, Job, Rw};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// NVMe Unrecovered Read Error (SCT 2, SC 0x81): what the faulty LBAs complete with.
const MEDIA_ERROR: u16 = 0x281;

/// Two arrays in one cache, the first on faulty LBAs; a raw job and a scan over the same
/// LBAs: each owner finds its own errors and nobody else's.
pub fn owners(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let lines = 2048u32;
    let cfg = protocol_config(4096, lines);
    let mut c = crate::backend::sim_for_cache(DriveProfile::ideal(), &cfg);
    c.ssds = 1;
    c.io.queues = 4;
    c.io.depth = 256;
    c.capacity_bytes = 32 << 20;
    c.media = Media::Hbm;
    // Array A: lines 0..512 (LBAs 0..4096 of 512 B); line 128 faulty (one error a read
    // of it: 1024, within the log's capacity).
    c.fault = Some(Fault {
        lba: 1024,
        nlb: 8,
        status: MEDIA_ERROR,
        lie: None,
    });
    let s = b.build(gpu, c)?;
    let io = s.io();
    // A raw job over the faulty LBAs first (it needs buffer slots the cache takes all
    // of): its errors are its own, not the I/O layer's log's, nor the cache's after.
    let job = Job {
        rw: Rw::RandRead,
        rwmix_read: 100,
        bs: 4096,
        threads: 256,
        queues: 4,
        ssds: 1,
        runtime: Duration::from_secs(1),
        ios_per_thread: Some(64),
        verify: false,
        gen: 0,
        warp_io: false,
        seed: 3,
        span_lbas: 2048,
        threads_per_block: 0,
    };
    let r = run_job(io, &job, None)?;
    if r.error_log.is_empty() {
        return bad("the raw job over faulty LBAs logged no error".into());
    }
    io.check_errors().map_err(|e| {
        Error::InvalidArgument(format!("the I/O layer's log got the job's errors: {e}"))
    })?;
    let cache = Cache::new(io, cfg)?;
    let elems = 512 * 1024u64;
    let a = cache.array::<u32>(elems, 0, Layout::Stripe)?;
    let bb = cache.array::<u32>(elems, a.start_lba() + 4096, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let [fa, _] = crate::cache_kernels::check_all(&cache, a.view(), 0, 64, &res)?;
    let [fb, wb] = crate::cache_kernels::check_all(&cache, bb.view(), 4096 * 128, 64, &res)?;
    if fa == 0 || fb != 0 || wb != 0 {
        return bad(format!(
            "reads: {fa} failed in A (want > 0), {fb} failed and {wb} wrong in B"
        ));
    }
    bb.check_errors()
        .map_err(|e| Error::InvalidArgument(format!("B was handed A's errors: {e}")))?;
    let (na, ea) = a.take_errors()?;
    let lbas = 1024..1032u64;
    if na == 0 || ea.iter().any(|e| !lbas.contains(&e.lba)) {
        return bad(format!(
            "A took {na} errors, first outside its faulty LBAs: {:?}",
            ea.iter()
                .find(|e| !lbas.contains(&e.lba))
                .map(|e| e.to_string())
        ));
    }
    cache.check_errors().map_err(|e| {
        Error::InvalidArgument(format!(
            "the cache held errors that were A's or the raw job's: {e}"
        ))
    })?;
    Ok(format!(
        "A: {fa} failed reads, {na} errors all its own; B: clean; raw job: {} errors in its own log; cache and I/O layer logs empty",
        r.error_log.len()
    ))
}

/// Errors logged while the host drains: every one taken exactly once, none lost.
pub fn concurrent_drain(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let mut c = crate::backend::test_sim();
    c.io.queues = 1;
    c.io.depth = 64;
    c.io.nslots = 64;
    c.capacity_bytes = 8 << 20;
    let s = b.build(gpu, c)?;
    let io: &IoArray = s.io();
    let (threads, per_thread) = (64u32, 100u32);
    let stream = gpu.stream()?;
    let args: (IoView, u32, u32) = (io.io_view(), per_thread, 200_000);
    // SAFETY: matches bam_log_burst(bam_io_view, uint32_t, uint32_t); the I/O layer (and
    // its log) outlives the synchronisation below.
    unsafe { crate::kernels(gpu)?.launch(&stream, "bam_log_burst", 1, threads, 0, &args)? };
    let mut seen = HashSet::new();
    let (mut counted, mut drains, mut dups) = (0u64, 0u32, 0u64);
    let t0 = Instant::now();
    let mut take = |counted: &mut u64, drains: &mut u32| -> Result<()> {
        let (n, log) = io.take_errors()?;
        *counted += n as u64;
        *drains += 1;
        for e in log {
            if !seen.insert(e.lba) {
                dups += 1;
            }
        }
        Ok(())
    };
    while t0.elapsed() < Duration::from_millis(40) {
        take(&mut counted, &mut drains)?;
    }
    gpu.sync_timeout(&stream, Duration::from_secs(30))?;
    take(&mut counted, &mut drains)?;
    let total = (threads * per_thread) as u64;
    let missing = (0..total).filter(|l| !seen.contains(l)).count();
    if counted != total || missing != 0 || dups != 0 {
        return bad(format!(
            "{total} errors logged: {counted} counted, {} entries, {missing} missing, {dups} twice, over {drains} drains",
            seen.len()
        ));
    }
    Ok(format!(
        "{total} errors logged over ~20 ms while the host drained {drains} times: each taken once"
    ))
}

/// An array dropped with lines that fail to write back: its errors go back to the cache,
/// whose check_errors reports them (its drop used to print them and leave the log empty).
/// The simulated array only: the fault starts after the data was loaded.
pub fn array_drop_keeps_errors(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let lines = 256u32;
    let cfg = protocol_config(4096, lines);
    let mut c = crate::backend::sim_for_cache(DriveProfile::ideal(), &cfg);
    c.ssds = 1;
    c.io.queues = 2;
    c.io.depth = 64;
    c.capacity_bytes = 8 << 20;
    let s = b.build(gpu, c)?;
    let Some(sim) = bam::storage::sim::SimArray::of(s.as_ref()) else {
        return bad("needs the simulated array's run-time fault injection".into());
    };
    let cache = Cache::new(s.io(), cfg)?;
    {
        let a = cache.array::<u32>(64 * 1024, 0, Layout::Stripe)?;
        a.load(&vec![7u32; 64 * 1024], 0)?;
        sim.set_fault(Some(Fault {
            lba: 0,
            nlb: 64,
            status: MEDIA_ERROR,
            lie: None,
        }))?;
        // Dropped: the write-backs of lines 0..8 fail (settled: they stay dirty).
    }
    let r = match cache.check_errors() {
        Err(Error::Io { count, errors }) if count > 0 => {
            if errors.iter().any(|e| e.lba >= 64) {
                return bad(format!("errors outside the faulty LBAs: {errors:?}"));
            }
            Ok(format!(
                "{count} write-back errors of the dropped array reported by Cache::check_errors"
            ))
        }
        other => bad(format!(
            "after the drop, Cache::check_errors returned {other:?}"
        )),
    };
    sim.set_fault(None)?;
    cache.close()?; // the lines the array left write now
    r
}
