//! Scans: GPU blocks reading large byte ranges ("spans") of the array chunk after chunk,
//! without the cache. For work that reads data once, front to back (a text file parsed
//! row by row, the columns of a table), a per-element cache lookup costs more than it
//! saves; a scan reads whole chunks with large commands (up to the SSD's MDTS) into
//! buffer slots of its own, a few chunks ahead of the block that consumes them. The
//! device side is `bam::scan_reader` (`crates/bam/cuda/include/bam/scan.cuh`).
//!
//! ```no_run
//! # fn main() -> bam::Result<()> {
//! use bam::scan::{io_config, Scan, ScanConfig, Spans};
//! use bam::storage::GpuDevice;
//! let gpu = bam::Gpu::new(0)?;
//! let data = vec![7u8; 64 << 20];
//! // 1 MiB chunks, 3 in flight per block, one block per SM.
//! let cfg = ScanConfig::new(1 << 20).depth(3).blocks(gpu.sms);
//! // 8 simulated SSDs in host memory, with room for the data in one span.
//! let per_ssd = cfg.ssd_bytes(8, 1, data.len() as u64);
//! let device: GpuDevice = format!("sim:ideal,ssds=8,media=host,capacity={per_ssd}").parse()?;
//! let storage = device.open(&gpu, &bam::io::IoConfig { queues: 16, ..io_config(&cfg, 1) })?;
//! let span = Spans::new(storage.io()).span(data.len() as u64)?;
//! let scan = Scan::new(storage.io(), &[span], &cfg)?;
//! scan.write(0, 0, &data, &mut |_done| {})?; // load the data onto the SSDs
//! // A kernel taking `const __grid_constant__ bam_scan_view v` gets `scan.view()` and
//! // runs `scan.blocks()` blocks (or fewer) of at least 32 threads.
//! # Ok(()) }
//! ```

use crate::abi::{ScanView, SpanView, BAM_SCAN_MAX_DEPTH, BAM_SCAN_MAX_SPANS};
use crate::cuda::DeviceBuffer;
use crate::error::{Error, Result};
use crate::io::{IoArray, IoConfig, SlotLease};
use std::time::Duration;

/// A byte range of the striped address space (all SSDs, striped by the I/O layer's
/// stripe unit), starting on a stripe unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Global LBA of byte 0.
    pub first_lba: u64,
    /// Length in bytes.
    pub bytes: u64,
}

/// Hands out consecutive, non-overlapping spans of an [`IoArray`], each starting on a
/// stripe unit (so that a write or a chunk touches as few SSDs as possible).
pub struct Spans {
    next_lba: u64,
    unit_lbas: u64,
    lba_bytes: u64,
    total_lbas: u64,
}

impl Spans {
    /// Spans from the start of `io`'s address space.
    pub fn new(io: &IoArray) -> Self {
        Self::from_lba(io, 0)
    }

    /// Spans from global LBA `first` (rounded up to a stripe unit): to keep clear of
    /// data placed before it, e.g. a cache's arrays.
    pub fn from_lba(io: &IoArray, first: u64) -> Self {
        let g = io.geometry();
        Self::over(
            io.io_view().stripe_lbas as u64,
            g.lba_size as u64,
            g.ns_blocks.saturating_mul(g.ssds as u64),
            first,
        )
    }

    /// Spans over `total_lbas` LBAs of `lba_bytes` striped in units of `unit_lbas`,
    /// from LBA `first` (rounded up to a unit).
    fn over(unit_lbas: u64, lba_bytes: u64, total_lbas: u64, first: u64) -> Self {
        let unit_lbas = unit_lbas.max(1);
        Spans {
            next_lba: first.div_ceil(unit_lbas).saturating_mul(unit_lbas),
            unit_lbas,
            lba_bytes: lba_bytes.max(1),
            total_lbas,
        }
    }

