//! Resident arrays: every line of an [`Array`] read into the cache and kept there while a
//! guard lives, so that kernels given the guard's view read and write it almost as fast
//! as plain GPU memory (docs/cache.md, "Resident arrays").
//!
//! A kernel's `a[i]` through an ordinary view runs the cache's protocol on every access
//! (the line's word, the element, the word again: three dependent loads, see
//! `crates/bam/cuda/include/bam/array.cuh`), because the line may leave its slot at any time. A
//! resident view promises that it does not: every line holds one more reference while
//! the guard lives, so the clock never evicts it. Where the cache has room the lines are
//! read into one run of slots and a read is one plain load, as through a `T*`; otherwise
//! the view carries a table of the lines' slots and a read is two (the slot, the element).
//! A store is a plain store that marks its line dirty once. The kernel's code does not
//! change: the host picks the view.
//!
//! ```no_run
//! # fn main() -> bam::Result<()> {
//! # use bam::cache::{io_config, Cache, CacheConfig, Layout};
//! # use bam::storage::GpuDevice;
//! # let gpu = bam::Gpu::new(0)?;
//! # let cfg = CacheConfig::new(4096, 65536);
//! # let io = io_config(&cfg);
//! # let device: GpuDevice = "sim:ideal".parse()?;
//! # let storage = device.open(&gpu, &io)?;
//! let cache = Cache::new(storage.io(), cfg)?;
//! let hot = cache.array::<u32>(16 << 20, 0, Layout::Stripe)?; // 16,384 lines of 4 KiB
//! let resident = hot.make_resident()?; // reads what is missing; fails if the cache is too small
//! // launch kernels taking bam::array<uint32_t> with resident.view() ...
//! resident.release()?; // after those kernels have finished: the lines may be evicted again
//! # Ok(()) }
//! ```

use super::abi::{
    ArrayView, BAM_RESIDENT_NO_SLOT, BAM_TAG_LOCK, BAM_TAG_QUARANTINE, BAM_TAG_USED,
    BAM_VIEW_F_CONTIGUOUS, BAM_VIEW_F_RESIDENT,
};
use super::array::{Array, Element, Pins};
use super::Cache;
use crate::cuda::DeviceBuffer;
use crate::cuda::KernelArgs;
use crate::error::{Error, Result};

/// What the cache's resident guards hold: per array id, how many guards (each line of
/// the array holds that many extra references), the lines they hold in all, and of
/// those the lines of arrays made resident by their first view.
#[derive(Debug, Default)]
pub(crate) struct ResidentBook {
    guards: Vec<u32>,
    lines: u64,
    auto_lines: u64,
}

impl ResidentBook {
    /// Reserves `lines` slots for a new guard in a cache of `slots` slots, or says why not.
    fn reserve(&mut self, lines: u64, slots: u64) -> std::result::Result<(), String> {
        match self.lines.checked_add(lines) {
            Some(total) if total <= slots => {
                self.lines = total;
                Ok(())
            }
            _ => Err(format!(
                "make_resident: the array has {lines} lines and resident views already hold {} \
                 of the cache's {slots} slots: make the cache larger (CacheConfig::slots) or \
                 release other resident views",
                self.lines
            )),
        }
    }

    /// Reserves `lines` slots for an array made resident by its first view, when they fit
    /// in `percent` of `slots` beside the others made resident that way (and in the slots
    /// no guard holds): whether they did.
    fn reserve_auto(&mut self, lines: u64, slots: u64, percent: u32) -> bool {
        let share = slots.saturating_mul(percent as u64) / 100;
        let fits = self
            .auto_lines
            .checked_add(lines)
            .is_some_and(|t| t <= share);
        if !fits || self.reserve(lines, slots).is_err() {
            return false;
        }
        self.auto_lines += lines;
        true
    }

    /// Gives back what `reserve` (`auto`: `reserve_auto`) took (a guard that failed, or
    /// one released).
    fn unreserve(&mut self, lines: u64, auto: bool) {
        self.lines = self.lines.saturating_sub(lines);
        if auto {
            self.auto_lines = self.auto_lines.saturating_sub(lines);
        }
    }

    /// The guards array `id` has.
    fn held(&self, id: u32) -> u32 {
        self.guards.get(id as usize).copied().unwrap_or(0)
    }

    /// One guard more (`delta` 1) or less (-1) for array `id`: its references per line.
    fn guards(&mut self, id: u32, delta: i32) -> u32 {
        let id = id as usize;
        if self.guards.len() <= id {
            self.guards.resize(id + 1, 0);
        }
        let g = &mut self.guards[id];
        *g = g.saturating_add_signed(delta);
        *g
    }
}

