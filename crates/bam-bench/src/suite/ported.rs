//! The ported variants: the kernel's `bam::array<T>` forms over the software cache, the
//! storage arrays on (simulated) SSDs; `bam-hit`, `bam-pin-hit` and `bam-hit-unbounded`
//! share one cache that holds every line, `bam-quarter` has one of a quarter of the lines.

use super::bench::Bench;
use super::data::{copy_lines, Elem, Master};
use super::exec::{Ctx, Exec, KArg};
use super::measure::measure;
use super::options::{Form, SuiteOptions, Variant};
use super::report::Step;
use super::report::{Settled, VariantResult};
use crate::cache_study::{study_device, study_io};
use bam::cache::{Array, ArrayView, Cache, CacheConfig, FlushReport, Layout, Resident};
use bam::cuda::DeviceBuffer;
use bam::storage::sim::Media;
use bam::storage::GpuDevice;
use bam::{Error, Result, Storage};
use std::time::Duration;

/// A cache array of any element type.
enum AnyArray<'c> {
    U32(Array<'c, u32>),
    F32(Array<'c, f32>),
    U64(Array<'c, u64>),
}

impl<'c> AnyArray<'c> {
    fn new(cache: &'c Cache<'c>, elem: Elem, n: u64, start_lba: u64) -> Result<Self> {
        Ok(match elem {
            Elem::U32 => AnyArray::U32(cache.array(n, start_lba, Layout::Stripe)?),
            Elem::F32 => AnyArray::F32(cache.array(n, start_lba, Layout::Stripe)?),
            Elem::U64 => AnyArray::U64(cache.array(n, start_lba, Layout::Stripe)?),
        })
    }
    /// The view `Array::view` gives (the first call makes the array resident where it
    /// fits: `bam-default`).
    fn view(&self) -> ArrayView {
        match self {
            AnyArray::U32(a) => a.view(),
            AnyArray::F32(a) => a.view(),
            AnyArray::U64(a) => a.view(),
        }
    }
    fn ordinary_view(&self) -> ArrayView {
        match self {
            AnyArray::U32(a) => a.ordinary_view(),
            AnyArray::F32(a) => a.ordinary_view(),
            AnyArray::U64(a) => a.ordinary_view(),
        }
    }
    fn is_resident(&self) -> bool {
        match self {
            AnyArray::U32(a) => a.is_resident(),
            AnyArray::F32(a) => a.is_resident(),
            AnyArray::U64(a) => a.is_resident(),
        }
    }
    fn store_device(&self, src: &DeviceBuffer, n: u64) -> Result<()> {
        match self {
            AnyArray::U32(a) => a.store_device(src, 0, n),
            AnyArray::F32(a) => a.store_device(src, 0, n),
            AnyArray::U64(a) => a.store_device(src, 0, n),
        }
    }
    fn close(self) -> Result<FlushReport> {
        match self {
            AnyArray::U32(a) => a.close(),
            AnyArray::F32(a) => a.close(),
            AnyArray::U64(a) => a.close(),
        }
    }
    fn invalidate(&self) -> Result<FlushReport> {
        match self {
            AnyArray::U32(a) => a.invalidate(),
            AnyArray::F32(a) => a.invalidate(),
            AnyArray::U64(a) => a.invalidate(),
        }
    }
    fn make_resident(&self) -> Result<AnyResident<'_, 'c>> {
        Ok(match self {
            AnyArray::U32(a) => AnyResident::U32(a.make_resident()?),
            AnyArray::F32(a) => AnyResident::F32(a.make_resident()?),
            AnyArray::U64(a) => AnyResident::U64(a.make_resident()?),
        })
    }
}

/// A resident guard of an [`AnyArray`] (the `bam-resident` variants).
enum AnyResident<'a, 'c> {
    U32(Resident<'a, 'c, u32>),
    F32(Resident<'a, 'c, f32>),
    U64(Resident<'a, 'c, u64>),
}

impl AnyResident<'_, '_> {
    fn view(&self) -> ArrayView {
        match self {
            AnyResident::U32(r) => r.view(),
            AnyResident::F32(r) => r.view(),
            AnyResident::U64(r) => r.view(),
        }
    }
    fn contiguous(&self) -> bool {
        match self {
            AnyResident::U32(r) => r.contiguous(),
            AnyResident::F32(r) => r.contiguous(),
            AnyResident::U64(r) => r.contiguous(),
        }
    }
    fn release(self) -> Result<()> {
        match self {
            AnyResident::U32(r) => r.release(),
            AnyResident::F32(r) => r.release(),
            AnyResident::U64(r) => r.release(),
        }
    }
}

/// The ported variants that share one cache: `bam-hit` and `bam-pin-hit` (every line
/// cached, media in GPU memory) or `bam-quarter` (a quarter of the lines, media in pinned
/// host memory). Setup errors fail all of `vs`.
pub(super) fn ported_variants(
    c: &Ctx,
    b: &mut dyn Bench,
    quarter: bool,
    vs: &[Variant],
    step: &mut dyn FnMut(Step),
) {
    let memory = |slots: u64, lines: u64| {
        let on = match (c.device, quarter) {
            (GpuDevice::Sim { .. }, false) => "simulated SSDs, media in GPU memory".into(),
            (GpuDevice::Sim { .. }, true) => "simulated SSDs, media in pinned host memory".into(),
            (d, _) => d.to_string(),
        };
        format!("a cache of {slots} of the data's {lines} lines over {on}")
    };
    // The last result is held until the cache and arrays are closed (the flush writes
    // dirty lines back): a failure there belongs to it. A setup failure fails every
    // variant that has no result yet.
    let mut reported: Vec<Variant> = Vec::new();
    let mut held: Option<Box<VariantResult>> = None;
    let r = ported_inner(
        c,
        b,
        quarter,
        vs,
        &mut |s| {
            if let Some(h) = held.take() {
                reported.push(h.variant);
                step(Step::Done(h));
            }
            match s {
                Step::Done(r) => held = Some(r),
                s => step(s),
            }
        },
        &memory,
    );
    if let Some(mut h) = held.take() {
        if let Err(e) = &r {
            h.error
                .get_or_insert_with(|| format!("closing the cache after the runs: {e}"));
        }
        reported.push(h.variant);
        step(Step::Done(h));
    }
    if let Err(e) = r {
        for &v in vs.iter().filter(|v| !reported.contains(v)) {
            step(Step::Done(Box::new(VariantResult::failed(
                v,
                memory(0, 0),
                &e,
            ))));
        }
    }
}

/// Sets up the shared cache over its own storage, puts the bench's data there and runs
/// each variant of `vs` on it; closes the arrays and the cache after the runs.
fn ported_inner(
    c: &Ctx,
    b: &mut dyn Bench,
    quarter: bool,
    vs: &[Variant],
    step: &mut dyn FnMut(Step),
    memory: &dyn Fn(u64, u64) -> String,
) -> Result<()> {
    // A quiet GPU before the simulated SSDs and the cache start: their persistent kernels
    // hold SMs from then on, which the gauge (settle.rs) would read as a busy GPU. Nothing
    // large is freed between here and the timed runs.
    let settled = c.settle.wait(&c.stream)?;
    let plan = Plan::new(c, b, quarter)?;
    let io = study_io(
        c.o.queues,
        plan.line,
        plan.cfg.io_slots(),
        Duration::from_secs(5),
    );
    let storage = plan.device.open(c.gpu, &io)?;
    let geo = storage.io().geometry().clone();
    let lba = geo.lba_size as u64;
    let line = plan.line;
    if !line.is_multiple_of(lba) {
        return Err(Error::InvalidArgument(format!(
            "line size {line} B is not a multiple of the SSDs' {lba}-byte blocks"
        )));
    }
    let cache = Cache::new(storage.io(), plan.cfg.clone())?;
    {
        let arrays = place_data(c, b, &cache, &*storage, &plan, lba)?;
        // Ordinary views for every variant but bam-default (Array::view would make the
        // arrays that fit resident for good at its first call).
        let st: Vec<KArg> = arrays
            .iter()
            .map(|a| KArg::View(a.ordinary_view()))
            .collect();
        // Grids sized for the SMs the simulated controllers and the fill service leave
        // (one wave: the suite's kernels are grid-stride loops).
        let sms = cache.free_sms();
        if !quarter {
            preload(c, &cache, b.masters(), &st, sms)?;
        }
        let media_name = match (&plan.device, quarter) {
            (GpuDevice::Sim { .. }, false) => "GPU memory (simulated SSDs)".to_string(),
            (GpuDevice::Sim { .. }, true) => "pinned host memory (simulated SSDs)".to_string(),
            (d, _) => d.to_string(),
        };
        let shared = Shared {
            cache: &cache,
            arrays: &arrays,
            st,
            sms,
            settled,
            media_name,
            slots: plan.slots,
            total: plan.total,
        };
        run_variants(c, b, &shared, vs, step, memory)?;
        for a in arrays {
            a.close()?;
        }
    }
    cache.close()?;
    drop(storage);
    Ok(())
}

/// The shape of the shared cache and of the storage under it.
struct Plan {
    /// Bytes of a cache line.
    line: u64,
    /// SSDs of the device (at least 1).
    nssd: u64,
    /// Lines of each of the bench's arrays on every SSD.
    per_ssd: Vec<u64>,
    /// Lines of all the bench's data.
    total: u64,
    /// Lines the cache holds.
    slots: u32,
    /// The storage: media in GPU memory (all hits) or pinned host memory (quarter).
    device: GpuDevice,
    cfg: CacheConfig,
}

impl Plan {
    /// Sizes the cache for the bench's data (every line, or a quarter of them with
    /// `quarter`) and the storage for each array on its own LBA range, one after the
    /// other (whole lines on every SSD).
    fn new(c: &Ctx, b: &dyn Bench, quarter: bool) -> Result<Plan> {
        let profile = c.o.cache_profile(b.kernel());
        let line = profile.line_bytes as u64;
        let nssd = c.device.ssds().max(1) as u64;
        let lines: Vec<u64> = b
            .masters()
            .iter()
            .map(|m| m.bytes().div_ceil(line))
            .collect();
        let total: u64 = lines.iter().sum();
        let slots = if quarter {
            total.div_ceil(4)
        } else {
            SuiteOptions::hit_slots(total)
        };
        let slots = u32::try_from(slots).map_err(|_| {
            Error::InvalidArgument(format!("{slots} cache lines: more than 2^32 - 1"))
        })?;
        let per_ssd: Vec<u64> = lines.iter().map(|l| l.div_ceil(nssd)).collect();
        let capacity = per_ssd.iter().sum::<u64>() * line + (1 << 20);
        let media = if quarter { Media::Host } else { Media::Hbm };
        let sms = if quarter {
            c.o.sim_sms
        } else {
            c.o.hit_sim_sms
        };
        let cfg = CacheConfig {
            fill_blocks: c.o.fill_blocks,
            readahead: profile.readahead,
            ..CacheConfig::new(line as u32, slots)
        };
        Ok(Plan {
            line,
            nssd,
            per_ssd,
            total,
            slots,
            device: study_device(c.device, media, capacity, sms),
            cfg,
        })
    }
}

/// Opens the cache arrays of the bench's data, each on its own LBA range, and puts the
/// data there: straight onto the simulated media (the cache is empty), else written
/// through the cache and flushed.
fn place_data<'c>(
    c: &Ctx,
    b: &mut dyn Bench,
    cache: &'c Cache<'c>,
    storage: &dyn Storage,
    plan: &Plan,
    lba: u64,
) -> Result<Vec<AnyArray<'c>>> {
    let line = plan.line;
    let mut arrays = Vec::new();
    let mut start = 0u64;
    for (m, per) in b.masters().iter().zip(&plan.per_ssd) {
        arrays.push(AnyArray::new(cache, m.elem, m.len, start * line / lba)?);
        start += per;
    }
    match bam::storage::sim::SimArray::of(storage) {
        Some(sim) => {
            let nssd = plan.nssd;
            for (m, a) in b.masters().iter().zip(&arrays) {
                let first = a.ordinary_view().start_lba * lba;
                for s in 0..nssd as u32 {
                    copy_lines(
                        c,
                        m.buf.ptr(),
                        m.bytes(),
                        sim.medium_ptr(s as usize) + first,
                        line,
                        nssd as u32,
                        s,
                    )?;
                }
            }
        }
        None => {
            for (m, a) in b.masters().iter().zip(&arrays) {
                a.store_device(&m.buf, m.len)?;
            }
            cache.flush()?;
        }
    }
    b.placed();
    Ok(arrays)
}

