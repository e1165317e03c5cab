//! `Array<T>`: a typed range of LBAs seen through a [`Cache`].

use super::abi::*;
use super::{Cache, FlushReport, Layout};
use crate::cuda::DeviceBuffer;
use crate::error::{Error, Result};
use crate::io::{Access, LbaClaim};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::OnceLock;

/// Element types of arrays: plain data that any bit pattern is a valid value of (ints,
/// floats, arrays of them, `#[repr(C)]` structs of them without padding).
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes must be a valid `Self`, and the type
/// must have the same layout as the C++ `T` of the kernel's `bam::array<T>` (host copies
/// also need [`Pod`](crate::abi::Pod)).
pub unsafe trait Element: crate::abi::Pod {}

macro_rules! elements {
    ($($t:ty),*) => { $(
        // SAFETY: primitive numbers: every bit pattern is valid.
        unsafe impl Element for $t {}
    )* };
}
elements!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, f32, f64);
// SAFETY: arrays of elements have no padding and inherit validity.
unsafe impl<T: Element, const N: usize> Element for [T; N] {}

/// An array of `n` elements of `T` at `start_lba` of the cache's SSDs. Kernels get it
/// through [`Array::view`] as a `bam::array<T>`. Dropping it writes its dirty lines back
/// and drops them from the cache (use [`Array::close`] to get errors as a `Result`).
pub struct Array<'c, T: Element> {
    cache: &'c Cache<'c>,
    id: u32,
    /// The line words; `None` once handed to the cache (`retain`).
    words: Option<DeviceBuffer>,
    desc: CacheArr,
    view: ArrayView,
    closed: bool,
    /// Its LBAs, claimed under the sharing rule when other GPUs share the SSDs.
    claim: Option<LbaClaim>,
    /// Its lines pinned for its life when its first [`Array::view`] made it resident
    /// (set once, by that call: `Some(None)` when it did not).
    resident: OnceLock<Option<Pins>>,
    _t: PhantomData<T>,
}

/// Every line of an array pinned for one guard: the slot table and the view that reads
/// through it. A [`Resident`](super::Resident) holds one; so does an array made resident
/// by its first view ([`CacheConfig::auto_resident_percent`](super::CacheConfig::auto_resident_percent)).
pub(super) struct Pins {
    /// uint32_t per line: the slot it is pinned in (BAM_RESIDENT_NO_SLOT: not pinned).
    pub(super) slots: DeviceBuffer,
    pub(super) view: ArrayView,
}

/// An ordinary view's flags: what sends `bam::array`'s reads to its general paths
/// (counting, a line found by a division; the hit path tests them on every access) and
/// whether its misses look for a read-ahead.
fn view_flags(count_hits: bool, epl: u32, readahead: u32) -> u32 {
    let mut f = 0;
    if count_hits {
        f |= BAM_VIEW_F_COUNTING;
    }
    if !epl.is_power_of_two() {
        f |= BAM_VIEW_F_EPL_DIV;
    }
    if readahead > 0 {
        f |= BAM_VIEW_F_READAHEAD;
    }
    f
}

/// The most bytes `Array::load` and `Array::read` stage in GPU memory at once.
const CHUNK: usize = 64 << 20;

/// Where a new array goes on the SSDs.
#[derive(Clone, Debug)]
pub(crate) enum Placement {
    /// At this LBA of each SSD it uses.
    At(u64),
    /// At the lowest LBA, a whole number of lines, where it overlaps no array of the cache
    /// and none of these (start, LBAs) extents (named datasets, their catalog).
    FirstFree(Vec<(u64, u64)>),
}