    /// The span of the first `bytes` bytes of `io`'s address space, where data already is:
    /// a file given to the file backend (`file:PATH`), read in place. Unlike [`Self::span`]
    /// it does not round up to a stripe unit, so it fits a namespace that ends with the
    /// file; an error when the array holds fewer bytes.
    ///
    /// ```no_run
    /// # fn main() -> bam::Result<()> {
    /// use bam::scan::{io_config, Scan, ScanConfig, Spans};
    /// let gpu = bam::Gpu::new(0)?;
    /// let cfg = ScanConfig::new(1 << 20);
    /// let device: bam::storage::GpuDevice = "file:measurements.txt".parse()?;
    /// let storage = device.open(&gpu, &io_config(&cfg, 1))?;
    /// let len = std::fs::metadata("measurements.txt")?.len();
    /// let scan = Scan::new(storage.io(), &[Spans::in_place(storage.io(), len)?], &cfg)?;
    /// # let _ = scan;
    /// # Ok(()) }
    /// ```
    pub fn in_place(io: &IoArray, bytes: u64) -> Result<Span> {
        Self::in_place_at(io, 0, bytes)
    }

    /// The span of `bytes` bytes at byte `at` of `io`'s address space, where data already
    /// is: one column of a table file whose columns start on stripe units (with one file,
    /// multiples of the I/O layer's buffer slot size). An error when `at` is not on a
    /// stripe unit or the array ends before `at + bytes`.
    ///
    /// ```no_run
    /// # fn main() -> bam::Result<()> {
    /// use bam::scan::{io_config, Scan, ScanConfig, Spans};
    /// let gpu = bam::Gpu::new(0)?;
    /// let cfg = ScanConfig::new(1 << 20);
    /// // Two 4-byte columns of 50 M rows, the second at 256 MiB of the file.
    /// let device: bam::storage::GpuDevice = "file:table.bin".parse()?;
    /// let storage = device.open(&gpu, &io_config(&cfg, 2))?;
    /// let a = Spans::in_place_at(storage.io(), 0, 200_000_000)?;
    /// let b = Spans::in_place_at(storage.io(), 256 << 20, 200_000_000)?;
    /// let scan = Scan::new(storage.io(), &[a, b], &cfg)?;
    /// # let _ = scan;
    /// # Ok(()) }
    /// ```
    pub fn in_place_at(io: &IoArray, at: u64, bytes: u64) -> Result<Span> {
        let g = io.geometry();
        let lba = g.lba_size as u64;
        let unit = io.io_view().stripe_lbas as u64 * lba;
        let total = g.ns_blocks.saturating_mul(g.ssds as u64) * lba;
        if bytes == 0 || at.checked_add(bytes).is_none_or(|end| end > total) {
            return Err(Error::InvalidArgument(format!(
                "a span of {bytes} bytes at byte {at}: the array holds {total}"
            )));
        }
        if unit == 0 || !at.is_multiple_of(unit) {
            return Err(Error::InvalidArgument(format!(
                "a span at byte {at}: not on a stripe unit of {unit} bytes"
            )));
        }
        Ok(Span {
            first_lba: at / lba,
            bytes,
        })
    }

    /// The next span of `bytes` bytes, or an error when the SSDs are too small.
    pub fn span(&mut self, bytes: u64) -> Result<Span> {
        let lbas = bytes.div_ceil(self.lba_bytes).div_ceil(self.unit_lbas) * self.unit_lbas;
        let end = self
            .next_lba
            .checked_add(lbas)
            .filter(|&e| e <= self.total_lbas);
        let Some(end) = end else {
            return Err(Error::InvalidArgument(format!(
                "a span of {bytes} bytes does not fit: {} of {} bytes of the array are taken",
                self.next_lba * self.lba_bytes,
                self.total_lbas * self.lba_bytes
            )));
        };
        let s = Span {
            first_lba: self.next_lba,
            bytes,
        };
        self.next_lba = end;
        Ok(s)
    }

    /// Global LBA after the last span handed out.
    pub fn end_lba(&self) -> u64 {
        self.next_lba
    }
}

/// How a scan reads: chunk size, halo, read-ahead depth and the blocks it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanConfig {
    /// Bytes per chunk of every span (a multiple of the LBA size). Spans read together
    /// (columns) may use [`Scan::with_chunks`] for per-span chunk sizes.
    pub chunk_bytes: u32,
    /// Bytes after each chunk delivered with it, for records that cross the chunk's end
    /// (a multiple of the LBA size; 0 for fixed-size records that never cross).
    pub halo_bytes: u32,
    /// Chunks in flight per block, 1 to 8: the block works on one while the others are
    /// on their way.
    pub depth: u32,
    /// Blocks the scan kernel may run (each holds `depth` chunks of buffer slots).
    pub blocks: u32,
}

