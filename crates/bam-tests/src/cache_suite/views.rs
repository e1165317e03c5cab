//! The cache's slots seen through views: a resident view, the fill service's spare
//! slots, a line whose first element wraps past 2^64.

use super::torture::{launch_bounded, rng_next, rng_seed, MediaModel};
use super::types::{elems_bytes, types_u32_pass};
use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::protocol_config;
use crate::cache_kernels::{counts, launch_test, sim};
use bam::cache::{ArrayView, Cache, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

/// Resident views (`Array::make_resident`): stores and reads through the view with
/// partial warps and divergent lanes (the type matrix's kernels, 4-byte elements), the
/// lines staying in their slots while another array larger than the rest of the cache is
/// written and read through it, the dirty lines reaching the SSD at flush, an array larger
/// than the free slots refused with a clear error, and the slots given back at release.
pub(super) fn resident(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let line = 4096u32;
    let slots = 1024u32;
    let cfg = protocol_config(line, slots);
    let epl = line as u64 / 4;
    // A: 400 lines, the last one partial; B: 1600 lines, more than the 624 slots A leaves.
    let (na, nb) = (400 * epl - 5, 1600 * epl);
    let arr = backend.build(
        gpu,
        sim(1, &cfg, 2800 * line as u64, Duration::from_secs(5)),
    )?;
    let lba = arr.io().geometry().lba_size as u64;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(na, 0, Layout::Stripe)?;
    let b = cache.array::<u32>(nb, 400 * line as u64 / lba, Layout::Stripe)?;
    let (gen_a, gen_b) = (0x7a, 0x7b);
    let r = a.make_resident()?;
    let held = cache.state()?;
    if held.resident != 400 || !held.is_idle() || !r.contiguous() {
        return fail(format!(
            "after make_resident in an empty cache: expected 400 resident slots in one run and nothing else held, got {held} (contiguous: {})",
            r.contiguous()
        ));
    }
    // Stores through the resident view, then reads (a[i], try_read, array_ref, lines).
    let (bad_w, failed_w) = types_u32_pass(&cache, r.view(), gen_a, false, false)?;
    let (bad_r, failed_r) = types_u32_pass(&cache, r.view(), gen_a, true, true)?;
    if bad_w + failed_w + bad_r + failed_r != 0 {
        return fail(format!(
            "resident view: write pass {failed_w} failed; check pass {bad_r} wrong, {failed_r} failed"
        ));
    }
    // B streams through the other slots: misses and evictions, none of A's lines.
    let s0 = cache.stats()?;
    let (bad_b, failed_b) = types_u32_pass(&cache, b.view(), gen_b, false, false)?;
    let (bad_b2, failed_b2) = types_u32_pass(&cache, b.view(), gen_b, true, false)?;
    let s1 = cache.stats()?;
    if bad_b + failed_b + bad_b2 + failed_b2 != 0 || s1.evictions == s0.evictions {
        return fail(format!(
            "array B beside the resident A: {bad_b2} wrong, {} failed, {} evictions (expected some)",
            failed_b + failed_b2,
            s1.evictions - s0.evictions
        ));
    }
    // A is still all there: its resident view reads right, its ordinary view never misses.
    let (bad_a, failed_a) = types_u32_pass(&cache, r.view(), gen_a, true, false)?;
    let (bad_o, failed_o) = types_u32_pass(&cache, a.view(), gen_a, true, false)?;
    let s2 = cache.stats()?;
    if bad_a + failed_a + bad_o + failed_o != 0 || s2.misses != s1.misses {
        return fail(format!(
            "A after B: resident view {bad_a} wrong / {failed_a} failed, ordinary view {bad_o} wrong / {failed_o} failed, {} misses (expected none)",
            s2.misses - s1.misses
        ));
    }
    // An array that needs more slots than are free is refused, holding nothing.
    let c = cache.array::<u32>(700 * epl, 2000 * line as u64 / lba, Layout::Stripe)?;
    let refused = match c.make_resident() {
        Err(Error::InvalidArgument(m)) if m.contains("700 lines") && m.contains("hold 400") => m,
        other => {
            return fail(format!(
                "make_resident of 700 lines beside 400 resident in 1024 slots: expected a refusal, got {:?}",
                other.map(|g| g.view())
            ))
        }
    };
    // Released: the slots come back (the 700 lines fit now), the data reaches the SSD.
    r.release()?;
    let after = cache.state()?;
    // C into a full cache: no run of empty slots, so through the slot table. Its data is
    // the media's pattern (never written).
    let c_res = c.make_resident()?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let word0 = 2000 * line as u64 / 4;
    let args: (ArrayView, u32, u64, u64) = (c_res.view(), 0, word0, res.ptr());
    // SAFETY: matches bam_cache_check_u32(bam_array_view, uint32_t, uint64_t, unsigned long
    // long*); `res` outlives launch_bounded's synchronisation.
    unsafe {
        launch_bounded(
            &cache,
            "bam_cache_check_u32",
            (48, 128),
            &args,
            Duration::from_secs(60),
            &String::new,
        )?
    };
    cache.check_errors()?;
    let [c_failed, c_wrong] = counts(&res)?;
    if c_res.contiguous() || c_failed + c_wrong != 0 {
        return fail(format!(
            "C resident in a full cache: contiguous {} (expected a slot table), {c_failed} failed, {c_wrong} wrong reads",
            c_res.contiguous()
        ));
    }
    c_res.release()?;
    cache.flush()?;
    let mut model = MediaModel::fresh(&*arr);
    for (x, n, gen) in [(&a, na, gen_a), (&b, nb, gen_b)] {
        model.lay(
            x,
            Layout::Stripe,
            lba,
            line as usize,
            &elems_bytes(4, n, gen),
        );
    }
    model.compare(&*arr)?;
    if after.resident != 0 || !after.is_idle() {
        return fail(format!(
            "after release: expected nothing resident or held, got {after}"
        ));
    }
    c.close()?;
    b.close()?;
    a.close()?;
    cache.close()?;
    Ok(format!(
        "400 resident lines in one run of slots, written and read through the resident view (partial warps), kept through {} evictions of a 1600-line array, written back at flush; 700 lines resident through a slot table in a full cache, read right; refused: {refused}",
        s1.evictions - s0.evictions
    ))
}

/// The fill service's spare slots (`CacheConfig::spare_slots`): in a cache large enough
/// each service warp holds one (the host sees them as `reserved`, not locked); they cost
/// no capacity (an array exactly the cache's size, read three times, is held whole from
/// the second pass on, the spares beside it); data read through fills that took spares
/// is right; flushes and invalidations pass the spares by; a resident view still gets one
/// run of slots (make_resident recalls the spares).
pub(super) fn spare_slots(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let (line, slots) = (4096u32, 8192u32);
    let cfg = protocol_config(line, slots);
    let spare = cfg.spare_slots() as u64;
    if spare == 0 {
        return fail(format!("a cache of {slots} lines should get spare slots"));
    }
    let n = slots as u64 * line as u64 / 8;
    let capacity = (n * 8 + (4 << 20)).next_multiple_of(1 << 20);
    let arr = backend.build(gpu, sim(1, &cfg, capacity, Duration::from_secs(5)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    // A new cache: every service warp holds its first spare (the slots after the lines).
    let st = cache.state()?;
    if st.reserved != spare
        || st.slots != slots as u64 + spare
        || st.empty != slots as u64
        || !st.is_idle()
    {
        return fail(format!(
            "a new cache: expected {spare} spares held and {slots} empty slots, got {st}"
        ));
    }
    let a = cache.array::<u64>(n, 0, Layout::Stripe)?;
    let data: Vec<u64> = (0..n).map(|i| rng_next(&mut rng_seed(0x5a5a, i))).collect();
    a.load(&data, 0)?;
    // Written back and dropped: the reads below fill every line from the SSD.
    let inv = a.invalidate()?;
    if inv.written != slots as u64 {
        return fail(format!(
            "invalidate after the load wrote {} lines back, expected {slots}",
            inv.written
        ));
    }
    // Three passes. The first fills every line; on the way a few lines may be evicted
    // (at most one per spare): a warp's first spare (a slot after the lines) gets a line
    // ahead of the clock hand, which later finds that slot occupied and may evict it
    // while a slot it skipped is still empty. The second pass reads those few again
    // (into spares), and by its end the cache holds every line. Its next spares are
    // mostly the empty slots; but the clock takes the first idle slot it meets, and an
    // unreferenced line it meets before an empty slot is evicted (seen once in seven runs
    // on file-direct: 1 eviction in the second pass, 1 miss in the third). So later
    // passes may miss, at most once per spare, and no capacity is lost: every line is
    // held at the end, beside the spares.
    let mut passes = Vec::new();
    let mut wrong = 0;
    for _ in 0..3 {
        let mut out = vec![0u64; n as usize];
        cache.reset_stats()?;
        a.read(0, &mut out)?;
        passes.push(cache.stats()?);
        wrong += out.iter().zip(&data).filter(|(x, y)| x != y).count();
    }
    let (first, second, third) = (&passes[0], &passes[1], &passes[2]);
    let st = cache.state()?;
    if wrong != 0
        || first.misses != slots as u64
        || first.evictions > spare
        || second.misses > spare
        || second.evictions > spare
        || third.misses > second.evictions
        || third.evictions > second.evictions
        || st.evictable != slots as u64
        || st.reserved == 0
        || st.reserved > spare
        || st.empty + st.reserved != spare
        || !st.is_idle()
    {
        return fail(format!(
            "an array the cache's size read three times: {wrong} wrong values; misses {} / {} / {} (expected {slots}, at most {spare}, at most the second pass's evictions), evictions {} / {} / {} (expected at most {spare}, at most {spare}, at most the second pass's); state {st} (expected {slots} evictable lines, 1 to {spare} spares held and the other spare slots empty)",
            first.misses, second.misses, third.misses, first.evictions, second.evictions, third.evictions
        ));
    }
    // Make every line dirty again: the flush writes each back once and skips the spares.
    a.load(&data, 0)?;
    let fl = cache.flush()?;
    let st = cache.state()?;
    if fl.written != slots as u64
        || st.reserved == 0
        || st.evictable != slots as u64
        || !st.is_idle()
    {
        return fail(format!(
            "flush: {} lines written (expected {slots}); state after it {st}",
            fl.written
        ));
    }
    // The spares have moved about the cache by now; a resident view of the whole array
    // still gets one run of slots (make_resident recalls the spares first) and reads right.
    let held_before = st.reserved;
    let r = a.make_resident()?;
    let contiguous = r.contiguous();
    let st = cache.state()?;
    r.release()?;
    let mut out = vec![0u64; n as usize];
    a.read(0, &mut out)?;
    let wrong = out.iter().zip(&data).filter(|(x, y)| x != y).count();
    if !contiguous || wrong != 0 {
        return fail(format!(
            "make_resident with {held_before} spares held: contiguous view {contiguous} (expected true), {wrong} wrong values after it; state while resident {st}"
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "{spare} spares on {slots} lines; misses {} / {} / 0 in three passes ({} evictions in the first); flush wrote {}; a resident view of the whole array got one run of slots",
        first.misses, second.misses, first.evictions, fl.written
    ))
}

/// `acquire_line` with a line whose first element index (line * elements a line) wraps
/// past 2^64: the span is empty, no line word is touched (a product that wrapped to a
/// small index would read the line word of the huge line out of bounds).
pub(super) fn far_line(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = protocol_config(4096, 64);
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_secs(2)))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>(64 * 1024, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let args: (ArrayView, u64) = (a.view(), res.ptr());
    // SAFETY: matches bam_cache_acquire_far_line(bam_array_view, unsigned long long*);
    // `res` outlives cache.sync().
    unsafe { launch_test(&cache, "bam_cache_acquire_far_line", 1, 32, &args)? };
    cache.sync()?;
    let [count, held] = counts(&res)?;
    cache.check_errors()?;
    if count != 0 || held != 0 {
        return fail(format!("span of {count} elements, holding data: {held}"));
    }
    a.close()?;
    cache.close()?;
    Ok("empty span, nothing acquired, no error".into())
}