/// Takes an entry of the cache's array table (`live`) for a new array of `n` elements
/// and `extent` LBAs on each SSD it uses, placed as `place` says; the entry holds the
/// array's (start LBA, extent), which later placements avoid. Returns the entry's index
/// (the array's id) and the start LBA.
fn reserve(
    live: &std::sync::Mutex<Vec<Option<(u64, u64)>>>,
    place: &Placement,
    n: u64,
    extent: u64,
    line_lbas: u64,
    ns_lbas: u64,
) -> Result<(u32, u64)> {
    let bad = |s: String| Err(Error::InvalidArgument(s));
    let mut live = live.lock().expect("cache array table");
    let start_lba = match place {
        Placement::At(start_lba) => {
            let start_lba = *start_lba;
            for (s, e) in live.iter().flatten() {
                if start_lba < s + e && *s < start_lba + extent {
                    return bad(format!(
                        "LBAs {start_lba}..{} overlap an array at {s}..{}",
                        start_lba + extent,
                        s + e
                    ));
                }
            }
            start_lba
        }
        Placement::FirstFree(also) => {
            let mut taken: Vec<(u64, u64)> = live.iter().flatten().copied().collect();
            taken.extend_from_slice(also);
            let Some(at) = bam_nvme::catalog::first_free(&taken, extent, line_lbas, ns_lbas) else {
                let held: u64 = taken.iter().map(|t| t.1).sum();
                return bad(format!(
                    "no room for {n} elements ({extent} LBAs on each SSD): the SSDs have {ns_lbas} LBAs and the cache's arrays and the named datasets ({} extents) hold {held} of them, in pieces too small",
                    taken.len()
                ));
            };
            at
        }
    };
    let Some(id) = live.iter().position(|x| x.is_none()) else {
        return bad(format!("the cache already serves {} arrays", live.len()));
    };
    live[id] = Some((start_lba, extent));
    Ok((id as u32, start_lba))
}

impl<'c, T: Element> Array<'c, T> {
    pub(crate) fn new(
        cache: &'c Cache<'c>,
        n: u64,
        place: Placement,
        layout: Layout,
        access: Access,
    ) -> Result<Self> {
        let inner = &cache.inner;
        let size = std::mem::size_of::<T>() as u32;
        let line = inner.cfg.line_bytes;
        let bad = |s: String| Err(Error::InvalidArgument(s));
        if size == 0 || !line.is_multiple_of(size) {
            return bad(format!(
                "element size {size} does not divide the line size {line}"
            ));
        }
        if n == 0 {
            return bad("an array needs at least one element".into());
        }
        let geo = cache.io().geometry();
        let lba = geo.lba_size as u64;
        let ns_lbas = geo.ns_blocks;
        let epl = line / size;
        let nlines = n.div_ceil(epl as u64);
        if nlines >= 1 << 40 {
            return bad("too many lines".into());
        }
        let line_lbas = line as u64 / lba;
        let nssd = geo.ssds as u64;
        let extent = match layout {
            Layout::Stripe => nlines.div_ceil(nssd) * line_lbas,
            Layout::Replicate => nlines * line_lbas,
        };
        if let Placement::At(start_lba) = place {
            if start_lba.checked_add(extent).is_none_or(|e| e > ns_lbas) {
                return bad(format!(
                    "array needs LBAs {start_lba}..{} on each SSD; the SSDs have {ns_lbas}",
                    start_lba.saturating_add(extent)
                ));
            }
        }
        let (id, start_lba) = reserve(&inner.live, &place, n, extent, line_lbas, ns_lbas)?;
        // A failure from here on gives the table entry back (below).
        let made = (|| -> Result<Self> {
            // Other GPUs sharing the SSDs: the rule of io::shared (a writer's LBAs are its own).
            let claim =
                cache
                    .io()
                    .claim_lbas(0..nssd as u32, start_lba..start_lba + extent, access)?;
            let words = DeviceBuffer::zeroed(&inner.gpu, 8 * nlines as usize)?;
            let desc = CacheArr {
                words: words.ptr(),
                nlines,
                start_lba,
                line_lbas: line_lbas as u32,
                layout: match layout {
                    Layout::Stripe => BAM_LAYOUT_STRIPE,
                    Layout::Replicate => BAM_LAYOUT_REPLICATE,
                },
                first_ssd: 0,
                nssd: nssd as u32,
                live: 1,
                flags: match access {
                    Access::ReadOnly => BAM_ARR_F_READ_ONLY,
                    Access::ReadWrite => 0,
                },
                ..Default::default()
            };
            cache.write_arr(id, &desc)?;
            let view = ArrayView {
                cache: cache.device_ptr(),
                words: words.ptr(),
                n,
                data: inner.data,
                slot_shift: inner.slot_bytes.trailing_zeros(),
                line_bytes: line,
                elem_size: size,
                id,
                epl,
                epl_shift: if epl.is_power_of_two() {
                    epl.trailing_zeros()
                } else {
                    BAM_EPL_NO_SHIFT
                },
                // The access and hit counters are counted through the view: 0 turns them off.
                stats: if inner.cfg.count_hits {
                    cache.stats_device_ptr()
                } else {
                    0
                },
                start_lba: desc.start_lba,
                line_lbas: desc.line_lbas,
                layout: desc.layout,
                first_ssd: desc.first_ssd,
                nssd: desc.nssd,
                clock: inner.mem.ptr() + inner.off_clock as u64,
                // Ordinary views have no slot table (Array::make_resident gives one).
                slots: 0,
                flags: view_flags(inner.cfg.count_hits, epl, inner.cfg.readahead),
                place: 0,
            };
            cache.write_view(id, &view)?;
            Ok(Array {
                cache,
                id,
                words: Some(words),
                desc,
                view,
                closed: false,
                claim,
                resident: OnceLock::new(),
                _t: PhantomData,
            })
        })();
        if made.is_err() {
            inner.live.lock().expect("cache array table")[id as usize] = None;
        }
        made
    }

