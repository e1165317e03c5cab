//! `#[repr(C)]` twins of `crates/bam/cuda/src/sim_abi.h`: the simulated controllers'
//! tables (queues, SSDs, DMA regions, control block) as the controller kernel reads them.
//! Sizes asserted at compile time; offsets compared with the C++ compiler's by
//! `crates/bam/tests/layout.rs`.

#![allow(missing_docs)]

use crate::abi::Layout;

/// Dynamic shared memory of a controller block: staging for small commands, the served
/// queues' constants and the SSDs' parameters (sim_abi.h).
pub const BAM_SIM_SMEM_BYTES: u32 = (128 + 32) * 1024;
/// In `SimQueue::depth`: the queue lives in another GPU's memory, reached through peer
/// access; the controller kernel orders it with system-scope fences (sim_abi.h).
pub const BAM_SIM_Q_SYSTEM: u32 = 1 << 31;
/// `SimSsd::flags`: how the completions of commands in the fault range lie (sim_abi.h).
pub const BAM_SIM_LIE_DUPLICATE: u32 = 1;
pub const BAM_SIM_LIE_OTHER_CID: u32 = 2;
pub const BAM_SIM_LIE_UNSUBMITTED: u32 = 3;
pub const BAM_SIM_LIE_STALE: u32 = 4;
pub const BAM_SIM_LIE_PHASE: u32 = 5;
pub const BAM_SIM_LIE_SQ_HEAD: u32 = 6;
pub const BAM_SIM_LIE_WITHHOLD: u32 = 7;
pub const BAM_SIM_LIE_FLOOD: u32 = 8;

abi_struct!(SimSsd = "bam_sim_ssd", size 128, {
    medium: u64, nlb: u64, lba_shift: u32, nsid: u32, mdts_bytes: u32, page_shift: u32,
    lat_read_ns: u64, lat_write_ns: u64, ps_per_read_cmd: u64, ps_per_write_cmd: u64,
    ps_per_read_byte: u64, ps_per_write_byte: u64, fault_lba: u64, fault_nlb: u64,
    fault_status: u32, flags: u32, vclock: u64, lie_ns: u64, reserved: u64,
});
abi_struct!(SimQueue = "bam_sim_queue", size 128, {
    sq: u64, cq: u64, sq_db: u64, cq_db: u64, pending: u64, cid_bitmap: u64,
    depth: u32, qid: u16, ssd: u16, sq_head: u32, cq_tail: u32, pend_head: u32, pend_tail: u32,
    reads: u64, writes: u64, others: u64, read_bytes: u64, write_bytes: u64, errors: u64, bad_doorbells: u64,
});
abi_struct!(SimPending = "bam_sim_pending", size 16, { due_ns: u64, cid: u16, status: u16, flags: u32 });
abi_struct!(SimRegion = "bam_sim_region", size 32, { iova: u64, len: u64, dev: u64, reserved: u64 });
abi_struct!(SimControl = "bam_sim_control", size 128, {
    stop: u32, stall: u32, started: u32, exited: u32, loops: u64, clock_base: u64,
    prof_cycles: u64, prof_fetch: u64, prof_post: u64, prof_cmds: u64,
    fault_epoch: u32, fault_acks: u32, reserved2: [u64; 7],
});
abi_struct!(SimView = "bam_sim_view", size 48, {
    queues: u64, ssds: u64, regions: u64, control: u64, nqueues: u32, nssd: u32, nregions: u32, flags: u32,
});

/// The constants shared with sim_abi.h (name, value), for the layout test.
pub fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("BAM_SIM_SMEM_BYTES", BAM_SIM_SMEM_BYTES.into()),
        ("BAM_SIM_Q_SYSTEM", BAM_SIM_Q_SYSTEM.into()),
        ("BAM_SIM_LIE_DUPLICATE", BAM_SIM_LIE_DUPLICATE.into()),
        ("BAM_SIM_LIE_OTHER_CID", BAM_SIM_LIE_OTHER_CID.into()),
        ("BAM_SIM_LIE_UNSUBMITTED", BAM_SIM_LIE_UNSUBMITTED.into()),
        ("BAM_SIM_LIE_STALE", BAM_SIM_LIE_STALE.into()),
        ("BAM_SIM_LIE_PHASE", BAM_SIM_LIE_PHASE.into()),
        ("BAM_SIM_LIE_SQ_HEAD", BAM_SIM_LIE_SQ_HEAD.into()),
        ("BAM_SIM_LIE_WITHHOLD", BAM_SIM_LIE_WITHHOLD.into()),
        ("BAM_SIM_LIE_FLOOD", BAM_SIM_LIE_FLOOD.into()),
    ]
}

/// Layouts of every struct of sim_abi.h.
pub fn layouts() -> Vec<Layout> {
    vec![
        SimSsd::layout(),
        SimQueue::layout(),
        SimPending::layout(),
        SimRegion::layout(),
        SimControl::layout(),
        SimView::layout(),
    ]
}
