//! `#[repr(C)]` twins of `cuda/include/bam/abi.h` (the I/O layer and the scans), paths in
//! this crate. (The simulated SSD array's, `cuda/src/sim_abi.h`, are beside it:
//! `bam::storage::sim::abi`; the cache's are `bam::cache::abi`.) Sizes are asserted here at compile time
//! (the same numbers as the headers' static_asserts) and every field offset is compared
//! with the C++ compiler's by `tests/layout.rs`. (The benchmark kernels' structs,
//! `bench_abi.h`, are bam-bench's: `bam_bench::abi`.)
//!
//! Bytes from a device or GPU become typed values only through the plain-old-data bound
//! [`Pod`] (bytemuck's): every bit pattern is a valid value and the type has no padding.
//! The structs here derive it, which checks at compile time that they are `repr(C)` and
//! that their size is the sum of their fields' sizes.

#![allow(missing_docs)]

/// Plain old data: every bit pattern is a valid value and the type has no padding bytes
/// (`u8`..`u128`, `i8`..`i128`, `f32`, `f64`, arrays of them, and the `repr(C)` structs
/// of this module). The bound of every typed copy between the host and the GPU
/// ([`crate::cuda::DeviceBuffer::read`], [`as_bytes`]...). A `repr(C)` struct of such
/// fields without padding gets it with `#[derive(Clone, Copy, Pod, Zeroable)]`
/// (`#[bytemuck(crate = "bam::abi::bytemuck")]` where `bytemuck` is not a dependency).
pub use bytemuck::{self, Pod, Zeroable};

/// One struct's layout: name, size, and (field, offset) pairs.
pub type Layout = (&'static str, usize, Vec<(&'static str, usize)>);

