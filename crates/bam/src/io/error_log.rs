//! Device-side error logs, one per owner: the I/O layer's (raw jobs), each cache's and
//! each scan's (the `errlog` of the io view their kernels run with). The device appends
//! to a ring (`bam_error_log` in abi.h, `record_error` in error.cuh) and the owner drains
//! it without writing it: a host cursor says what was taken, and an entry counts once its
//! sequence word names it. So entries logged while the host reads stay for the next
//! drain, and no owner takes another's errors.

use crate::abi::{ErrorEntry, ErrorLog as LogHeader, IoView};
use crate::cuda::{DeviceBuffer, Gpu};
use crate::error::{IoError, Result};
use std::sync::{Arc, Mutex};

/// One owner's error log in GPU memory.
pub struct ErrorLog {
    mem: DeviceBuffer,
    capacity: u32,
    /// Index of the next error to take (the device's count when everything was taken),
    /// and the suppressed count taken so far.
    cursor: Mutex<(u32, u32)>,
}

/// Offset of the entries after the header.
const ENTRIES: usize = 256;

impl ErrorLog {
    /// A log of `capacity` entries (rounded up to a power of two, at least 16).
    pub fn new(gpu: &Arc<Gpu>, capacity: u32) -> Result<Self> {
        let capacity = capacity.clamp(16, 1 << 20).next_power_of_two();
        let mem = DeviceBuffer::zeroed(
            gpu,
            ENTRIES + std::mem::size_of::<ErrorEntry>() * capacity as usize,
        )?;
        mem.write(
            0,
            &[LogHeader {
                capacity,
                entries: mem.ptr() + ENTRIES as u64,
                ..Default::default()
            }],
        )?;
        Ok(ErrorLog {
            mem,
            capacity,
            cursor: Mutex::new((0, 0)),
        })
    }

    /// Never frees the memory: a kernel that could not be stopped may still log into it.
    pub fn leak(&mut self) {
        self.mem.leak();
    }

    /// Device address of the log (`bam_io_view.errlog`).
    pub fn ptr(&self) -> u64 {
        self.mem.ptr()
    }

    /// `io` with this log as its error log: kernels launched with the result log here.
    pub fn view_of(&self, mut io: IoView) -> IoView {
        io.errlog = self.ptr();
        io
    }

    /// Takes the errors logged since the last drain: how many there were (some may have
    /// been overwritten when more than the capacity came between two drains) and the
    /// entries still held. An entry whose writer has not finished (a kernel still runs)
    /// stays, with the ones after it, for the next drain.
    pub fn drain(&self) -> Result<(u32, Vec<IoError>)> {
        let mut guard = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        let (cursor, suppressed_seen) = *guard;
        let mut hdr = [LogHeader::default()];
        self.mem.read(0, &mut hdr)?;
        let h = hdr[0];
        let suppressed = h.suppressed.wrapping_sub(suppressed_seen);
        // Aborted errors from now on get entries again (up to capacity / 2): the only word
        // of the log the host writes, and one the device only reads.
        if h.aborts != h.abort_base {
            self.mem
                .write(std::mem::offset_of!(LogHeader, abort_base), &[h.aborts])?;
        }
        let pending = h.count.wrapping_sub(cursor);
        if pending == 0 {
            *guard = (cursor, h.suppressed);
            return Ok((suppressed, Vec::new()));
        }
        // Two copies: the first says which entries were complete (their seq written, after
        // their fields, with a release), the second, made after the first had finished,
        // holds those entries' fields as written (a copy reads an entry's fields before its
        // seq, so the first may pair a new seq with older fields).
        let mut seqs = vec![ErrorEntry::default(); self.capacity as usize];
        self.mem.read(ENTRIES, &mut seqs)?;
        let mut entries = vec![ErrorEntry::default(); self.capacity as usize];
        self.mem.read(ENTRIES, &mut entries)?;
        // Errors older than the ring holds are lost (their entries were overwritten).
        let first = if pending > self.capacity {
            h.count.wrapping_sub(self.capacity)
        } else {
            cursor
        };
        let mut out = Vec::new();
        let mut i = first;
        while i != h.count {
            let k = (i & (self.capacity - 1)) as usize;
            let e = &entries[k];
            let d = seqs[k].seq.wrapping_sub(i.wrapping_add(1)) as i32;
            if d < 0 {
                break; // not written yet: its kernel still runs
            }
            if d == 0 && e.seq == seqs[k].seq {
                out.push(IoError::from_entry(e));
            }
            // d > 0, or a later error overwrote it between the copies: counted, not kept
            i = i.wrapping_add(1);
        }
        let taken = i.wrapping_sub(cursor).saturating_add(suppressed);
        *guard = (i, h.suppressed);
        Ok((taken, out))
    }
}

/// Errors taken from a log and not yet claimed by an owner: a cache drains its log into
/// this, and each array takes its own entries (`cache::Array::take_errors`),
/// the cache everything (`cache::Cache::take_errors`).
#[derive(Default)]
pub struct PendingErrors {
    /// Errors counted but whose entries were overwritten (nobody can claim them by LBA).
    pub lost: u32,
    /// Entries not yet claimed.
    pub entries: Vec<IoError>,
}

impl PendingErrors {
    /// Adds a drain's result.
    pub fn add(&mut self, (count, entries): (u32, Vec<IoError>)) {
        self.lost = self
            .lost
            .saturating_add(count.saturating_sub(entries.len() as u32));
        self.entries.extend(entries);
    }

    /// Takes every pending error: (count, entries).
    pub fn take_all(&mut self) -> (u32, Vec<IoError>) {
        let entries = std::mem::take(&mut self.entries);
        let count = (entries.len() as u32).saturating_add(std::mem::take(&mut self.lost));
        (count, entries)
    }

    /// Takes the entries `mine` claims: (count, entries).
    pub fn take_where(&mut self, mine: impl Fn(&IoError) -> bool) -> (u32, Vec<IoError>) {
        let (taken, kept) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|e| mine(e));
        self.entries = kept;
        let taken: Vec<IoError> = taken;
        (taken.len() as u32, taken)
    }
}