    /// The dataset named `name` (see [`Cache::open`]).
    pub fn open(cache: &'c Cache<'c>, name: &str) -> Result<Self> {
        cache.open(name)
    }

    /// LBAs it takes on each SSD it uses.
    pub fn extent_lbas(&self) -> u64 {
        let lines = match self.desc.layout {
            BAM_LAYOUT_STRIPE => self.desc.nlines.div_ceil(self.desc.nssd as u64),
            _ => self.desc.nlines,
        };
        lines * self.desc.line_lbas as u64
    }

    /// The kernel argument (`bam::array<T>` in C++).
    ///
    /// The first call makes the array resident when its lines fit in the cache's share
    /// for that ([`CacheConfig::auto_resident_percent`](super::CacheConfig), 90% of the
    /// slots by default, beside the other resident arrays): it reads every line in and
    /// keeps it there until the array is closed or dropped, and every view it returns
    /// then reads and writes through plain loads and stores, as
    /// [`Array::make_resident`]'s does. Otherwise (too large, shared with other GPUs,
    /// the share set to 0, or the lines could not be read: those errors are in
    /// [`Array::check_errors`]) it returns [`Array::ordinary_view`]. Either way the
    /// kernel's code and results are the same; [`Array::is_resident`] says which.
    ///
    /// The first call waits for the reads; make it before launching kernels that use
    /// this array's [`Array::ordinary_view`], not while they run.
    pub fn view(&self) -> ArrayView {
        let pins = self.resident.get_or_init(|| {
            if self.claim.is_some() {
                None // other GPUs share the SSDs: lines must be able to leave
            } else {
                self.pin_for_life()
            }
        });
        match pins {
            Some(p) => p.view,
            None => self.view,
        }
    }

    /// The view that runs the cache's protocol on every access (the line may be evicted
    /// between two accesses), never resident: for an array a kernel reads sparsely,
    /// whose every line [`Array::view`] would read in.
    pub fn ordinary_view(&self) -> ArrayView {
        self.view
    }

    /// Whether [`Array::view`] made the array resident (false before its first call).
    pub fn is_resident(&self) -> bool {
        matches!(self.resident.get(), Some(Some(_)))
    }