/// Every line of an [`Array`] held in the cache, with the view kernels read it through
/// ([`Resident::view`]); made by [`Array::make_resident`].
///
/// While it lives, the array's lines are never evicted (they take that many of the
/// cache's slots away from other arrays), [`Cache::flush`] still writes its dirty lines
/// back, and ordinary views of the array keep working beside the resident one.
///
/// Release it (or drop it) only after the kernels that use its view have finished, as
/// with any memory a kernel reads: once released, lines may leave the slots the view's
/// table names.
pub struct Resident<'a, 'c, T: Element> {
    array: &'a Array<'c, T>,
    pins: Pins,
    released: bool,
}

impl<'c, T: Element> Array<'c, T> {
    /// Reads every line of the array into the cache and keeps them there until the
    /// returned guard is released or dropped. Kernels given [`Resident::view`] instead of
    /// [`Array::view`] read an element with one or two plain loads and write it with a
    /// plain store: no cache protocol on the way, the same kernel code (docs/cache.md,
    /// "Resident arrays").
    ///
    /// When a line fills its slot exactly (power-of-two lines) and the cache has a run of
    /// slots as long as the array that are empty or hold its own lines, the array's cached
    /// lines are first written back if dirty and dropped (as [`Array::invalidate`]), and
    /// the lines are read into one run of empty slots if there is one: the view then
    /// addresses element i as a plain `T*` would ([`Resident::contiguous`]). Otherwise,
    /// or where other fills took some of those slots meanwhile, the lines stay where
    /// they land and the view looks each line's slot up in a table.
    ///
    /// Errors: [`Error::InvalidArgument`] when the cache has fewer free slots than the
    /// array has lines (the other resident views' lines count as taken); the device's
    /// errors ([`Error::Io`], [`Error::WriteBack`]) when lines could not be written back or
    /// read. Either way nothing stays pinned.
    pub fn make_resident(&self) -> Result<Resident<'_, 'c, T>> {
        let cache = self.cache();
        let lines = self.lines();
        let nslots = cache.inner.cfg.slots as u64;
        book(cache)
            .reserve(lines, nslots)
            .map_err(Error::InvalidArgument)?;
        let pins = self
            .pin_all(lines)
            .inspect_err(|_| book(cache).unreserve(lines, false))?;
        Ok(Resident {
            array: self,
            pins,
            released: false,
        })
    }

    /// Makes the array resident for the rest of its life when its lines fit in the
    /// cache's share for that ([`CacheConfig::auto_resident_percent`]); `None` (the
    /// array keeps ordinary views) when they do not or the pinning failed, whose errors
    /// go back to the array's log ([`Array::check_errors`]).
    ///
    /// [`CacheConfig::auto_resident_percent`]: super::CacheConfig::auto_resident_percent
    pub(super) fn pin_for_life(&self) -> Option<Pins> {
        let cache = self.cache();
        let cfg = &cache.inner.cfg;
        let lines = self.lines();
        if cfg.auto_resident_percent == 0
            || !book(cache).reserve_auto(lines, cfg.slots as u64, cfg.auto_resident_percent)
        {
            return None;
        }
        tracing::debug!(
            "array {}: reading its {lines} lines in to keep them resident",
            self.id()
        );
        match self.pin_all(lines) {
            Ok(p) => Some(p),
            Err(e) => {
                book(cache).unreserve(lines, true);
                tracing::warn!(
                    "array {}: could not be made resident ({e}); its views stay ordinary",
                    self.id()
                );
                cache.keep_errors(&e);
                None
            }
        }
    }

    /// Pins every line for one more guard (the book has reserved the slots) and makes
    /// the view that reads them.
    fn pin_all(&self, lines: u64) -> Result<Pins> {
        let cache = self.cache();
        let (slots, base) = self.pin_placed(lines)?;
        let refs = book(cache).guards(self.id(), 1);
        cache.write_resident_refs(self.id(), refs)?;
        let ordinary = self.ordinary_view();
        let view = match base {
            Some(addr) => ArrayView {
                slots: addr,
                flags: ordinary.flags | BAM_VIEW_F_RESIDENT | BAM_VIEW_F_CONTIGUOUS,
                ..ordinary
            },
            None => ArrayView {
                slots: slots.ptr(),
                flags: ordinary.flags | BAM_VIEW_F_RESIDENT,
                ..ordinary
            },
        };
        Ok(Pins { slots, view })
    }

