//! What a cache is made of and reports: its configuration, the I/O shape it needs, its
//! statistics and a flush's outcome.

use super::abi::{self, *};
use crate::error::{Error, Result};
use crate::io::IoConfig;
use serde::Serialize;
use std::time::Duration;

/// How an array's lines are spread over the SSDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Layout {
    /// Line `l` lives on SSD `l % nssd` (at `start_lba + (l / nssd) * line_lbas`).
    Stripe,
    /// Every SSD holds every line at `start_lba + l * line_lbas`; reads of line `l` go
    /// to SSD `l % nssd`, write-backs to all of them.
    Replicate,
}

/// Geometry of a cache.
#[derive(Clone, Debug, Serialize)]
pub struct CacheConfig {
    /// Bytes per line: a multiple of the LBA size, 512 B to 64 KiB.
    pub line_bytes: u32,
    /// Lines the cache holds.
    pub slots: u32,
    /// Arrays that may share the cache at once.
    pub max_arrays: u32,
    /// Bound of every wait in the cache (`None`: the array's I/O timeout).
    pub timeout: Option<Duration>,
    /// Blocks of the fill service, the persistent kernel that reads the lines threads
    /// miss on (one block of 512 threads takes one SM; each thread has one fill in
    /// flight). 8 blocks keep 4,096 fills in flight; a fill that evicts a dirty line
    /// writes it back first, so write-heavy scans want more (docs/cache.md).
    pub fill_blocks: u32,
    /// Read-ahead of streaming reads: when every lane of a warp misses in one line whose
    /// neighbours are cached or being filled (a scan), the warp also asks for the lines
    /// 1, 2, ... `readahead` grid strides ahead (a grid stride: the bytes all the
    /// kernel's threads read in one step of a grid-stride loop, in lines), so that more
    /// fills are in flight than the warps that wait. Read-ahead fills that fail are
    /// dropped (a reader of the line reads it again and reports its own error). At most
    /// [`CacheConfig::MAX_READAHEAD`]; 8 suits scans (docs/cache.md, "Read-ahead").
    ///
    /// Off (0) by default: a kernel whose reads jump about, but whose neighbouring lines
    /// are often cached, is taken for a scan and reads lines it does not need (the graph
    /// example's BFS runs markedly slower with 8).
    pub readahead: u32,
    /// Count every access and hit ([`CacheStats::accesses`], [`CacheStats::hits`],
    /// [`CacheStats::hit_rate`]). Off by default: the counting is on every access's
    /// path, and a streaming kernel whose reads all hit runs measurably slower with it
    /// (docs/cache.md, "Statistics"). The other counters (misses, evictions, write-backs,
    /// I/O, waits, errors, read-aheads) are counted off that path and always on.
    pub count_hits: bool,
    /// Bound of the host's wait for a cache kernel: [`Cache::sync`] and every call that
    /// launches one and waits for it (`Array::load`, `Array::read`, [`Cache::flush`],
    /// pinning). `None`: 8 x the I/O timeout + 60 s, long enough for a flush that waits out
    /// the timeout on many lines. A wait that ends at the bound returns
    /// [`Error::Timeout`]; the kernel goes on, and the memory it may still touch is never
    /// freed (it is leaked, with a warning).
    pub sync_timeout: Option<Duration>,
    /// Arrays resident by default: the share of the slots, in percent, that arrays may
    /// hold for good when their first [`Array::view`](super::Array::view) makes them
    /// resident. An array whose lines fit in what is left of this share (beside the
    /// other arrays made resident that way and the [`Resident`](super::Resident) guards)
    /// has every line read in at its first `view()` and kept until the array is closed
    /// or dropped; its kernels then read and write through plain loads and stores, as
    /// with [`Array::make_resident`](super::Array::make_resident), with no change to
    /// their code. Larger arrays, arrays shared with other GPUs and every array when this
    /// is 0 get ordinary views: the cache's protocol on each access, lines evicted as
    /// needed. What is left of the slots serves the other arrays' misses.
    ///
    /// 90 by default. Set 0 when arrays are read sparsely (the first `view()` reads all
    /// of an array that fits) or when the slots should serve all arrays alike;
    /// [`Array::ordinary_view`](super::Array::ordinary_view) opts one array's view out.
    /// docs/cache.md, "Resident arrays".
    pub auto_resident_percent: u32,
}