impl ScanConfig {
    /// Chunks of `chunk_bytes`, no halo, depth 3, 132 blocks (one per SM of an H100;
    /// set it with [`ScanConfig::blocks`]).
    pub fn new(chunk_bytes: u32) -> Self {
        ScanConfig {
            chunk_bytes,
            halo_bytes: 0,
            depth: 3,
            blocks: 132,
        }
    }
    /// With a halo of `bytes` after each chunk.
    pub fn halo(mut self, bytes: u32) -> Self {
        self.halo_bytes = bytes;
        self
    }
    /// With `depth` chunks in flight per block.
    pub fn depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }
    /// For kernels of up to `blocks` blocks.
    pub fn blocks(mut self, blocks: u32) -> Self {
        self.blocks = blocks;
        self
    }
    /// Buffer slot size a scan with this configuration needs: a power of two that holds a
    /// chunk and its halo. It is also the stripe unit, so that a chunk touches at most two SSDs.
    pub fn slot_bytes(&self) -> u64 {
        (self.chunk_bytes as u64 + self.halo_bytes as u64)
            .next_power_of_two()
            .max(4096)
    }
    /// Buffer slots a scan of `spans` spans needs.
    pub fn slots(&self, spans: u32) -> u32 {
        self.blocks.saturating_mul(self.depth).saturating_mul(spans)
    }
    /// Bytes each of `ssds` SSDs needs to hold `bytes` in `spans` spans: whole stripe
    /// units ([`Self::slot_bytes`]), each span rounded up to one, spread over the SSDs.
    pub fn ssd_bytes(&self, ssds: u32, spans: u32, bytes: u64) -> u64 {
        let unit = self.slot_bytes();
        let units = bytes.div_ceil(unit) + spans as u64;
        (units.div_ceil(ssds.max(1) as u64) + 1) * unit
    }
}

/// An I/O layer configuration (any backend) whose buffer slots serve a scan of `spans`
/// spans with `cfg`.
pub fn io_config(cfg: &ScanConfig, spans: u32) -> IoConfig {
    IoConfig {
        slot_bytes: cfg.slot_bytes(),
        nslots: cfg.slots(spans),
        ..IoConfig::default()
    }
}

/// A scan over up to 8 spans with the same number of chunks, and the buffer slots it
/// reads them into. The spans' data is whatever was written there: with [`Scan::write`]
/// (any backend), through a cache's arrays, or by the SSDs' previous owner.
pub struct Scan<'a> {
    io: &'a IoArray,
    view: ScanView,
    slots: SlotLease<'a>,
    /// The scan's own error log (its view's `errlog`).
    log: crate::io::ErrorLog,
}

impl<'a> Scan<'a> {
    /// A scan of `spans` with `cfg.chunk_bytes` chunks in every span.
    pub fn new(io: &'a IoArray, spans: &[Span], cfg: &ScanConfig) -> Result<Self> {
        let chunks: Vec<(Span, u32)> = spans.iter().map(|&s| (s, cfg.chunk_bytes)).collect();
        Self::with_chunks(io, &chunks, cfg)
    }

