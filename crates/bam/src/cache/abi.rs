//! `#[repr(C)]` twins of `crates/bam/cuda/include/bam/cache_abi.h` (sizes asserted here; offsets
//! compared with the C++ compiler's by `tests/cache_layout.rs`).

#![allow(missing_docs)]

use crate::abi::{IoView, Layout};

pub const BAM_LINE_VALID: u64 = 0x8000_0000;
pub const BAM_LINE_BUSY: u64 = 0x4000_0000;
pub const BAM_LINE_DIRTY: u64 = 0x2000_0000;
/// The line's fill generation (mod 512), bits 28..20 of the state word.
pub const BAM_LINE_GEN: u64 = 0x1ff0_0000;
/// The reference count, bits 19..0 of the state word.
pub const BAM_LINE_REFS: u64 = 0x000f_ffff;
/// Where the table of array views starts, from the cache descriptor's address
/// (`BAM_CACHE_VIEWS_OFFSET`).
pub const BAM_CACHE_VIEWS_OFFSET: u32 = 256;
const _: () = assert!(core::mem::size_of::<CacheDev>() <= BAM_CACHE_VIEWS_OFFSET as usize);
/// Statistics shards (`BAM_CACHE_STAT_SHARDS`).
pub const BAM_CACHE_STAT_SHARDS: u32 = 256;
/// `ArrayView::epl_shift` when the elements per line are not a power of two
/// (`BAM_EPL_NO_SHIFT`).
pub const BAM_EPL_NO_SHIFT: u32 = u32::MAX;
/// The most lines a streaming miss reads ahead (`BAM_CACHE_MAX_READAHEAD`).
pub const BAM_CACHE_MAX_READAHEAD: u32 = 16;
/// Threads per block of the fill service (`BAM_FILL_SERVICE_THREADS`).
pub const BAM_FILL_SERVICE_THREADS: u32 = 512;
pub const BAM_LAYOUT_STRIPE: u32 = 0;
pub const BAM_LAYOUT_REPLICATE: u32 = 1;
/// Slot tag bits (`BAM_TAG_*`): locked, holds a line, taken out of the cache, a fill
/// service warp's spare.
pub const BAM_TAG_LOCK: u64 = 1 << 63;
pub const BAM_TAG_USED: u64 = 1 << 62;
pub const BAM_TAG_QUARANTINE: u64 = 1 << 61;
pub const BAM_TAG_RESERVED: u64 = 1 << 60;
pub const BAM_TAG_LINE_MASK: u64 = (1 << 40) - 1;
/// `CacheArr::flags`: the array is read-only (its dirty lines are never written back).
pub const BAM_ARR_F_READ_ONLY: u32 = 1;
/// A line of a resident array's slot table that is not pinned (`BAM_RESIDENT_NO_SLOT`).
pub const BAM_RESIDENT_NO_SLOT: u32 = u32::MAX;
/// `ArrayView::flags`: a resident view, with a slot table (`BAM_VIEW_F_RESIDENT`).
pub const BAM_VIEW_F_RESIDENT: u32 = 1;
/// `ArrayView::flags`: a resident view whose lines sit in consecutive slots; `slots` is
/// the address of line 0's slot (`BAM_VIEW_F_CONTIGUOUS`).
pub const BAM_VIEW_F_CONTIGUOUS: u32 = 2;
/// `ArrayView::flags`: the view counts accesses and hits; `stats` is set
/// (`BAM_VIEW_F_COUNTING`).
pub const BAM_VIEW_F_COUNTING: u32 = 4;
/// `ArrayView::flags`: the array's elements per line are not a power of two
/// (`BAM_VIEW_F_EPL_DIV`).
pub const BAM_VIEW_F_EPL_DIV: u32 = 8;
/// `ArrayView::flags`: the cache reads ahead (`CacheConfig::readahead` above 0); the miss
/// path looks at a streaming miss's neighbours only then (`BAM_VIEW_F_READAHEAD`).
pub const BAM_VIEW_F_READAHEAD: u32 = 16;
/// `ArrayView::flags` that send `bam::array`'s reads to its general paths
/// (`BAM_VIEW_F_GENERAL`); a view with none of them reads on the lean path.
pub const BAM_VIEW_F_GENERAL: u32 = BAM_VIEW_F_RESIDENT | BAM_VIEW_F_COUNTING | BAM_VIEW_F_EPL_DIV;

abi_struct!(CacheArr = "bam_cache_arr", size 64, {
    words: u64, nlines: u64, start_lba: u64, line_lbas: u32, layout: u32, first_ssd: u32, nssd: u32,
    live: u32, flags: u32, prefetching: u64, resident: u32, reserved: u32,
});
abi_struct!(CacheStatsRaw = "bam_cache_stats", size 128, {
    accesses: u64, hits: u64, misses: u64, evictions: u64, writebacks: u64, reads: u64, writes: u64,
    errors: u64, waits: u64, readaheads: u64, reserved: [u64; 6],
});
abi_struct!(
    /// The array descriptor a kernel receives; `bam::array<T>` in C++ is exactly this.
    ArrayView = "bam_array_view", size 112, {
    cache: u64, words: u64, n: u64, data: u64, slot_shift: u32, line_bytes: u32, elem_size: u32, id: u32,
    epl: u32, epl_shift: u32, stats: u64, start_lba: u64, line_lbas: u32, layout: u32, first_ssd: u32,
    nssd: u32, clock: u64, slots: u64, flags: u32, place: u32,
});
abi_struct!(FlushResult = "bam_flush_result", size 32, { written: u64, dropped: u64, pinned: u64, failed: u64 });
abi_struct!(
    /// The fill ring's tickets and the fill service's control words.
    FillCtl = "bam_fill_ctl", size 384, {
    tail: u64, pad0: [u64; 15], head: u64, pad1: [u64; 15], stop: u32, started: u32, pad2: [u64; 15],
});