/// A `#[repr(C)]` twin of a C struct that Rust and CUDA code share (this module's, the
/// cache's, bam-bench's): plain old data (its `Pod` derive checks at compile time that
/// the fields fill the struct, no padding), its size asserted against the header's, a
/// zeroed `Default`, and `layout()` (C name, size, field offsets) for the layout tests
/// (`bam_cuda_build::layout`). For the workspace's ABI modules, not a user API.
#[doc(hidden)]
#[macro_export]
macro_rules! abi_struct {
    ($(#[$m:meta])* $name:ident = $cname:literal, size $size:expr, { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, $crate::abi::Pod, $crate::abi::Zeroable)]
        #[bytemuck(crate = "bam::abi::bytemuck")]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        const _: () = assert!(::core::mem::size_of::<$name>() == $size);
        impl ::core::default::Default for $name {
            fn default() -> Self {
                <$name as $crate::abi::Zeroable>::zeroed()
            }
        }
        impl $name {
            /// Name, size and field offsets, for the layout test.
            pub fn layout() -> $crate::abi::Layout {
                ($cname, ::core::mem::size_of::<$name>(), vec![$((stringify!($f), ::core::mem::offset_of!($name, $f))),*])
            }
        }
    };
}

pub const BAM_QP_F_MMIO: u32 = 1;
pub const BAM_ERR_NVME: u8 = 1;
pub const BAM_ERR_TIMEOUT: u8 = 2;
pub const BAM_ERR_INVALID: u8 = 3;
pub const BAM_ERR_PROTOCOL: u8 = 4;
pub const BAM_ERR_ABORTED: u8 = 5;
pub const BAM_ERR_VERIFY: u8 = 6;
/// Detail codes (`ErrorEntry::status`) of the entries the cache logs.
pub const BAM_CACHE_ERR_NO_SLOT: u32 = 0xC001;
pub const BAM_CACHE_ERR_LINE_BUSY: u32 = 0xC002;
pub const BAM_CACHE_ERR_RANGE: u32 = 0xC003;
/// Status of a refused write-back: the line belongs to a read-only array.
pub const BAM_CACHE_ERR_READ_ONLY: u32 = 0xC004;
/// Status a flush logs for a line whose write-back timed out (or whose queue broke): the
/// device may still read its slot, so the line stays quarantined in it, not written.
pub const BAM_CACHE_ERR_QUARANTINED: u32 = 0xC005;
/// What a protocol error's opcode field says went wrong (abi.h).
pub const BAM_PROTO_NO_COMMAND: u8 = 0;
pub const BAM_PROTO_SQ_HEAD: u8 = 1;
pub const BAM_PROTO_CQ_FLOOD: u8 = 2;
/// `IoView::flags >> BAM_IO_QPS_PER_SSD_SHIFT`: queue pairs per SSD when SSD s owns
/// queue pairs s * k .. s * k + k - 1 (0: see each `SsdView`).
pub const BAM_IO_QPS_PER_SSD_SHIFT: u32 = 16;
/// `IoView::flags & BAM_IO_SHARED_QPS_MASK`: of each SSD's k queue pairs, the first this
/// many are shared (the rest are a cache's fill queues); 0: all of them.
pub const BAM_IO_SHARED_QPS_MASK: u32 = 0xffff;
abi_struct!(QpView = "bam_qp_view", size 64, {
    sq: u64, cq: u64, sq_db: u64, cq_db: u64, state: u64, slots: u64,
    depth: u32, qid: u16, ssd: u16, flags: u32, reserved: u32,
});
abi_struct!(QpState = "bam_qp_state", size 128, {
    sq_ticket: u64, failed: u64, pad0: [u64; 2],
    sq_tail: u64, sq_doorbells: u64, pad1: [u64; 2],
    cq_head: u64, cq_rung: u64, cq_doorbells: u64, completions: u64, sq_head: u32, pad2: u32, pad3: [u64; 3],
});
abi_struct!(SsdView = "bam_ssd_view", size 32, {
    nlb: u64, nsid: u32, lba_shift: u32, mdts_bytes: u32, nqueues: u32, first_qp: u32, reserved: u32,
});
abi_struct!(BufView = "bam_buf_view", size 64, {
    base: u64, len: u64, iova_table: u64, slot_bytes: u64, prp_off: u64,
    iova_shift: u32, nslots: u32, prp_stride: u32, page_shift: u32, reserved: u64,
});
abi_struct!(ErrorEntry = "bam_error_entry", size 40, {
    lba: u64, time_ns: u64, status: u32, ssd: u16, qid: u16, cid: u16, opcode: u8, kind: u8, nlb: u32,
    seq: u32, reserved: u32,
});
abi_struct!(ErrorLog = "bam_error_log", size 32, {
    suppressed: u32, count: u32, capacity: u32, abort_base: u32, entries: u64, aborts: u32, reserved: u32,
});
abi_struct!(IoView = "bam_io_view", size 112, {
    qps: u64, ssds: u64, errlog: u64, timeout_ns: u64, nssd: u32, nqp: u32, stripe_lbas: u32, flags: u32,
    buf: BufView,
});
pub const BAM_SCAN_MAX_SPANS: usize = 8;
pub const BAM_SCAN_MAX_DEPTH: u32 = 8;
/// Detail of a scan's `Aborted` entry: it found a failed queue pair at its start.
pub const BAM_SCAN_ERR_QUEUE_FAILED: u32 = 0x5CA1;
abi_struct!(SpanView = "bam_span_view", size 24, { first_lba: u64, bytes: u64, chunk_bytes: u32, halo_bytes: u32 });
abi_struct!(ScanView = "bam_scan_view", size 336, {
    io: IoView, spans: [SpanView; BAM_SCAN_MAX_SPANS], chunks: u64, nspans: u32, depth: u32,
    first_slot: u32, nslots: u32, lba_shift: u32, reserved: u32,
});
/// The constants shared with abi.h (name, value), for the layout test.
pub fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("BAM_QP_F_MMIO", BAM_QP_F_MMIO.into()),
        ("BAM_ERR_NVME", BAM_ERR_NVME.into()),
        ("BAM_ERR_TIMEOUT", BAM_ERR_TIMEOUT.into()),
        ("BAM_ERR_INVALID", BAM_ERR_INVALID.into()),
        ("BAM_ERR_PROTOCOL", BAM_ERR_PROTOCOL.into()),
        ("BAM_ERR_ABORTED", BAM_ERR_ABORTED.into()),
        ("BAM_ERR_VERIFY", BAM_ERR_VERIFY.into()),
        ("BAM_CACHE_ERR_NO_SLOT", BAM_CACHE_ERR_NO_SLOT.into()),
        ("BAM_CACHE_ERR_LINE_BUSY", BAM_CACHE_ERR_LINE_BUSY.into()),
        ("BAM_CACHE_ERR_RANGE", BAM_CACHE_ERR_RANGE.into()),
        ("BAM_CACHE_ERR_READ_ONLY", BAM_CACHE_ERR_READ_ONLY.into()),
        (
            "BAM_CACHE_ERR_QUARANTINED",
            BAM_CACHE_ERR_QUARANTINED.into(),
        ),
        ("BAM_PROTO_NO_COMMAND", BAM_PROTO_NO_COMMAND.into()),
        ("BAM_PROTO_SQ_HEAD", BAM_PROTO_SQ_HEAD.into()),
        ("BAM_PROTO_CQ_FLOOD", BAM_PROTO_CQ_FLOOD.into()),
        ("BAM_IO_QPS_PER_SSD_SHIFT", BAM_IO_QPS_PER_SSD_SHIFT.into()),
        ("BAM_IO_SHARED_QPS_MASK", BAM_IO_SHARED_QPS_MASK.into()),
        ("BAM_SCAN_MAX_SPANS", BAM_SCAN_MAX_SPANS as u64),
        ("BAM_SCAN_MAX_DEPTH", BAM_SCAN_MAX_DEPTH.into()),
        (
            "BAM_SCAN_ERR_QUEUE_FAILED",
            BAM_SCAN_ERR_QUEUE_FAILED.into(),
        ),
    ]
}