    /// Elements.
    pub fn len(&self) -> u64 {
        self.view.n
    }

    /// Whether empty (never).
    pub fn is_empty(&self) -> bool {
        self.view.n == 0
    }

    /// Lines the array spans.
    pub fn lines(&self) -> u64 {
        self.desc.nlines
    }

    /// First LBA on each SSD.
    pub fn start_lba(&self) -> u64 {
        self.desc.start_lba
    }

    /// Elements per line.
    pub fn elems_per_line(&self) -> u32 {
        self.view.epl
    }

    /// Turns the errors of this array's I/O (its lines' fills and write-backs, its range
    /// errors) logged since the last call into a typed error; `Ok` when there were none.
    /// Errors of the cache's other arrays stay for them, and errors that belong to no
    /// array (a queue's protocol violation) for [`Cache::check_errors`].
    pub fn check_errors(&self) -> Result<()> {
        let (count, errors) = self.take_errors()?;
        if count > 0 {
            return Err(Error::Io { count, errors });
        }
        Ok(())
    }

    /// Takes this array's errors not yet taken: how many and their entries (see
    /// [`Array::check_errors`]).
    pub fn take_errors(&self) -> Result<(u32, Vec<crate::error::IoError>)> {
        self.cache.take_array_errors(self.id)
    }

    /// The cache it lives in.
    pub(super) fn cache(&self) -> &'c Cache<'c> {
        self.cache
    }

    /// Its index in the cache's array table.
    pub(super) fn id(&self) -> u32 {
        self.id
    }

    /// Refuses a host write into a read-only array at the call: its lines would never be
    /// written back, and the loss would show only at flush or close.
    fn writable(&self, what: &str) -> Result<()> {
        if self.desc.flags & BAM_ARR_F_READ_ONLY != 0 {
            return Err(Error::InvalidArgument(format!(
                "{what} into a read-only array (made by array_read_only or alloc_read_only): its \
                 lines are never written back; make it with Cache::array or Cache::alloc to write it"
            )));
        }
        Ok(())
    }

    /// Runs `name` over bytes [off, off + len) of the array and `len` bytes at device
    /// address `buf`; `staging`, the buffer that holds them when it is ours, is leaked with
    /// the kernel's own buffer if the wait fails (the kernel may still run).
    fn bytes_kernel(
        &self,
        name: &str,
        buf: u64,
        staging: Option<&mut DeviceBuffer>,
        off: u64,
        len: u64,
    ) -> Result<()> {
        let inner = &self.cache.inner;
        let mut failed = DeviceBuffer::zeroed(&inner.gpu, 8)?;
        let args: (ArrayView, u64, u64, u64, u64) = (self.view, buf, off, len, failed.ptr());
        let lines = len.div_ceil(inner.cfg.line_bytes as u64) + 1;
        let blocks = (lines.div_ceil(4)).min(inner.gpu.sms as u64 * 16) as u32;
        // SAFETY: matches bam_cache_{store,load}_bytes(bam_array_view, char*, uint64_t,
        // uint64_t, unsigned long long*); the buffers outlive the synchronisation below.
        unsafe {
            inner.gpu.module(crate::runtime::CACHE)?.launch(
                &inner.stream,
                name,
                blocks,
                128,
                0,
                &args,
            )?
        };
        let synced = self.cache.sync();
        match staging {
            Some(s) => DeviceBuffer::keep_unless_synced(synced, &mut [&mut failed, s])?,
            None => DeviceBuffer::keep_unless_synced(synced, &mut [&mut failed])?,
        }
        self.check_errors()?;
        let mut nf = [0u64];
        failed.read(0, &mut nf)?;
        if nf[0] != 0 {
            return Err(Error::InvalidArgument(format!(
                "{} line(s) could not be acquired (errors that belong to no array, such as a \
                 queue's protocol violation, are in Cache::check_errors)",
                nf[0]
            )));
        }
        Ok(())
    }

