//! `#[repr(C)]` twins of `crates/bam/cuda/src/file_abi.h`: the file backend's request and
//! completion rings (pinned host memory) and its forwarder kernel's tables (GPU memory).
//! Sizes asserted at compile time; offsets compared with the C++ compiler's by
//! `crates/bam/tests/layout.rs`.

#![allow(missing_docs)]

use crate::abi::Layout;

pub const BAM_FILE_OP_READ: u8 = 1;
pub const BAM_FILE_OP_WRITE: u8 = 2;
pub const BAM_FILE_OP_FLUSH: u8 = 3;
pub const BAM_FILE_OP_ECHO: u8 = 4;

abi_struct!(FileReq = "bam_file_req", size 24, {
    offset: u64, bytes: u32, slot: u16, op: u8, pad: u8, ssd: u16, status: u16, seq: u32,
});
abi_struct!(FileCpl = "bam_file_cpl", size 8, { slot: u16, status: u16, seq: u32 });
abi_struct!(FileRing = "bam_file_ring", size 128, {
    req_prod: u32, pad0: [u32; 15], cpl_prod: u32, pad1: [u32; 15],
});
abi_struct!(FileQueue = "bam_file_queue", size 192, {
    sq: u64, cq: u64, sq_db: u64, cq_db: u64, ring: u64, reqs: u64, cpls: u64, staging: u64,
    slots: u64, depth: u32, qid: u16, ssd: u16, nslots: u32, slot_bytes: u32,
    sq_head: u32, cq_tail: u32, cq_head: u32, req_prod: u32, cpl_cons: u32, free_top: u32,
    reads: u64, writes: u64, others: u64, read_bytes: u64, write_bytes: u64, errors: u64,
    refused: u64, bad_doorbells: u64, reserved: [u64; 2],
});
abi_struct!(FileSlot = "bam_file_slot", size 32, {
    prp1: u64, prp2: u64, bytes: u32, cid: u16, op: u8, busy: u8, seq: u32, pad: u32,
});
abi_struct!(FileSsd = "bam_file_ssd", size 24, {
    nlb: u64, lba_shift: u32, nsid: u32, mdts_bytes: u32, pad: u32,
});
abi_struct!(FileControl = "bam_file_control", size 128, {
    stop: u32, started: u32, exited: u32, pad: u32, loops: u64, reserved: [u64; 13],
});
abi_struct!(FileView = "bam_file_view", size 48, {
    queues: u64, ssds: u64, control: u64, buf: u64, buf_len: u64, nqueues: u32, nssd: u32,
});

/// The constants shared with file_abi.h (name, value), for the layout test.
pub fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("BAM_FILE_OP_READ", BAM_FILE_OP_READ.into()),
        ("BAM_FILE_OP_WRITE", BAM_FILE_OP_WRITE.into()),
        ("BAM_FILE_OP_FLUSH", BAM_FILE_OP_FLUSH.into()),
        ("BAM_FILE_OP_ECHO", BAM_FILE_OP_ECHO.into()),
    ]
}

/// Layouts of every struct of file_abi.h.
pub fn layouts() -> Vec<Layout> {
    vec![
        FileReq::layout(),
        FileCpl::layout(),
        FileRing::layout(),
        FileQueue::layout(),
        FileSlot::layout(),
        FileSsd::layout(),
        FileControl::layout(),
        FileView::layout(),
    ]
}