    /// Drops one guard's pins (`auto`: those of [`Array::pin_for_life`], at the array's
    /// teardown) and gives its slots back to the book.
    pub(super) fn unpin_all(&self, pins: &mut Pins, auto: bool) -> Result<()> {
        let cache = self.cache();
        let id = self.id();
        let refs = book(cache).guards(id, -1);
        cache.write_resident_refs(id, refs)?;
        let lines = self.lines();
        unpin_lines(cache, self.ordinary_view(), &mut pins.slots, lines)?;
        book(cache).unreserve(lines, auto);
        Ok(())
    }

    /// Pins every line (pin_lines), into one run of empty slots where it can: returns the
    /// slot table and, when every line landed in the run, the address of line 0's slot.
    fn pin_placed(&self, lines: u64) -> Result<(DeviceBuffer, Option<u64>)> {
        let cache = self.cache();
        let inner = &cache.inner;
        let mut run = None;
        // (Not for a second guard: its lines are pinned where the first one put them; and
        // only when dropping the array's own lines would leave a run long enough, so that
        // a cache full of other lines does not cost a re-read for nothing.)
        let placeable =
            inner.slot_bytes == inner.cfg.line_bytes as u64 && book(cache).held(self.id()) == 0;
        if placeable {
            // The fill service's spares move about the cache as it fills lines; one held
            // inside the run would break it.
            cache.recall_spares()?;
        }
        if placeable && free_run(&cache.read_tags()?, Some(self.id()), lines).is_some() {
            // Drop the array's cached lines (dirty ones written back) so that all of them
            // can go into one run; lines that kernels pin stay where they are.
            let r = cache.flush_kernel(self.id(), true)?;
            let (count, errors) = self.take_errors()?;
            super::flush_outcome(&r, count, errors, false, || {
                format!(
                    "make_resident: {} dirty line(s) failed to write back and stay valid and \
                     dirty in the cache",
                    r.failed
                )
            })?;
            run = free_run(&cache.read_tags()?, None, lines);
        }
        let Some(first) = run else {
            return Ok((pin_lines(cache, self.ordinary_view(), lines)?, None));
        };
        // The hint goes before the pins and comes off after them, also on error.
        cache.write_view_place(self.id(), first as u32 + 1)?;
        let pinned = pin_lines(cache, self.ordinary_view(), lines);
        cache.write_view_place(self.id(), 0)?;
        let slots = pinned?;
        let mut table = vec![0u32; lines as usize];
        slots.read(0, &mut table)?;
        let placed = table
            .iter()
            .enumerate()
            .all(|(l, &s)| s as u64 == first + l as u64);
        Ok((slots, placed.then(|| inner.data + first * inner.slot_bytes)))
    }
}

/// The first run of `len` consecutive free slots in `tags`, if any: empty (tag 0), or,
/// with `own`, holding a line of array `own` that is not locked or quarantined (a slot
/// that dropping that array's lines would empty).
fn free_run(tags: &[u64], own: Option<u32>, len: u64) -> Option<u64> {
    let mine = |t: u64| {
        own.is_some_and(|id| {
            t & (BAM_TAG_LOCK | BAM_TAG_QUARANTINE) == 0
                && t & BAM_TAG_USED != 0
                && (t & !BAM_TAG_USED) >> 40 == id as u64
        })
    };
    let mut start = 0u64;
    for (s, &t) in tags.iter().enumerate() {
        if t != 0 && !mine(t) {
            start = s as u64 + 1;
        } else if s as u64 + 1 - start >= len {
            return Some(start);
        }
    }
    None
}