impl CacheConfig {
    /// Checks the configuration against the I/O buffer it will use (`buf_slots` slots of
    /// `slot_bytes`), the SSDs' LBA size and the GPU's SMs.
    pub(crate) fn check(&self, buf_slots: u32, slot_bytes: u64, lba: u32, sms: u32) -> Result<()> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        if self.line_bytes < 512 || self.line_bytes > 65536 || !self.line_bytes.is_multiple_of(lba)
        {
            return bad(format!(
                "line size {} must be a multiple of the LBA size {lba}, 512 B to 64 KiB",
                self.line_bytes
            ));
        }
        if self.slots == 0 || self.slots > buf_slots {
            return bad(format!(
                "{} cache slots; the I/O buffer has {} (use cache::io_config)",
                self.slots, buf_slots
            ));
        }
        if (self.line_bytes as u64) > slot_bytes || !slot_bytes.is_power_of_two() {
            return bad(format!(
                "line size {} exceeds the I/O buffer slot size {}",
                self.line_bytes, slot_bytes
            ));
        }
        if self.max_arrays == 0 || self.max_arrays > 1 << 19 {
            return bad("max_arrays must be in 1..=2^19".into());
        }
        if let Some(t) = self.timeout {
            crate::io::check_timeout("the cache timeout", t)?;
        }
        if let Some(t) = self.sync_timeout {
            if t.is_zero() {
                return bad("sync_timeout must be above 0".into());
            }
        }
        if self.auto_resident_percent > 100 {
            return bad(format!(
                "auto_resident_percent {} must be at most 100",
                self.auto_resident_percent
            ));
        }
        if self.readahead > CacheConfig::MAX_READAHEAD {
            return bad(format!(
                "readahead {} must be at most {}",
                self.readahead,
                CacheConfig::MAX_READAHEAD
            ));
        }
        if self.fill_blocks == 0 || self.fill_blocks > sms / 2 {
            return bad(format!(
                "fill_blocks {} must be in 1..={} (one SM each, at most half of the GPU's {})",
                self.fill_blocks,
                sms / 2,
                sms
            ));
        }
        Ok(())
    }

    /// The largest [`CacheConfig::readahead`].
    pub const MAX_READAHEAD: u32 = abi::BAM_CACHE_MAX_READAHEAD;

    /// The fill service's spare slots for this configuration: one per service warp
    /// ([`CacheConfig::fill_blocks`] x 16) in a cache of at least 64 lines per service
    /// warp (8,192 with the default 8 blocks), none in a smaller one. They come on top of
    /// [`CacheConfig::slots`]: each warp of the service holds one empty slot ready, so that
    /// a lone miss starts its read without looking for a slot (docs/cache.md, "Spare
    /// slots"). A cache gets them when its I/O buffer has the room ([`sim_config`] and
    /// [`io_config`] make it), else it runs without.
    pub fn spare_slots(&self) -> u32 {
        let warps = self
            .fill_blocks
            .saturating_mul(BAM_FILL_SERVICE_THREADS / 32);
        if self.slots / 64 >= warps {
            warps
        } else {
            0
        }
    }

    /// I/O buffer slots a cache of this configuration uses: its lines and the spares.
    ///
    /// ```
    /// let cfg = bam::cache::CacheConfig::new(4096, 65536);
    /// assert_eq!(cfg.io_slots(), 65536 + 128); // 8 fill blocks of 16 warps
    /// assert_eq!(bam::cache::CacheConfig::new(4096, 1024).io_slots(), 1024); // too small
    /// ```
    pub fn io_slots(&self) -> u32 {
        self.slots.saturating_add(self.spare_slots())
    }

    /// `slots` lines of `line_bytes`.
    pub fn new(line_bytes: u32, slots: u32) -> Self {
        CacheConfig {
            line_bytes,
            slots,
            max_arrays: 64,
            timeout: None,
            fill_blocks: 8,
            readahead: 0,
            count_hits: false,
            sync_timeout: None,
            auto_resident_percent: CacheConfig::AUTO_RESIDENT_PERCENT,
        }
    }

    /// The default [`CacheConfig::auto_resident_percent`].
    pub const AUTO_RESIDENT_PERCENT: u32 = 90;
}

/// The I/O layer a cache needs, on any backend: buffer slots that hold its lines and its
/// fill service's spares, and the queue pairs per SSD that give the fill service its own
/// (one per fill block, when that leaves three quarters of each SSD's queue pairs shared:
/// 4 x `fill_blocks`, 32 by default). Change the other fields as you like; with fewer
/// queue pairs the fill service shares the others' (slower under many misses).
///
/// ```
/// use bam::cache::{io_config, CacheConfig};
/// let io = io_config(&CacheConfig::new(4096, 65536));
/// assert_eq!((io.queues, io.slot_bytes), (32, 4096));
/// assert!(io.nslots >= 65536);
/// ```
pub fn io_config(cache: &CacheConfig) -> IoConfig {
    IoConfig {
        queues: 4 * cache.fill_blocks.max(1),
        slot_bytes: IoConfig::slot_for_line(cache.line_bytes as u64),
        nslots: cache.io_slots(),
        ..IoConfig::new()
    }
}

/// Cache statistics (sums over all shards).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Whether `accesses` and `hits` were counted ([`CacheConfig::count_hits`]); both
    /// stay 0 otherwise.
    pub hits_counted: bool,
    /// Element accesses (counted with [`CacheConfig::count_hits`] only).
    pub accesses: u64,
    /// Line acquisitions that hit (counted with [`CacheConfig::count_hits`] only).
    pub hits: u64,
    /// Line acquisitions that filled the line (one read each).
    pub misses: u64,
    /// Valid lines evicted.
    pub evictions: u64,
    /// Dirty lines written back (eviction and flush).
    pub writebacks: u64,
    /// Read requests issued.
    pub reads: u64,
    /// Write requests issued (one per replica).
    pub writes: u64,
    /// Failed fills, write-backs and timeouts.
    pub errors: u64,
    /// Acquisitions that waited for a busy line.
    pub waits: u64,
    /// Lines read ahead of streaming misses ([`CacheConfig::readahead`]); a read of such
    /// a line later counts as a hit.
    pub readaheads: u64,
}

impl CacheStats {
    /// I/O requests issued.
    pub fn ios(&self) -> u64 {
        self.reads + self.writes
    }
    /// Hits over line acquisitions; `None` when hits were not counted
    /// ([`CacheConfig::count_hits`] off) or nothing was acquired.
    pub fn hit_rate(&self) -> Option<f64> {
        let t = self.hits + self.misses;
        if !self.hits_counted || t == 0 {
            None
        } else {
            Some(self.hits as f64 / t as f64)
        }
    }
}

/// Outcome of a flush.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlushReport {
    /// Dirty lines written back.
    pub written: u64,
    /// Lines dropped from the cache (array teardown).
    pub dropped: u64,
}
