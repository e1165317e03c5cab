//! Arrays made resident by their first view (`Array::view` under the default
//! `CacheConfig::auto_resident_percent`): the path a port takes without asking.

use super::errors::{faulty_ssd, read_at};
use super::torture::MediaModel;
use super::types::{elems_bytes, types_u32_pass};
use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::{check_all, sim};
use bam::cache::{Cache, CacheConfig, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

/// The default configuration, as a user writes it: an array that fits in 90% of the
/// slots is made resident by its first `view()` (stores and reads through it with
/// partial warps and divergent lanes, the type matrix's kernels), one that does not fit
/// beside it gets ordinary views and streams through the other slots, `ordinary_view`
/// never pins, invalidating the resident array writes it back and keeps it, the resident
/// lines survive the other array's misses, everything written reaches the SSDs at flush,
/// and closing the resident array gives its share back.
pub(super) fn auto_resident(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let line = 4096u32;
    let slots = 1024u32;
    let cfg = CacheConfig::new(line, slots);
    if cfg.auto_resident_percent != CacheConfig::AUTO_RESIDENT_PERCENT {
        return fail("CacheConfig::new does not take the default share".into());
    }
    let share = slots as u64 * cfg.auto_resident_percent as u64 / 100;
    let epl = line as u64 / 4;
    let arr = backend.build(
        gpu,
        sim(1, &cfg, 4096 * line as u64, Duration::from_secs(5)),
    )?;
    let lba = arr.io().geometry().lba_size as u64;
    let cache = Cache::new(arr.io(), cfg)?;
    // A: 600 lines, the last one partial, placed by the cache; B: 500 lines, more than
    // the share leaves beside A; D: 100 lines seen through ordinary_view only.
    let (na, nb, nd) = (600 * epl - 7, 500 * epl, 100 * epl);
    let a = cache.alloc::<u32>(na)?;
    let b = cache.alloc::<u32>(nb)?;
    let d = cache.alloc::<u32>(nd)?;
    let (gen_a, gen_b, gen_d) = (0x5a, 0x5b, 0x5d);
    if a.is_resident() {
        return fail("A is resident before its first view".into());
    }
    let (bad_w, failed_w) = types_u32_pass(&cache, a.view(), gen_a, false, false)?;
    let held = cache.state()?;
    if !a.is_resident() || held.resident != 600 {
        return fail(format!(
            "A (600 lines, share {share} of {slots} slots) after its first view: resident {}, cache {held}",
            a.is_resident()
        ));
    }
    let (bad_r, failed_r) = types_u32_pass(&cache, a.view(), gen_a, true, true)?;
    if bad_w + failed_w + bad_r + failed_r != 0 {
        return fail(format!(
            "A through its default view: write pass {failed_w} failed; check pass {bad_r} wrong, {failed_r} failed"
        ));
    }
    // Invalidating a resident array writes its dirty lines back and keeps them.
    let inv = a.invalidate()?;
    let held = cache.state()?;
    if inv.written != 600 || inv.dropped != 0 || held.resident != 600 {
        return fail(format!(
            "invalidate of resident A after a write pass: {inv:?} (expected 600 written, none dropped), cache {held}"
        ));
    }
    // B does not fit beside A: ordinary views, misses and evictions in the other slots.
    let s0 = cache.stats()?;
    let (bad_b, failed_b) = types_u32_pass(&cache, b.view(), gen_b, false, false)?;
    let (bad_b2, failed_b2) = types_u32_pass(&cache, b.view(), gen_b, true, false)?;
    let s1 = cache.stats()?;
    if b.is_resident() || bad_b + failed_b + bad_b2 + failed_b2 != 0 || s1.evictions == s0.evictions
    {
        return fail(format!(
            "B (500 lines beside A's 600): resident {}, {bad_b2} wrong, {} failed, {} evictions (expected some)",
            b.is_resident(),
            failed_b + failed_b2,
            s1.evictions - s0.evictions
        ));
    }
    // D through ordinary_view: never resident, written and read by the protocol.
    let (bad_d, failed_d) = types_u32_pass(&cache, d.ordinary_view(), gen_d, false, false)?;
    let (bad_d2, failed_d2) = types_u32_pass(&cache, d.ordinary_view(), gen_d, true, false)?;
    if d.is_resident() || bad_d + failed_d + bad_d2 + failed_d2 != 0 {
        return fail(format!(
            "D through ordinary_view: resident {}, {bad_d2} wrong, {} failed",
            d.is_resident(),
            failed_d + failed_d2
        ));
    }
    // A is still all there: no miss while its view reads every element.
    let s2 = cache.stats()?;
    let (bad_a, failed_a) = types_u32_pass(&cache, a.view(), gen_a, true, false)?;
    let s3 = cache.stats()?;
    if bad_a + failed_a != 0 || s3.misses != s2.misses {
        return fail(format!(
            "A after B and D: {bad_a} wrong, {failed_a} failed, {} misses (expected none)",
            s3.misses - s2.misses
        ));
    }
    cache.flush()?;
    let mut model = MediaModel::fresh(&*arr);
    for (x, n, gen) in [(&a, na, gen_a), (&b, nb, gen_b), (&d, nd, gen_d)] {
        model.lay(
            x,
            Layout::Stripe,
            lba,
            line as usize,
            &elems_bytes(4, n, gen),
        );
    }
    model.compare(&*arr)?;
    // Closing A gives its slots and its share back: C (900 lines, the whole share) is
    // resident at its first view and reads what the SSD holds.
    let a_start = a.start_lba();
    a.close()?;
    let after = cache.state()?;
    if after.resident != 0 {
        return fail(format!(
            "after A closed: expected nothing resident, got {after}"
        ));
    }
    let c = cache.alloc::<u32>(900 * epl)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let word0 = c.start_lba() * lba / 4;
    let [c_failed, c_wrong] = check_all(&cache, c.view(), word0, 48, &res)?;
    let held_c = cache.state()?;
    if !c.is_resident() || held_c.resident != 900 || c_failed + c_wrong != 0 {
        return fail(format!(
            "C (900 lines, the whole share) after A closed: resident {}, cache {held_c}, {c_failed} failed, {c_wrong} wrong reads",
            c.is_resident()
        ));
    }
    c.close()?;
    d.close()?;
    b.close()?;
    cache.close()?;
    Ok(format!(
        "A (600 lines at LBA {a_start}) resident at its first view, written and read (partial warps), kept through {} evictions of B (500 lines, ordinary: no room in the {share}-line share); D through ordinary_view never pinned; all written back at flush; C (900 lines) resident once A closed",
        s1.evictions - s0.evictions
    ))
}

/// A media error while the first view reads the array in: the view stays ordinary
/// (nothing pinned), the error reaches the array's `check_errors` with its LBA, and the
/// kernel's reads of other lines succeed while those of the faulty line fail.
pub(super) fn auto_resident_fault(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let cfg = CacheConfig::new(4096, 1024);
    let arr = backend.build(gpu, faulty_ssd(&cfg))?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<u32>((2u64 << 20) / 4, 0, Layout::Stripe)?;
    let view = a.view();
    let held = cache.state()?;
    if a.is_resident() || held.resident != 0 {
        return fail(format!(
            "first view over a faulty line: resident {}, cache {held} (expected ordinary, nothing pinned)",
            a.is_resident()
        ));
    }
    let logged = match a.check_errors() {
        Err(Error::Io { errors, .. }) if errors.iter().any(|e| e.lba == 1000) => errors[0].to_string(),
        other => {
            return fail(format!(
                "the failed read-in's error in Array::check_errors: expected one at LBA 1000, got {other:?}"
            ))
        }
    };
    // Line 125 holds LBAs 1000..1008: element 125 * 1024 fails, its neighbours read.
    let idx = DeviceBuffer::zeroed(gpu, 8 * 32)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let [failed, wrong] = read_at(
        &cache,
        view,
        &[0, 124 * 1024, 125 * 1024, 126 * 1024],
        &idx,
        &res,
    )?;
    let again = cache.check_errors();
    if failed != 1 || wrong != 0 || !matches!(again, Err(Error::Io { .. })) {
        return fail(format!(
            "reads through the ordinary view: {failed} failed (expected 1), {wrong} wrong, errors {again:?}"
        ));
    }
    a.close()?;
    cache.close()?;
    Ok(format!(
        "the view stayed ordinary, nothing pinned; the read-in's error: {logged}; the faulty line's read failed, its neighbours read"
    ))
}