/// The cache's book of resident lines (a poisoned lock is taken as it is: the book holds
/// counts, which a panic elsewhere leaves consistent).
fn book<'a>(cache: &'a Cache<'_>) -> std::sync::MutexGuard<'a, ResidentBook> {
    cache
        .inner
        .resident
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Launches bam_cache_pin_lines over every line of `view`'s array and waits; returns the
/// slot table, or the error after dropping the pins it took.
fn pin_lines(cache: &Cache<'_>, view: ArrayView, lines: u64) -> Result<DeviceBuffer> {
    let inner = &cache.inner;
    let mut slots = DeviceBuffer::zeroed(&inner.gpu, 4 * lines as usize)?;
    slots.write(0, &vec![BAM_RESIDENT_NO_SLOT; lines as usize])?;
    let mut failed = DeviceBuffer::zeroed(&inner.gpu, 8)?;
    let args: (ArrayView, u64, u64) = (view, slots.ptr(), failed.ptr());
    // SAFETY: matches bam_cache_pin_lines(bam_array_view, uint32_t*, unsigned long long*);
    // both buffers outlive the call, which synchronises (or leaks them when it cannot).
    unsafe {
        launch_over_lines(
            cache,
            "bam_cache_pin_lines",
            lines,
            &args,
            &mut [&mut slots, &mut failed],
        )?
    };
    let mut nf = [0u64];
    failed.read(0, &mut nf)?;
    let log = cache.take_array_errors(view.id);
    let clean = matches!(log, Ok((0, _)));
    if nf[0] == 0 && clean {
        return Ok(slots);
    }
    // Drop what was pinned (the table names those lines) before reporting.
    if let Err(e) = unpin_lines(cache, view, &mut slots, lines) {
        tracing::error!("make_resident: dropping the lines pinned before the failure: {e}");
    }
    match log {
        Ok((count, errors)) if count > 0 => Err(Error::Io { count, errors }),
        Ok(_) => Err(Error::InvalidArgument(format!(
            "make_resident: {} of {lines} lines could not be read into the cache",
            nf[0]
        ))),
        Err(e) => Err(e),
    }
}

/// Launches bam_cache_unpin_lines over the lines `slots` names and waits.
fn unpin_lines(
    cache: &Cache<'_>,
    view: ArrayView,
    slots: &mut DeviceBuffer,
    lines: u64,
) -> Result<()> {
    let args: (ArrayView, u64) = (view, slots.ptr());
    // SAFETY: matches bam_cache_unpin_lines(bam_array_view, uint32_t*); the table outlives
    // the call, which synchronises (or leaks it when it cannot).
    unsafe { launch_over_lines(cache, "bam_cache_unpin_lines", lines, &args, &mut [slots]) }
}

/// Launches the cache kernel `name`, a grid-stride loop of one thread a line, on the
/// cache's stream with enough blocks of 128 threads for `lines` lines (at most 8 a SM),
/// and waits for it (bounded); if the wait fails, the buffers of `keep` (those `args`
/// point to) are leaked, never freed under the kernel.
///
/// # Safety
/// As `Module::launch`: `args` have the kernel's parameter types, and what they point to
/// stays valid until this returns.
unsafe fn launch_over_lines(
    cache: &Cache<'_>,
    name: &str,
    lines: u64,
    args: &impl KernelArgs,
    keep: &mut [&mut DeviceBuffer],
) -> Result<()> {
    let inner = &cache.inner;
    let blocks = lines.div_ceil(128).clamp(1, inner.gpu.sms as u64 * 8) as u32;
    // SAFETY: forwarded to the caller's contract.
    unsafe {
        inner.gpu.module(crate::runtime::CACHE)?.launch(
            &inner.stream,
            name,
            blocks,
            128,
            0,
            args,
        )?
    };
    DeviceBuffer::keep_unless_synced(cache.sync(), keep)
}

impl<T: Element> Resident<'_, '_, T> {
    /// The kernel argument (`bam::array<T>` in C++): the array's view with the slot table.
    /// It is valid while this guard lives: the table is freed and the lines may move once
    /// it is released, so a kernel launched with the view after that reads and writes
    /// whatever the slots then hold (as a kernel given a freed buffer would).
    pub fn view(&self) -> ArrayView {
        self.pins.view
    }

    /// The array it keeps resident.
    pub fn array(&self) -> &Array<'_, T> {
        self.array
    }

    /// Whether the lines sit in one run of slots, so that the view addresses elements as a
    /// plain pointer (one load a read) rather than through the slot table (two).
    pub fn contiguous(&self) -> bool {
        self.pins.view.flags & BAM_VIEW_F_CONTIGUOUS != 0
    }

    /// Lets the lines go (they stay cached until the clock evicts them), reporting errors.
    /// Call it after the kernels that use [`Resident::view`] have finished.
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.unpin()
    }

    fn unpin(&mut self) -> Result<()> {
        self.array.unpin_all(&mut self.pins, false)
    }
}