/// Layouts of every shared struct (the SQE and CQE are checked in bam-nvme's spec).
pub fn layouts() -> Vec<Layout> {
    vec![
        QpView::layout(),
        QpState::layout(),
        SsdView::layout(),
        BufView::layout(),
        ErrorEntry::layout(),
        ErrorLog::layout(),
        IoView::layout(),
        SpanView::layout(),
        ScanView::layout(),
    ]
}

/// View plain-old-data values as their bytes (for copies to the GPU). [`Pod`] rules out
/// padding, whose bytes would be uninitialised:
///
/// ```compile_fail
/// bam::abi::as_bytes(&[(0u8, 0u32)]); // a tuple has padding: not Pod
/// ```
pub fn as_bytes<T: Pod>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// View plain-old-data values as bytes to overwrite (for copies from the GPU): any bytes
/// written are a valid `T` ([`Pod`]).
///
/// ```compile_fail
/// bam::abi::as_bytes_mut(&mut [false]); // not every byte is a valid bool
/// ```
pub fn as_bytes_mut<T: Pod>(v: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_cover_all_structs() {
        assert_eq!(layouts().len(), 9);
    }

    // Every struct shared with the GPU is plain old data (checked when this compiles).
    const fn pod<T: Pod>() {}
    const _: () = {
        pod::<QpView>();
        pod::<QpState>();
        pod::<SsdView>();
        pod::<BufView>();
        pod::<ErrorEntry>();
        pod::<ErrorLog>();
        pod::<IoView>();
        pod::<SpanView>();
        pod::<ScanView>();
        pod::<[u64; 3]>();
        pod::<u128>();
        pod::<f64>();
    };

    #[test]
    fn as_bytes_is_the_little_endian_bytes() {
        let v = [0x0403_0201u32, 0x0807_0605];
        assert_eq!(as_bytes(&v), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(as_bytes(&[[0x0201u16, 0x0403]]), &[1, 2, 3, 4]);
        assert!(as_bytes::<u64>(&[]).is_empty());
    }

    #[test]
    fn as_bytes_covers_whole_structs() {
        let e = ErrorEntry {
            lba: 1,
            status: 0x0302,
            kind: 0xff,
            ..Default::default()
        };
        let b = as_bytes(core::slice::from_ref(&e));
        assert_eq!(b.len(), 40);
        assert_eq!(&b[..8], &1u64.to_le_bytes());
        assert_eq!(&b[16..20], &0x0302u32.to_le_bytes());
        assert_eq!(b[core::mem::offset_of!(ErrorEntry, kind)], 0xff);
        assert_eq!(b.iter().map(|&x| x as u32).sum::<u32>(), 1 + 2 + 3 + 0xff);
    }

    #[test]
    fn as_bytes_mut_round_trips() {
        let mut v = [0u32; 2];
        as_bytes_mut(&mut v).copy_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0x80]);
        assert_eq!(v, [1, 0x8000_0000]);
        let mut q = [QpView::default()];
        as_bytes_mut(&mut q)[..8].copy_from_slice(&7u64.to_le_bytes());
        assert_eq!(q[0].sq, 7);
        assert_eq!(as_bytes(&q)[..8], 7u64.to_le_bytes());
    }
}
