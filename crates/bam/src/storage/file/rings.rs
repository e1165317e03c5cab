//! One queue pair's rings between the forwarder (the producer of requests) and the CPU
//! service (the producer of completions), in host memory: their layout, and both sides'
//! accessors (file_abi.h states the protocol).
//!
//! On the GPU machine the memory is pinned and mapped for the GPU; the CPU-side tests
//! put it in ordinary memory ([`QueueRings::in_host_memory`]) and play the forwarder's
//! part themselves.

use super::abi::{FileCpl, FileReq, FileRing};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Offsets of one queue pair's rings and staging slots in its host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Staging slots (a power of two, at most 65536): requests in flight at most.
    pub nslots: u32,
    /// Bytes per staging slot (a multiple of 4096).
    pub slot_bytes: u32,
    /// `bam_file_req[nslots]`.
    pub reqs: usize,
    /// `bam_file_cpl[nslots]`.
    pub cpls: usize,
    /// Staging, page aligned.
    pub staging: usize,
    /// Bytes in all.
    pub bytes: usize,
}

impl RingLayout {
    /// The layout for `nslots` slots of `slot_bytes`.
    pub fn new(nslots: u32, slot_bytes: u32) -> Result<Self> {
        if !nslots.is_power_of_two() || nslots > 65536 {
            return Err(Error::InvalidArgument(format!(
                "{nslots} staging slots: a power of two, at most 65536"
            )));
        }
        if slot_bytes == 0 || !slot_bytes.is_multiple_of(4096) {
            return Err(Error::InvalidArgument(format!(
                "staging slots of {slot_bytes} B: a multiple of 4096"
            )));
        }
        let mut t = crate::cuda::TableLayout::new();
        t.of::<FileRing>(1, 128);
        let reqs = t.of::<FileReq>(nslots as usize, 64);
        let cpls = t.of::<FileCpl>(nslots as usize, 64);
        let staging = t.array(slot_bytes as usize, nslots as usize, 4096);
        Ok(RingLayout {
            nslots,
            slot_bytes,
            reqs,
            cpls,
            staging,
            bytes: crate::cuda::layout::round_up(t.bytes(), 4096),
        })
    }
}

/// One queue pair's rings as the CPU sees them: a view that keeps its host memory
/// (pinned memory of the array, or ordinary memory from [`QueueRings::in_host_memory`])
/// alive.
#[derive(Clone)]
pub struct QueueRings {
    _owner: Arc<dyn Send + Sync>,
    base: *mut u8,
    layout: RingLayout,
}

// SAFETY: the memory is shared with another agent (the GPU) by design; every access to
// the counters is atomic, and entries and staging slots are handed over by the
// release/acquire protocol of file_abi.h, so one thread at a time touches each.
unsafe impl Send for QueueRings {}
// SAFETY: as above.
unsafe impl Sync for QueueRings {}

impl QueueRings {
    /// Rings laid out as `layout` at `base`, kept alive by `owner`.
    ///
    /// # Safety
    /// `base` must be 4096-byte aligned and point to `layout.bytes` bytes that stay
    /// allocated while `owner` lives, written otherwise only by the protocol's other side.
    pub(crate) unsafe fn new(
        owner: Arc<dyn Send + Sync>,
        base: *mut u8,
        layout: RingLayout,
    ) -> Self {
        QueueRings {
            _owner: owner,
            base,
            layout,
        }
    }

    /// Zeroed rings of `nslots` slots of `slot_bytes` in ordinary host memory: for
    /// driving the service from the CPU alone (tests, tools), playing the forwarder.
    pub fn in_host_memory(nslots: u32, slot_bytes: u32) -> Result<Self> {
        let layout = RingLayout::new(nslots, slot_bytes)?;
        let mem = Arc::new(HostMemory::zeroed(layout.bytes)?);
        let base = mem.ptr;
        // SAFETY: page aligned, layout.bytes long, freed when the last view is dropped.
        Ok(unsafe { QueueRings::new(mem, base, layout) })
    }