impl<T: Element> Drop for Resident<'_, '_, T> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Err(e) = self.unpin() {
            tracing::error!("bam resident view dropped: releasing its lines failed: {e}");
            eprintln!("bam resident view dropped: releasing its lines failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ResidentBook;

    #[test]
    fn the_book_refuses_more_lines_than_slots_and_gives_back() {
        let mut b = ResidentBook::default();
        assert!(b.reserve(600, 1000).is_ok());
        let e = b.reserve(401, 1000).unwrap_err();
        assert!(
            e.contains("401 lines") && e.contains("hold 600") && e.contains("1000 slots"),
            "{e}"
        );
        assert!(b.reserve(400, 1000).is_ok());
        b.unreserve(400, false);
        assert!(b.reserve(u64::MAX, 1000).is_err(), "no overflow");
        b.unreserve(10_000, false);
        assert!(
            b.reserve(1000, 1000).is_ok(),
            "unreserve does not go below zero"
        );
    }

    #[test]
    fn arrays_resident_by_their_view_stay_within_their_share() {
        let mut b = ResidentBook::default();
        // 90% of 1000 slots: 900 lines for arrays made resident by their first view.
        assert!(b.reserve_auto(600, 1000, 90));
        assert!(!b.reserve_auto(301, 1000, 90), "beyond the share");
        assert!(b.reserve_auto(300, 1000, 90));
        assert!(!b.reserve_auto(1, 1000, 90), "the share is used up");
        // A guard may still take the rest of the slots, no more.
        assert!(b.reserve(100, 1000).is_ok());
        assert!(b.reserve(1, 1000).is_err());
        // Given back, the share is free again; a guard's slots count against it too.
        b.unreserve(600, true);
        b.unreserve(100, false);
        assert!(
            !b.reserve_auto(701, 1000, 90),
            "300 still held in the share"
        );
        assert!(b.reserve_auto(600, 1000, 90));
        assert!(!b.reserve_auto(1, 1000, 0), "0 percent: never");
        assert!(!b.reserve_auto(u64::MAX, 1000, 100), "no overflow");
    }

    #[test]
    fn empty_runs_are_found_first_fit() {
        use super::free_run;
        let tags = [0, 0, 5, 0, 0, 0, 7, 0];
        assert_eq!(free_run(&tags, None, 1), Some(0));
        assert_eq!(free_run(&tags, None, 2), Some(0));
        assert_eq!(free_run(&tags, None, 3), Some(3));
        assert_eq!(free_run(&tags, None, 4), None);
        assert_eq!(free_run(&[], None, 1), None);
        assert_eq!(free_run(&[0; 4], None, 4), Some(0));
    }

    #[test]
    fn slots_of_the_arrays_own_lines_count_as_free_when_asked() {
        use super::free_run;
        use crate::cache::abi::{BAM_TAG_LOCK, BAM_TAG_QUARANTINE, BAM_TAG_USED};
        let line = |id: u64, l: u64| BAM_TAG_USED | (id << 40) | l;
        // Array 3's lines at slots 1 and 2, array 4's at slot 3, empty 0 and 4.
        let tags = [0, line(3, 7), line(3, 8), line(4, 0), 0];
        assert_eq!(free_run(&tags, None, 2), None);
        assert_eq!(free_run(&tags, Some(3), 3), Some(0));
        assert_eq!(
            free_run(&tags, Some(3), 4),
            None,
            "array 4's slot breaks the run"
        );
        assert_eq!(free_run(&tags, Some(4), 2), Some(3));
        // A locked or quarantined slot of the array is not free.
        let locked = [0, line(3, 7) | BAM_TAG_LOCK, 0];
        assert_eq!(free_run(&locked, Some(3), 2), None);
        let q = [0, line(3, 7) | BAM_TAG_QUARANTINE | BAM_TAG_LOCK, 0];
        assert_eq!(free_run(&q, Some(3), 2), None);
    }

    #[test]
    fn a_fill_service_spare_breaks_a_run() {
        use super::free_run;
        use crate::cache::abi::{BAM_TAG_LOCK, BAM_TAG_RESERVED};
        // A spare holds no line but is held by the service: never part of a run.
        let tags = [0, 0, BAM_TAG_LOCK | BAM_TAG_RESERVED, 0, 0, 0];
        assert_eq!(free_run(&tags, None, 3), Some(3));
        assert_eq!(free_run(&tags, Some(0), 4), None);
    }

    #[test]
    fn the_book_counts_guards_per_array() {
        let mut b = ResidentBook::default();
        assert_eq!(b.guards(3, 1), 1);
        assert_eq!(b.guards(3, 1), 2);
        assert_eq!(b.guards(0, 1), 1);
        assert_eq!(b.guards(3, -1), 1);
        assert_eq!(b.guards(7, -1), 0, "never below zero");
    }
}