/// What the variants on one shared cache have in common.
struct Shared<'r, 'c> {
    cache: &'c Cache<'c>,
    arrays: &'r [AnyArray<'c>],
    /// The arrays' views, the kernels' storage arguments.
    st: Vec<KArg>,
    /// SMs for the kernels' grids.
    sms: u32,
    settled: Settled,
    /// Where the data lives, for the results.
    media_name: String,
    /// Lines the cache holds.
    slots: u32,
    /// Lines of all the data.
    total: u64,
}

/// Runs each variant of `vs` on the shared cache and reports it through `step`. The
/// resident variants' guards are made when the first of them runs (every line is cached
/// by then) and released when a variant that is not resident comes (or after the runs),
/// before `bam-default`'s first `Array::view` makes the arrays that fit resident for the
/// rest of their lives (that variant runs after the others of this cache).
fn run_variants(
    c: &Ctx,
    b: &mut dyn Bench,
    sh: &Shared,
    vs: &[Variant],
    step: &mut dyn FnMut(Step),
    memory: &dyn Fn(u64, u64) -> String,
) -> Result<()> {
    let (slots, total) = (sh.slots as u64, sh.total);
    let mut residents: Vec<AnyResident> = Vec::new();
    let mut resident_args: Vec<KArg> = Vec::new();
    for &v in vs {
        step(Step::Starting(v, String::new()));
        let mut x = Exec::new(c, v.form(), sh.cache.stream(), sh.sms);
        x.cache = Some(sh.cache);
        if v.budgeted() {
            x.set_budget(c.o.budget_s);
        }
        if !v.resident() {
            for r in residents.drain(..) {
                r.release()?;
            }
        }
        if v.resident() && residents.is_empty() {
            match make_residents(sh.arrays) {
                Ok(r) => {
                    resident_args = r.iter().map(|g| KArg::View(g.view())).collect();
                    residents = r;
                }
                Err(e) => {
                    step(Step::Done(Box::new(VariantResult::failed(
                        v,
                        memory(slots, total),
                        &e,
                    ))));
                    continue;
                }
            }
        }
        let counted: Vec<KArg>;
        let defaults: Vec<KArg>;
        let args = if v.resident() {
            &resident_args
        } else if v == Variant::BamHitCounting {
            counted = counting_views(sh);
            &counted
        } else if v == Variant::BamDefault {
            defaults = sh.arrays.iter().map(|a| KArg::View(a.view())).collect();
            &defaults
        } else {
            &sh.st
        };
        let mut what = memory(slots, total);
        if v.resident() {
            let runs = residents.iter().filter(|g| g.contiguous()).count();
            what += &format!(
                ", resident: {runs} of {} arrays in one run of slots (the others through a slot table)",
                residents.len()
            );
        }
        if v == Variant::BamDefault {
            let n = sh.arrays.iter().filter(|a| a.is_resident()).count();
            what += &format!(
                ", default views: {n} of {} arrays made resident by Array::view",
                sh.arrays.len()
            );
        }
        let r = measure(b, &x, args, v, c.o.reps, what).map(|mut r| {
            r.settled(sh.settled);
            if let Some(ci) = &mut r.cache {
                ci.data_lines = total;
                ci.media = sh.media_name.clone();
            }
            r
        });
        step(Step::Done(Box::new(r.unwrap_or_else(|e| {
            VariantResult::failed(v, memory(slots, total), &e)
        }))));
    }
    for r in residents {
        r.release()?;
    }
    Ok(())
}