    /// The layout.
    pub fn layout(&self) -> RingLayout {
        self.layout
    }

    fn ring(&self) -> &FileRing {
        // SAFETY: offset 0 holds the ring counters, aligned (base is page aligned), in
        // memory that outlives self (the constructor's contract).
        unsafe { &*(self.base as *const FileRing) }
    }

    fn counter(&self, req: bool) -> &AtomicU32 {
        let r = self.ring();
        let p = if req { &r.req_prod } else { &r.cpl_prod };
        // SAFETY: an aligned u32 inside the ring, accessed only atomically by both sides.
        unsafe { AtomicU32::from_ptr(p as *const u32 as *mut u32) }
    }

    /// Requests posted so far (acquire: the entries and a write's staged data up to it
    /// are visible).
    pub fn req_prod(&self) -> u32 {
        self.counter(true).load(Ordering::Acquire)
    }

    /// Completions posted so far (acquire).
    pub fn cpl_prod(&self) -> u32 {
        self.counter(false).load(Ordering::Acquire)
    }

    /// Publishes completions up to `n` (release: entries and read data before it).
    pub fn publish_cpls(&self, n: u32) {
        self.counter(false).store(n, Ordering::Release);
    }

    /// Publishes requests up to `n` (the forwarder's side; release).
    pub fn publish_reqs(&self, n: u32) {
        self.counter(true).store(n, Ordering::Release);
    }

    fn entry<T>(&self, off: usize, i: u32) -> *mut T {
        let k = (i & (self.layout.nslots - 1)) as usize;
        // SAFETY: k < nslots and the array of nslots entries lies inside the memory.
        unsafe { self.base.add(off + k * std::mem::size_of::<T>()) as *mut T }
    }

    /// Request number `i` (mod nslots), read once.
    pub fn req(&self, i: u32) -> FileReq {
        // SAFETY: an aligned entry in the memory; volatile: the other side wrote it.
        unsafe { std::ptr::read_volatile(self.entry::<FileReq>(self.layout.reqs, i)) }
    }

    /// Writes request number `i` (the forwarder's side).
    pub fn set_req(&self, i: u32, r: FileReq) {
        // SAFETY: as in `req`; the other side reads it only after publish_reqs.
        unsafe { std::ptr::write_volatile(self.entry::<FileReq>(self.layout.reqs, i), r) }
    }

    /// Completion number `i` (mod nslots).
    pub fn cpl(&self, i: u32) -> FileCpl {
        // SAFETY: as in `req`.
        unsafe { std::ptr::read_volatile(self.entry::<FileCpl>(self.layout.cpls, i)) }
    }

    /// Writes completion number `i`.
    pub fn set_cpl(&self, i: u32, c: FileCpl) {
        // SAFETY: as in `set_req`.
        unsafe { std::ptr::write_volatile(self.entry::<FileCpl>(self.layout.cpls, i), c) }
    }

    /// Address of staging slot `slot` (None past the last).
    pub fn staging(&self, slot: u16) -> Option<*mut u8> {
        if slot as u32 >= self.layout.nslots {
            return None;
        }
        let off = self.layout.staging + slot as usize * self.layout.slot_bytes as usize;
        // SAFETY: the slot lies inside the memory.
        Some(unsafe { self.base.add(off) })
    }
}

/// Page-aligned zeroed host memory, freed on drop.
struct HostMemory {
    ptr: *mut u8,
    alloc: std::alloc::Layout,
}

// SAFETY: owns its memory; shared access goes through QueueRings' protocol.
unsafe impl Send for HostMemory {}
// SAFETY: as above.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    fn zeroed(bytes: usize) -> Result<Self> {
        let alloc = std::alloc::Layout::from_size_align(bytes.max(4096), 4096)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        // SAFETY: a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(alloc) };
        if ptr.is_null() {
            return Err(Error::InvalidArgument(format!(
                "{bytes} B of host memory for rings"
            )));
        }
        Ok(HostMemory { ptr, alloc })
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.alloc) }
    }
}