    /// A scan of spans with a chunk size each (columns of different widths read row
    /// range by row range: chunk sizes proportional to the widths). `cfg.chunk_bytes`
    /// is ignored; every span must have the same number of chunks.
    pub fn with_chunks(io: &'a IoArray, spans: &[(Span, u32)], cfg: &ScanConfig) -> Result<Self> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        let v = io.io_view();
        let lba = io.geometry().lba_size as u64;
        let unit = v.buf.slot_bytes;
        if spans.is_empty() || spans.len() > BAM_SCAN_MAX_SPANS {
            return bad(format!(
                "a scan reads 1 to {BAM_SCAN_MAX_SPANS} spans, not {}",
                spans.len()
            ));
        }
        if cfg.depth == 0 || cfg.depth > BAM_SCAN_MAX_DEPTH || cfg.blocks == 0 {
            return bad(format!(
                "depth {} must be in 1..={BAM_SCAN_MAX_DEPTH} and blocks {} at least 1",
                cfg.depth, cfg.blocks
            ));
        }
        if !(cfg.halo_bytes as u64).is_multiple_of(lba) {
            return bad(format!(
                "halo of {} bytes: not a multiple of the LBA size {lba}",
                cfg.halo_bytes
            ));
        }
        let unit_lbas = v.stripe_lbas as u64;
        let mut chunks = None;
        let mut views = [SpanView::default(); BAM_SCAN_MAX_SPANS];
        for (i, &(s, chunk)) in spans.iter().enumerate() {
            if chunk == 0 || !(chunk as u64).is_multiple_of(lba) {
                return bad(format!(
                    "span {i}: chunk of {chunk} bytes is not a positive multiple of the LBA size {lba}"
                ));
            }
            if chunk as u64 + cfg.halo_bytes as u64 > unit {
                return bad(format!(
                    "span {i}: a chunk of {chunk} bytes and its halo of {} exceed the buffer slot of \
                     {unit} bytes (build the I/O layer with scan::io_config or scan::sim_config)",
                    cfg.halo_bytes
                ));
            }
            if s.bytes == 0 || s.first_lba % unit_lbas != 0 {
                return bad(format!(
                    "span {i} must be non-empty and start on a stripe unit (use scan::Spans)"
                ));
            }
            let n = s.bytes.div_ceil(chunk as u64);
            if *chunks.get_or_insert(n) != n {
                return bad(format!(
                    "span {i} has {n} chunks, span 0 has {}: spans read together need the same \
                     number of chunks (choose chunk sizes in proportion to their lengths)",
                    chunks.unwrap_or(0)
                ));
            }
            views[i] = SpanView {
                first_lba: s.first_lba,
                bytes: s.bytes,
                chunk_bytes: chunk,
                halo_bytes: cfg.halo_bytes,
            };
        }
        let slots = io.lease_slots(cfg.slots(spans.len() as u32), None)?;
        let log = io.new_error_log()?;
        let view = ScanView {
            io: log.view_of(v),
            spans: views,
            chunks: chunks.unwrap_or(0),
            nspans: spans.len() as u32,
            depth: cfg.depth,
            first_slot: slots.first,
            nslots: slots.count,
            lba_shift: lba.trailing_zeros(),
            reserved: 0,
        };
        Ok(Scan {
            io,
            view,
            slots,
            log,
        })
    }

    /// The device-side view, the parameter of a scan kernel (`bam_scan_view`).
    pub fn view(&self) -> ScanView {
        self.view
    }

    /// Most blocks a scan kernel may run.
    pub fn blocks(&self) -> u32 {
        self.slots.count / (self.view.depth * self.view.nspans)
    }

    /// Chunks of every span.
    pub fn chunks(&self) -> u64 {
        self.view.chunks
    }