    /// Writes `data` to elements `at..at + data.len()` through the cache (GPU writes:
    /// the lines become dirty and reach the SSDs on eviction, flush or drop).
    pub fn load(&self, data: &[T], at: u64) -> Result<()> {
        self.writable("load")?;
        let size = std::mem::size_of::<T>() as u64;
        if at
            .checked_add(data.len() as u64)
            .is_none_or(|e| e > self.len())
        {
            return Err(Error::InvalidArgument(
                "load past the end of the array".into(),
            ));
        }
        let bytes = crate::abi::as_bytes(data);
        self.load_bytes(bytes, at * size)
    }

    fn load_bytes(&self, bytes: &[u8], off: u64) -> Result<()> {
        let mut staging =
            DeviceBuffer::zeroed(&self.cache.inner.gpu, CHUNK.min(bytes.len().max(1)))?;
        for (k, chunk) in bytes.chunks(CHUNK).enumerate() {
            staging.write(0, chunk)?;
            let ptr = staging.ptr();
            self.bytes_kernel(
                "bam_cache_store_bytes",
                ptr,
                Some(&mut staging),
                off + (k * CHUNK) as u64,
                chunk.len() as u64,
            )?;
        }
        Ok(())
    }

    /// Writes the first `n` elements of GPU memory `src` to elements `at..at + n` through
    /// the cache (as [`Array::load`], from a device buffer instead of host memory).
    ///
    /// When this fails with [`Error::Timeout`] the copying kernel may still be running and
    /// reading `src`: keep `src` alive (or [`DeviceBuffer::leak`] it), never free it then.
    pub fn store_device(&self, src: &DeviceBuffer, at: u64, n: u64) -> Result<()> {
        self.writable("store_device")?;
        let size = std::mem::size_of::<T>() as u64;
        let bytes = n
            .checked_mul(size)
            .filter(|&b| b <= src.len() as u64)
            .ok_or_else(|| {
                Error::InvalidArgument("store_device: the source is too small".into())
            })?;
        if at.checked_add(n).is_none_or(|e| e > self.len()) {
            return Err(Error::InvalidArgument(
                "store_device past the end of the array".into(),
            ));
        }
        self.bytes_kernel("bam_cache_store_bytes", src.ptr(), None, at * size, bytes)
    }

    /// Loads a file's bytes into the array from element 0 (its length must be a multiple
    /// of the element size and fit in the array).
    pub fn load_file(&self, path: &Path) -> Result<()> {
        use std::io::Read;
        self.writable("load_file")?;
        let size = std::mem::size_of::<T>() as u64;
        let mut f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        if len % size != 0 || len / size > self.len() {
            return Err(Error::InvalidArgument(format!(
                "{}: {len} bytes is not a whole number of {size}-byte elements within {} elements",
                path.display(),
                self.len()
            )));
        }
        let mut buf = vec![0u8; (64usize << 20).min(len as usize)];
        let mut off = 0u64;
        while off < len {
            let n = ((len - off) as usize).min(buf.len());
            f.read_exact(&mut buf[..n])?;
            self.load_bytes(&buf[..n], off)?;
            off += n as u64;
        }
        Ok(())
    }

    /// Reads elements `at..at + out.len()` through the cache, staging at most 64 MiB of GPU
    /// memory at a time.
    pub fn read(&self, at: u64, out: &mut [T]) -> Result<()> {
        let size = std::mem::size_of::<T>();
        if at
            .checked_add(out.len() as u64)
            .is_none_or(|e| e > self.len())
        {
            return Err(Error::InvalidArgument(
                "read past the end of the array".into(),
            ));
        }
        // Through one staging buffer of at most CHUNK bytes, a chunk at a time: an array
        // larger than the GPU's free memory reads back too.
        let out = crate::abi::as_bytes_mut(out);
        let mut staging = DeviceBuffer::zeroed(&self.cache.inner.gpu, CHUNK.min(out.len().max(1)))?;
        for (k, chunk) in out.chunks_mut(CHUNK).enumerate() {
            let ptr = staging.ptr();
            self.bytes_kernel(
                "bam_cache_load_bytes",
                ptr,
                Some(&mut staging),
                at * size as u64 + (k * CHUNK) as u64,
                chunk.len() as u64,
            )?;
            staging.read(0, chunk)?;
        }
        Ok(())
    }

