//! Races in the cache, each played on the GPU: a host call whose wait for its kernel ends
//! at the bound while the kernel runs on, a fill-ring ticket its requester gave up, an
//! unpinned read whose warp sleeps while its line is refilled 512 times into the same
//! slot, and stores through a resident view while flushes write their lines back. Each
//! failed before its fix.

use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::protocol_config;
use crate::cache_kernels::{check_all, launch_test, sim};
use bam::cache::{ArrayView, Cache, CacheConfig, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::{Error, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `Array::read` and `Cache::flush` on a stalled device, with a host wait bound
/// (`CacheConfig::sync_timeout`) of 100 ms against a cache timeout of 2 s: each call
/// returns `Error::Timeout` while its kernel still runs, and the kernel, which goes on
/// once the device does, never writes into memory handed out since. Decoy buffers of the
/// sizes of the call's own (where a freed block is handed out again) are allocated right
/// after the call and filled with a sentinel; they must keep it. Before, the call freed its
/// buffers (the read's staging and failure count, the flush's result) when the wait
/// failed, and the kernel wrote into whatever took them.
pub fn sync_timeout_keeps_kernel_memory(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    const SENTINEL: u8 = 0xa5;
    let cfg = CacheConfig {
        timeout: Some(Duration::from_secs(2)),
        sync_timeout: Some(Duration::from_millis(100)),
        ..protocol_config(4096, 64)
    };
    let arr = backend.build(gpu, sim(1, &cfg, 8 << 20, Duration::from_secs(2)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let n = 32 * 1024u64; // 32 lines of u32
    let a = cache.array::<u32>(n, 0, Layout::Stripe)?;
    // Decoys: 4 of each size, filled with the sentinel.
    let decoys = |sizes: &[usize]| -> Result<Vec<DeviceBuffer>> {
        let mut v = Vec::new();
        for &len in sizes {
            for _ in 0..4 {
                let b = DeviceBuffer::zeroed(gpu, len)?;
                b.write(0, &vec![SENTINEL; len])?;
                v.push(b);
            }
        }
        Ok(v)
    };
    // The stalled call's kernel runs on once the device does: wait for it (the cache's
    // own bound is 100 ms, so ask again), then count the decoys' bytes it changed.
    let settle = |decoys: &[DeviceBuffer]| -> Result<usize> {
        let t0 = Instant::now();
        while let Err(e) = cache.sync() {
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(e);
            }
        }
        let mut changed = 0;
        for d in decoys {
            let mut b = vec![0u8; d.len()];
            d.read(0, &mut b)?;
            changed += b.iter().filter(|&&x| x != SENTINEL).count();
        }
        Ok(changed)
    };
    let stall = |on: bool| -> Result<()> {
        arr.set_stall(on)?;
        // The controllers poll the stall switch: give them time to see it.
        std::thread::sleep(Duration::from_millis(100));
        Ok(())
    };
    let expect_timeout = |what: &str, r: Result<()>| -> Result<()> {
        match r {
            Err(Error::Timeout(_)) => Ok(()),
            other => fail(format!(
                "{what} on a stalled device with a 100 ms wait bound: expected Error::Timeout, got {other:?}"
            )),
        }
    };

    // A read whose misses wait on the stalled device.
    stall(true)?;
    let mut out = vec![0u32; n as usize];
    let t0 = Instant::now();
    let r = a.read(0, &mut out);
    let read_secs = t0.elapsed().as_secs_f64();
    let d = decoys(&[4 * n as usize, 8])?;
    arr.set_stall(false)?;
    expect_timeout("Array::read", r)?;
    let read_changed = settle(&d)?;

    // Stores (the device runs), then a flush whose write-backs wait on the stalled device.
    let data: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(0x9e37_79b9) | 1)
        .collect();
    a.load(&data, 0)?;
    stall(true)?;
    let r = cache.flush().map(|_| ());
    let d = decoys(&[32, 8, 16, 64])?;
    arr.set_stall(false)?;
    expect_timeout("Cache::flush", r)?;
    let flush_changed = settle(&d)?;
    if read_changed + flush_changed != 0 {
        return fail(format!(
            "after a timed-out wait the kernel wrote into memory allocated since: {read_changed} B \
             of the decoys after Array::read, {flush_changed} B after Cache::flush"
        ));
    }
    // Nothing was lost: the stores reach the SSD and read back.
    cache.flush()?;
    let mut back = vec![0u32; n as usize];
    a.read(0, &mut back)?;
    let wrong = back.iter().zip(&data).filter(|(x, y)| x != y).count();
    if wrong != 0 {
        return fail(format!(
            "{wrong} of {n} elements read back wrong after the stalls"
        ));
    }
    cache.take_errors()?;
    a.close()?;
    cache.close()?;
    Ok(format!(
        "Array::read returned Error::Timeout after {read_secs:.2} s, Cache::flush too; their kernels finished later and wrote no byte of the 36 decoys allocated since; {n} elements read back"
    ))
}

/// A requester that gives its fill-ring ticket up (its entry never came free) leaves
/// a mark the service skips; before, the service waited for that ticket for ever, every
/// later miss timed out and the service could not stop.
pub fn fill_ticket_given_up(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig {
        timeout: Some(Duration::from_millis(300)),
        ..protocol_config(4096, 64)
    };
    let arr = backend.build(gpu, sim(1, &cfg, 8 << 20, Duration::from_secs(2)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(256 * 1024, 0, Layout::Stripe)?;
    let out = DeviceBuffer::zeroed(gpu, 4)?;
    let args: (ArrayView, u64) = (a.view(), out.ptr());
    // SAFETY: matches bam_fill_ring_give_up(bam_array_view, uint32_t*); `out` outlives the
    // synchronisation below.
    unsafe { launch_test(&cache, "bam_fill_ring_give_up", 1, 32, &args)? };
    cache.sync()?;
    let mut posted = [0u32; 1];
    out.read(0, &mut posted)?;
    if posted[0] != 0 {
        return fail("post_fill posted into an entry that never came free".into());
    }
    // Misses after the given-up ticket: their requests queue behind it in the ring.
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let [failed, wrong] = check_all(&cache, a.view(), 0, 8, &res)?;
    let (count, log) = cache.take_errors()?;
    if failed + wrong != 0 || count != 0 {
        return fail(format!(
            "after a given-up fill ticket: {failed} failed reads, {wrong} wrong values, {count} errors logged (first: {}): the fill service stalled on the ticket",
            log.first().map_or("none".into(), |e| e.to_string())
        ));
    }
    a.close()?;
    cache.close()?;
    Ok("post_fill gave its ticket up after 1 ms; 262,144 elements read through the ring behind it, none failed".into())
}

/// An unpinned read whose two loads of the line word lie 200 us apart, while the
/// slot showed another line's value and the word came back as 512 refills leave it
/// (unchanged), is dropped; before, it returned the other line's value.
pub fn unpinned_read_generation_wrap(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = protocol_config(4096, 64);
    let arr = backend.build(gpu, sim(1, &cfg, 8 << 20, Duration::from_secs(2)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(64 * 1024, 0, Layout::Stripe)?;
    let out = DeviceBuffer::zeroed(gpu, 12)?;
    let args: (ArrayView, u64, u64) = (a.view(), 200_000, out.ptr());
    // SAFETY: matches bam_cache_unpinned_wrap(bam_array_view, uint64_t, uint32_t*); `out`
    // outlives the synchronisation below.
    unsafe { launch_test(&cache, "bam_cache_unpinned_wrap", 1, 32, &args)? };
    cache.sync()?;
    let mut o = [0u32; 3];
    out.read(0, &mut o)?;
    let want = bam::pattern::pattern_word(0, 0, 0);
    if o[2] != want {
        return fail(format!(
            "element 0 read {:#x} before the played read, expected {want:#x}",
            o[2]
        ));
    }
    if o[0] != 0 {
        return fail(format!(
            "the read succeeded across a 200 us pause and returned {:#x} (the element holds {:#x}): another line's value taken as the line's",
            o[1], o[2]
        ));
    }
    cache.check_errors()?;
    a.close()?;
    cache.close()?;
    Ok("the read across a 200 us pause (another line's value in the slot meanwhile, the word unchanged) was dropped".into())
}

/// Stores through a resident view in bursts while the host flushes again and again
/// (against the documented rule, as a user may): every line's last store reaches the SSD
/// at the flush after the kernel. Before, a store during a line's write-back found DIRTY
/// still set and did not mark the line, which the write-back's end then left clean.
pub fn resident_stores_during_flush(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let (line, lines, k) = (4096u32, 128u64, 64u32);
    let cfg = protocol_config(line, 512);
    let arr = backend.build(gpu, sim(1, &cfg, 8 << 20, Duration::from_secs(2)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let epl = line as u64 / 4;
    let a = cache.array::<u32>(lines * epl, 0, Layout::Stripe)?;
    let r = a.make_resident()?;
    let stream = gpu.stream()?;
    let args: (ArrayView, u32, u64) = (r.view(), k, 2_000);
    // SAFETY: matches bam_resident_bursts(bam_array_view, uint32_t, uint64_t); the guard
    // and the cache outlive the synchronisation below.
    unsafe { crate::kernels(gpu)?.launch(&stream, "bam_resident_bursts", 1, 1024, 0, &args)? };
    let t0 = Instant::now();
    let (mut flushes, mut errors) = (0u32, Vec::new());
    while t0.elapsed() < Duration::from_millis(80) {
        match cache.flush() {
            Ok(_) => flushes += 1,
            Err(e) => errors.push(e.to_string()),
        }
    }
    gpu.sync_timeout(&stream, Duration::from_secs(30))?;
    r.release()?;
    cache.flush()?;
    let mut media = vec![0u8; (lines * line as u64) as usize];
    arr.read_medium(0, 0, &mut media)?;
    let lost = media
        .chunks(line as usize)
        .filter(|l| {
            l.chunks_exact(4)
                .any(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) != k)
        })
        .count();
    if lost != 0 || !errors.is_empty() {
        return fail(format!(
            "{lost} of {lines} lines reached the SSD without their last store ({flushes} flushes during the stores, {} failed: {:?})",
            errors.len(),
            errors.first()
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "{lines} lines stored in bursts of {k} during {flushes} flushes: every line's last store reached the SSD"
    ))
}