/// Makes every array resident: every array's lines out first, so that each can be read
/// into one run of slots (the view then needs no slot table).
fn make_residents<'a, 'c>(arrays: &'a [AnyArray<'c>]) -> Result<Vec<AnyResident<'a, 'c>>> {
    arrays
        .iter()
        .try_for_each(|a| a.invalidate().map(drop))
        .and_then(|()| arrays.iter().map(AnyArray::make_resident).collect())
}

/// The arrays' views with the cache's statistics counters on (`bam-hit-counting`).
fn counting_views(sh: &Shared) -> Vec<KArg> {
    sh.arrays
        .iter()
        .map(|a| {
            KArg::View(ArrayView {
                stats: sh.cache.stats_device_ptr(),
                ..a.ordinary_view()
            })
        })
        .collect()
}

/// Loads every line of the storage arrays (views in `st`) into the all-hits cache, one
/// warp per line (suite_touch_*), so that the kernels' own runs find every line there
/// (see suite.cu's touch for why the kernels' first run cannot do it).
fn preload(c: &Ctx, cache: &Cache, masters: &[Master], st: &[KArg], sms: u32) -> Result<()> {
    let failed = DeviceBuffer::zeroed(c.gpu, 8)?;
    let mut x = Exec::new(c, Form::Bam, cache.stream(), sms);
    x.cache = Some(cache);
    for (m, &view) in masters.iter().zip(st) {
        let name = if m.elem.bytes() == 4 {
            "suite_touch_4"
        } else {
            "suite_touch_8"
        };
        let a = [view, KArg::U64(failed.ptr())];
        // SAFETY: suite_touch_{4,8}(bam::array<T>, unsigned long long*) with T of the
        // array's element size (the view of a live array of the cache); `failed` holds one
        // counter; both outlive the wait.
        unsafe { x.launch(name, x.grid(name)?, &a)? };
    }
    x.wait()?;
    cache.check_errors()?;
    let mut f = [0u64];
    failed.read(0, &mut f)?;
    if f[0] != 0 {
        return Err(Error::InvalidArgument(format!(
            "loading the cache: {} line(s) could not be acquired",
            f[0]
        )));
    }
    Ok(())
}