    /// Writes the array's dirty lines back and drops its lines from the cache.
    ///
    /// Nothing is lost silently: a line whose write-back fails stays valid and dirty in
    /// the cache. The error is then [`Error::WriteBack`] (how many lines failed, and the
    /// device's I/O error log), the array's id stays reserved and its descriptor and line
    /// words stay with the cache, where [`Cache::flush`] retries the lines and
    /// [`Cache::close`] reports them again if they still fail. The same holds for lines
    /// still pinned by a kernel.
    pub fn close(mut self) -> Result<FlushReport> {
        self.closed = true;
        self.teardown()
    }

    /// Writes the array's dirty lines back and drops its lines from the cache (those that
    /// no kernel pins and no [`Resident`](super::Resident) guard holds): later reads read
    /// them from the SSDs again. The array stays usable. An array that [`Array::view`]
    /// made resident keeps its lines, which its views address: only its dirty lines are
    /// written back, nothing is dropped.
    /// Errors as [`Array::close`]'s: a line whose write-back fails stays valid and dirty
    /// in the cache ([`Error::WriteBack`]), as does a line still pinned.
    pub fn invalidate(&self) -> Result<FlushReport> {
        let r = self.cache.flush_kernel(self.id, !self.is_resident())?;
        let (count, errors) = self.take_errors()?;
        super::flush_outcome(&r, count, errors, true, || {
            format!(
                "invalidate: {} line(s) failed to write back and stay valid and dirty in the \
                 cache, {} line(s) still pinned or busy stay cached",
                r.failed, r.pinned
            )
        })
    }

    /// Hands the line words to the cache, which frees them when it goes away: slots may
    /// still name this array's lines, so the descriptor stays live (it points at the
    /// words) and the id and LBA range stay reserved.
    fn retain(&mut self) {
        if let Some(w) = self.words.take() {
            self.cache
                .inner
                .retained
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(w);
        }
        // Lines of it stay cached (dirty ones are its only copy): so does its claim.
        if let Some(c) = self.claim.take() {
            self.cache
                .inner
                .retained_claims
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(c);
        }
    }

    fn teardown(&mut self) -> Result<FlushReport> {
        if let Some(mut pins) = self.resident.take().flatten() {
            // A failure leaves the lines pinned: the flush below counts them, and the
            // array is retained as for lines a kernel pins.
            if let Err(e) = self.unpin_all(&mut pins, true) {
                tracing::error!("array teardown: releasing its resident lines failed: {e}");
            }
        }
        let r = match self.cache.flush_kernel(self.id, true) {
            Ok(r) => r,
            Err(e) => {
                // Nothing is known of the slots: keep whatever they may still name.
                self.retain();
                return Err(e);
            }
        };
        let log = self.take_errors();
        if r.failed > 0 || r.pinned > 0 {
            // Slots still name lines of this array: dirty lines whose write-back failed
            // (still the only copy of their data) or lines a kernel still pins.
            self.retain();
            let (count, errors) = log.unwrap_or_else(|e| {
                tracing::error!("array teardown: reading the device error log failed: {e}");
                (0, Vec::new())
            });
            return Err(Error::WriteBack {
                what: format!(
                    "array teardown: {} line(s) failed to write back and stay valid and dirty \
                     in the cache, where Cache::flush retries them (Cache::close reports them \
                     again if they still fail); {} line(s) still pinned or busy; array id {} \
                     stays reserved until the cache goes away",
                    r.failed, r.pinned, self.id
                ),
                failed: r.failed,
                pinned: r.pinned,
                count,
                errors,
            });
        }
        // No slot names a line of this array any more: retire it.
        self.desc.live = 0;
        self.cache.write_arr(self.id, &self.desc)?;
        self.cache.inner.live.lock().expect("cache array table")[self.id as usize] = None;
        let (count, errors) = log?;
        if count > 0 {
            return Err(Error::Io { count, errors });
        }
        Ok(FlushReport {
            written: r.written,
            dropped: r.dropped,
        })
    }
}