    /// Writes `data` to span `span` from byte `at` (a multiple of the stripe unit, e.g.
    /// 0) through the GPU's I/O queues, staged in the scan's buffer slots: how data gets
    /// onto the SSDs on any backend. `progress` gets the bytes written so far. The last
    /// LBA is padded with zeros.
    pub fn write(
        &self,
        span: usize,
        at: u64,
        data: &[u8],
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let v = &self.view;
        let unit = v.io.buf.slot_bytes;
        let lba = 1u64 << v.lba_shift;
        if span >= v.nspans as usize {
            return Err(Error::InvalidArgument(format!("no span {span}")));
        }
        let sv = v.spans[span];
        if !at.is_multiple_of(unit)
            || at
                .checked_add(data.len() as u64)
                .is_none_or(|e| e > sv.bytes)
        {
            return Err(Error::InvalidArgument(format!(
                "write of {} bytes at {at}: must start on a stripe unit ({unit} bytes) and end \
                 within the span's {} bytes",
                data.len(),
                sv.bytes
            )));
        }
        let gpu = self.io.gpu();
        let stream = gpu.stream()?;
        let mut failed = DeviceBuffer::zeroed(gpu, 8)?;
        let stage_off = v.first_slot as u64 * unit;
        let round = self.slots.count as u64 * unit;
        let mut done = 0u64;
        for piece in data.chunks(round as usize) {
            let whole = piece.len() as u64 / lba * lba;
            self.io
                .write_buffer(stage_off as usize, &piece[..whole as usize])?;
            let mut bytes = whole;
            if whole < piece.len() as u64 {
                let mut tail = vec![0u8; lba as usize];
                tail[..piece.len() - whole as usize].copy_from_slice(&piece[whole as usize..]);
                self.io.write_buffer((stage_off + whole) as usize, &tail)?;
                bytes += lba;
            }
            let threads = bytes.div_ceil(unit);
            let args = (*v, span as u32, at + done, bytes, failed.ptr());
            // SAFETY: matches bam_scan_write(bam_scan_view, uint32_t, uint64_t, uint64_t,
            // unsigned long long*) in crates/bam/cuda/src/scan.cu; the staged bytes lie in this scan's
            // slots, `failed` outlives the synchronisation below.
            unsafe {
                gpu.module(crate::runtime::SCAN)?.launch(
                    &stream,
                    "bam_scan_write",
                    threads.div_ceil(128) as u32,
                    128,
                    0,
                    &args,
                )?
            };
            let timeout =
                Duration::from_nanos(v.io.timeout_ns.saturating_mul(4)) + Duration::from_secs(10);
            DeviceBuffer::keep_unless_synced(
                gpu.sync_timeout(&stream, timeout),
                &mut [&mut failed],
            )?;
            self.check_errors()?;
            let mut nf = [0u64];
            failed.read(0, &mut nf)?;
            if nf[0] != 0 {
                return Err(Error::InvalidArgument(format!(
                    "{} stripe unit(s) of the write failed",
                    nf[0]
                )));
            }
            done += piece.len() as u64;
            progress(done);
        }
        Ok(())
    }

    /// Takes the device error log: `Err` with the errors of reads that failed (a scan
    /// kernel's `status()` says only that one did).
    pub fn check_errors(&self) -> Result<()> {
        let (count, errors) = self.log.drain()?;
        if count > 0 {
            return Err(Error::Io { count, errors });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_size_holds_chunk_and_halo() {
        let c = ScanConfig::new(1 << 20).halo(512);
        assert_eq!(c.slot_bytes(), 2 << 20);
        assert_eq!(ScanConfig::new(1 << 20).slot_bytes(), 1 << 20);
        assert_eq!(ScanConfig::new(512).slot_bytes(), 4096);
        assert_eq!(ScanConfig::new(1 << 20).depth(4).blocks(10).slots(3), 120);
    }

    #[test]
    fn spans_start_on_stripe_units_and_refuse_to_overflow() {
        // 8 LBAs of 512 B per unit (4 KiB), 100 units in all, from LBA 3 (rounded to 8).
        let mut s = Spans::over(8, 512, 800, 3);
        let a = s.span(1).unwrap();
        assert_eq!(
            a,
            Span {
                first_lba: 8,
                bytes: 1
            }
        );
        let b = s.span(4097).unwrap(); // two units
        assert_eq!(b.first_lba, 16);
        assert_eq!(s.end_lba(), 32);
        let c = s.span(0).unwrap(); // empty: takes no room (Scan::new refuses it)
        assert_eq!((c.first_lba, s.end_lba()), (32, 32));
        assert!(s.span(800 * 512).is_err());
        let d = s.span((800 - 32) * 512).unwrap(); // exactly the rest
        assert_eq!((d.first_lba, s.end_lba()), (32, 800));
        assert!(s.span(1).is_err());
    }

    #[test]
    fn ssd_bytes_hold_the_bytes_in_whole_units() {
        let cfg = ScanConfig::new(1 << 20);
        assert_eq!(io_config(&cfg, 1).slot_bytes, 1 << 20);
        for ssds in [1, 3, 8] {
            let per_ssd = cfg.ssd_bytes(ssds, 2, 100 << 20);
            assert!(per_ssd * ssds as u64 >= (100 << 20) + 2 * (1 << 20));
            assert_eq!(per_ssd % (1 << 20), 0);
        }
    }
}