/// `bam_cache_dev` (no Default derive through the macro: IoView has its own).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CacheDev {
    pub io: IoView,
    pub data: u64,
    pub slot_bytes: u64,
    pub tags: u64,
    pub arrays: u64,
    pub stats: u64,
    pub clock: u64,
    // timeout_ns .. nslots: one 32-byte sector (see cache_abi.h).
    pub timeout_ns: u64,
    pub ring: u64,
    pub fill_ctl: u64,
    pub ring_shift: u32,
    pub nslots: u32,
    pub line_bytes: u32,
    pub max_arrays: u32,
    pub nshards: u32,
    pub slot_shift: u32,
    pub readahead: u32,
    pub spare_warps: u32,
    pub fill_qp0: u32,
    pub fill_qps: u32,
}
const _: () = assert!(core::mem::size_of::<CacheDev>() == 224);

impl CacheDev {
    /// Name, size and field offsets, for the layout test.
    pub fn layout() -> Layout {
        use core::mem::offset_of;
        (
            "bam_cache_dev",
            core::mem::size_of::<CacheDev>(),
            vec![
                ("io", offset_of!(CacheDev, io)),
                ("data", offset_of!(CacheDev, data)),
                ("slot_bytes", offset_of!(CacheDev, slot_bytes)),
                ("tags", offset_of!(CacheDev, tags)),
                ("arrays", offset_of!(CacheDev, arrays)),
                ("stats", offset_of!(CacheDev, stats)),
                ("clock", offset_of!(CacheDev, clock)),
                ("timeout_ns", offset_of!(CacheDev, timeout_ns)),
                ("nslots", offset_of!(CacheDev, nslots)),
                ("line_bytes", offset_of!(CacheDev, line_bytes)),
                ("max_arrays", offset_of!(CacheDev, max_arrays)),
                ("nshards", offset_of!(CacheDev, nshards)),
                ("slot_shift", offset_of!(CacheDev, slot_shift)),
                ("ring_shift", offset_of!(CacheDev, ring_shift)),
                ("ring", offset_of!(CacheDev, ring)),
                ("fill_ctl", offset_of!(CacheDev, fill_ctl)),
                ("readahead", offset_of!(CacheDev, readahead)),
                ("spare_warps", offset_of!(CacheDev, spare_warps)),
                ("fill_qp0", offset_of!(CacheDev, fill_qp0)),
                ("fill_qps", offset_of!(CacheDev, fill_qps)),
            ],
        )
    }
}

/// Every cache struct's layout, for the layout test.
pub fn layouts() -> Vec<Layout> {
    vec![
        CacheArr::layout(),
        CacheStatsRaw::layout(),
        ArrayView::layout(),
        FlushResult::layout(),
        FillCtl::layout(),
        CacheDev::layout(),
    ]
}

/// The header's constants that this file mirrors, by name (checked against the C++
/// compiler's view in `tests/cache_layout.rs`).
pub fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("BAM_LINE_VALID", BAM_LINE_VALID),
        ("BAM_LINE_BUSY", BAM_LINE_BUSY),
        ("BAM_LINE_DIRTY", BAM_LINE_DIRTY),
        ("BAM_LINE_GEN", BAM_LINE_GEN),
        ("BAM_LINE_REFS", BAM_LINE_REFS),
        ("BAM_TAG_LOCK", BAM_TAG_LOCK),
        ("BAM_TAG_USED", BAM_TAG_USED),
        ("BAM_TAG_QUARANTINE", BAM_TAG_QUARANTINE),
        ("BAM_TAG_RESERVED", BAM_TAG_RESERVED),
        ("BAM_TAG_LINE_MASK", BAM_TAG_LINE_MASK),
        ("BAM_CACHE_VIEWS_OFFSET", BAM_CACHE_VIEWS_OFFSET.into()),
        ("BAM_CACHE_STAT_SHARDS", BAM_CACHE_STAT_SHARDS.into()),
        ("BAM_CACHE_MAX_READAHEAD", BAM_CACHE_MAX_READAHEAD.into()),
        ("BAM_EPL_NO_SHIFT", BAM_EPL_NO_SHIFT.into()),
        ("BAM_FILL_SERVICE_THREADS", BAM_FILL_SERVICE_THREADS.into()),
        ("BAM_LAYOUT_STRIPE", BAM_LAYOUT_STRIPE.into()),
        ("BAM_LAYOUT_REPLICATE", BAM_LAYOUT_REPLICATE.into()),
        ("BAM_ARR_F_READ_ONLY", BAM_ARR_F_READ_ONLY.into()),
        ("BAM_RESIDENT_NO_SLOT", BAM_RESIDENT_NO_SLOT.into()),
        ("BAM_VIEW_F_RESIDENT", BAM_VIEW_F_RESIDENT.into()),
        ("BAM_VIEW_F_CONTIGUOUS", BAM_VIEW_F_CONTIGUOUS.into()),
        ("BAM_VIEW_F_COUNTING", BAM_VIEW_F_COUNTING.into()),
        ("BAM_VIEW_F_EPL_DIV", BAM_VIEW_F_EPL_DIV.into()),
        ("BAM_VIEW_F_READAHEAD", BAM_VIEW_F_READAHEAD.into()),
        ("BAM_VIEW_F_GENERAL", BAM_VIEW_F_GENERAL.into()),
    ]
}