impl<T: Element> Drop for Array<'_, T> {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        if let Err(e) = self.teardown() {
            // Never swallowed: its errors go back to the cache, whose check_errors (and
            // flush, close) reports them.
            self.cache.keep_errors(&e);
            tracing::error!("bam array dropped: writing back its dirty lines failed: {e}");
            eprintln!("bam array dropped: writing back its dirty lines failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_flags_send_only_what_needs_it_to_the_general_paths() {
        // The common view: no counting, a power-of-two line, no read-ahead: the lean read.
        assert_eq!(view_flags(false, 512, 0), 0);
        assert_eq!(view_flags(false, 512, 0) & BAM_VIEW_F_GENERAL, 0);
        assert_eq!(view_flags(true, 512, 0), BAM_VIEW_F_COUNTING);
        // 24-byte elements in 4 KiB lines: 170 a line, found by a division.
        assert_eq!(view_flags(false, 4096 / 24, 0), BAM_VIEW_F_EPL_DIV);
        assert_eq!(view_flags(false, 1, 8), BAM_VIEW_F_READAHEAD);
        // Read-ahead is not one of the general paths' flags.
        assert_eq!(view_flags(false, 64, 8) & BAM_VIEW_F_GENERAL, 0);
        assert_eq!(
            view_flags(true, 3, 1),
            BAM_VIEW_F_COUNTING | BAM_VIEW_F_EPL_DIV | BAM_VIEW_F_READAHEAD
        );
        // A resident view adds its own flag on top (resident.rs), never an ordinary one.
        assert_eq!(view_flags(true, 3, 1) & BAM_VIEW_F_RESIDENT, 0);
    }

    /// `reserve` places an array where it is told or in the first gap, records it in
    /// the table, and refuses overlaps, a full table and storage without room.
    #[test]
    fn reserve_places_records_and_refuses() {
        use std::sync::Mutex;
        let live = Mutex::new(vec![None; 3]);
        let (lines, ns) = (8u64, 1000u64);
        // At an LBA: taken as given.
        assert_eq!(
            reserve(&live, &Placement::At(100), 1, 50, lines, ns).unwrap(),
            (0, 100)
        );
        // Overlapping it: refused, nothing recorded.
        let e = reserve(&live, &Placement::At(120), 1, 50, lines, ns).unwrap_err();
        assert!(
            e.to_string().contains("overlap an array at 100..150"),
            "{e}"
        );
        assert_eq!(live.lock().unwrap()[1], None);
        // First fit: below the array at 100, then past it (whole lines), avoiding the
        // extents given beside the table (a dataset at 0..16).
        let ds = Placement::FirstFree(vec![(0, 16)]);
        assert_eq!(reserve(&live, &ds, 1, 80, lines, ns).unwrap(), (1, 16));
        assert_eq!(reserve(&live, &ds, 1, 40, lines, ns).unwrap(), (2, 152));
        // The table is full.
        let e = reserve(&live, &Placement::FirstFree(vec![]), 1, 8, lines, ns).unwrap_err();
        assert!(e.to_string().contains("already serves 3 arrays"), "{e}");
        // No room on the SSDs.
        live.lock().unwrap()[2] = None;
        let e = reserve(&live, &Placement::FirstFree(vec![]), 7, 900, lines, ns).unwrap_err();
        assert!(e.to_string().contains("no room for 7 elements"), "{e}");
    }
}
