// sim.cu — the GPU part of the simulated SSD array: a persistent controller kernel.
//
// The host part (crates/bam/src/storage/sim/) brings the controllers up through the
// controller model (registers, admin commands); the I/O queues it creates there live
// in GPU memory and are served here. One block per reserved SM (a block takes the
// SM's whole register file, or else asks for all its shared memory, so no other
// kernel's block can share the SM); the host launches this kernel first and waits for
// every block to check in before it launches user kernels.
//
// Each warp serves a fixed set of queues (queue q -> warp q mod W), at most 32; lane j
// keeps the state of the warp's j-th queue in registers and polls its SQ doorbell (one
// load for all the warp's queues); only queues with a new tail or pending completions
// are visited. A visit to a queue:
//   1. post due completions from its pending FIFO (in order, while the CQ has room);
//   2. fetch up to 32 new SQEs, validate them like a strict controller, move the data
//      between the medium and the PRP targets, and queue their completions with the
//      time the device model says they are due.
// Control: the control block (stop, stall, handshake, profile) lives in GPU memory; the
// host reads and writes it with copies on its non-blocking copy stream, which run while
// this kernel runs. Nothing in the service loop touches host memory (a system-scope
// atomic on mapped host memory is not supported over PCIe without host atomics, and
// every PCIe round trip in the loop delays every queue the warp serves).
// Ordering: SQ doorbells are polled with acquire (pairing with the submitters' release;
// a __syncwarp then orders the polling lane's acquire before every lane's SQE loads);
// the CQ head doorbell is read with acquire only when the last value read leaves no
// room. Data and CQE DW0-2 are written, then __syncwarp (memory ordering among the
// warp's lanes), then each CQE's DW3 (CID, status, phase) is stored with release. A
// reader that acquires DW3 sees the CQE and the data. Queues of another GPU (a shared
// array: BAM_SIM_Q_SYSTEM in the depth) are polled, acquired and released at system
// scope instead, pairing with that GPU's system-scope doorbell stores and CQ polls. A command due at once (no
// modelled latency or rate) fetched into an empty pending FIFO is posted in the same
// visit from registers.
#include "sim_abi.h"
#include <bam/nvme.cuh>
#include <bam/util.cuh>

using namespace bam;

namespace {

constexpr uint32_t SIM_THREADS = 512;
constexpr uint32_t SIM_WARPS = SIM_THREADS / 32;
// Small commands (<= 512 B) moved per round by a warp: each lane has this many 16-byte
// cp.async copies in flight (one per command), so a round costs one memory round trip.
// Staging: SMALL_BATCH * 512 B of shared memory per warp (BAM_SIM_STAGE_BYTES per block).
constexpr int SMALL_BATCH = BAM_SIM_STAGE_BYTES / SIM_WARPS / 512;
static_assert(SMALL_BATCH >= 1 && SMALL_BATCH <= 32, "staging");

/// What a visit needs to know about a queue that never changes while the kernel runs,
/// kept in shared memory (a warp's queues: 32 entries). In global memory each visit
/// would read it again from L2: the acquire that starts a visit empties L1.
struct queue_consts {
    bam_sqe* sq;
    bam_cqe* cq;
    bam_sim_pending* pend;
    uint32_t* bitmap;
    uint32_t* sq_db;
    uint32_t* cq_db;
    uint32_t depth;
    uint16_t qid;
    uint16_t ssd;
};
// SSD parameters kept in shared memory (the rest, if any, are read from global memory).
constexpr uint32_t SMEM_SSDS = 32;
static_assert(SIM_WARPS * 32 * sizeof(queue_consts) + SMEM_SSDS * sizeof(bam_sim_ssd) <= BAM_SIM_TABLE_BYTES,
              "shared tables");

/// SimArray::set_fault changed the fault fields of the SSD table (fault epoch `epoch`):
/// copies them into the block's shared copy, then acknowledges. One lane of a warp calls,
/// rarely: out of line, so that the service loop's registers do not pay for it.
/// Every warp of the block writes the same values, so each warp reads the new ones at
/// the latest from its own writes on (its lanes after the service loop's next
/// __syncwarp); a command validated while another warp writes them may see a mix
/// (set_fault documents it). The caller's acquire of the epoch orders the host's writes
/// of the fields before the loads here.
__device__ __noinline__ void take_faults(bam_sim_control* ctl, const bam_sim_ssd* ssds, bam_sim_ssd* ssd_tab,
                                         uint32_t n, uint32_t epoch, uint32_t* seen) {
    for (uint32_t i = 0; i < n; ++i) {
        bam_sim_ssd& g = const_cast<bam_sim_ssd&>(ssds[i]);
        ssd_tab[i].fault_lba = atomic_dev<uint64_t>(g.fault_lba).load(cuda::memory_order_relaxed);
        ssd_tab[i].fault_nlb = atomic_dev<uint64_t>(g.fault_nlb).load(cuda::memory_order_relaxed);
        ssd_tab[i].fault_status = atomic_dev<uint32_t>(g.fault_status).load(cuda::memory_order_relaxed);
        ssd_tab[i].flags = atomic_dev<uint32_t>(g.flags).load(cuda::memory_order_relaxed);
        ssd_tab[i].lie_ns = atomic_dev<uint64_t>(g.lie_ns).load(cuda::memory_order_relaxed);
    }
    *seen = epoch;
    // Release: the copies happen-before the host sees this warp's acknowledgement.
    atomic_dev<uint32_t>(ctl->fault_acks).fetch_add(1u, cuda::memory_order_release);
}

/// Posts one CQE at CQ position `pos`: DW0-DW2, then DW3 (`dw3` without its phase;
/// `flip` inverts the phase) with release (system scope for another GPU's queue).
__device__ __forceinline__ void post_cqe(bam_cqe* cq, uint32_t mask, uint32_t shift, uint32_t pos, uint32_t dw3,
                                         uint32_t sqhd, uint32_t qid, bool sys, uint32_t flip) {
    uint32_t* cw = reinterpret_cast<uint32_t*>(cq + (pos & mask));
    cw[0] = 0;
    cw[1] = 0;
    cw[2] = sqhd | (qid << 16);
    const uint32_t phase = ((pos >> shift) & 1u) ^ 1u ^ flip;
    if (sys)
        atomic_sys<uint32_t>(cw[3]).store(dw3 | (phase << 16), cuda::memory_order_release);
    else
        atomic_dev<uint32_t>(cw[3]).store(dw3 | (phase << 16), cuda::memory_order_release);
}

/// A lying controller's post of the `k` due completions in the lanes' `entry` (every lane
/// of the warp calls; lane 0 posts, in order, after the caller's __syncwarp): each
/// command whose entry.flags carry a BAM_SIM_LIE_* gets its lie (sim_abi.h), extra CQEs
/// only while `spare` CQ entries are free. `lie_state`: the queue's memory of the last
/// lie's CQE (BAM_SIM_LIE_STALE; bit 16 marks it valid). Returns the new CQ tail. Out of
/// line: the service loop pays one ballot for it.
__device__ __noinline__ uint32_t post_lying(bam_cqe* cq, uint32_t mask, uint32_t shift, uint32_t cq_tail, uint32_t k,
                                            uint32_t sqhd, uint32_t qid, bool sys, bam_sim_pending entry,
                                            uint32_t spare, uint32_t* lie_state) {
    constexpr uint32_t ALL = 0xffffffffu, NONE = 0xffffffffu;
    const uint32_t depth = mask + 1u;
    for (uint32_t i = 0; i < k; ++i) {
        const uint32_t cid = __shfl_sync(ALL, static_cast<uint32_t>(entry.cid), i);
        const uint32_t status = __shfl_sync(ALL, static_cast<uint32_t>(entry.status), i);
        const uint32_t dw3 = cid | (status << 17);
        const uint32_t lie = (__shfl_sync(ALL, entry.flags, i) >> 8) & BAM_SIM_LIE_MASK;
        const uint32_t other =
            __shfl_sync(ALL, static_cast<uint32_t>(entry.cid), i + 1u < k ? i + 1u : (i > 0 ? i - 1u : i));
        if (lane_id() != 0) continue;
        uint32_t d = dw3, hd = sqhd, flip = 0, extra = NONE;
        switch (lie) {
        case BAM_SIM_LIE_DUPLICATE: extra = dw3; break;
        case BAM_SIM_LIE_OTHER_CID:
            // Another command of this post; alone, the slot's next command.
            d = (dw3 & ~0xffffu) | (k > 1 ? other : (cid + depth) & 0xffffu);
            break;
        case BAM_SIM_LIE_UNSUBMITTED: extra = (dw3 & ~0xffffu) | ((cid + depth) & 0xffffu); break;
        case BAM_SIM_LIE_STALE: {
            const uint32_t old = lie_state[0];
            if (old & (1u << 16)) extra = old & ~(1u << 16);
            lie_state[0] = dw3 | (1u << 16);
            break;
        }
        case BAM_SIM_LIE_PHASE: flip = 1; break;
        case BAM_SIM_LIE_SQ_HEAD: hd = (depth + 1u) & 0xffffu; break;
        default: break;  // BAM_SIM_LIE_WITHHOLD: only late (fetch)
        }
        post_cqe(cq, mask, shift, cq_tail++, d, hd, qid, sys, flip);
        if (lie == BAM_SIM_LIE_FLOOD) {
            for (uint32_t f = 0; f < depth; ++f) post_cqe(cq, mask, shift, cq_tail++, dw3, sqhd, qid, sys, 0);
        }
        if (extra != NONE && spare > 0) {
            post_cqe(cq, mask, shift, cq_tail++, extra, sqhd, qid, sys, 0);
            --spare;
        }
    }
    return __shfl_sync(ALL, cq_tail, 0);
}

/// 16-byte asynchronous copy global -> shared (cp.async.cg: bypasses L1).
__device__ __forceinline__ void cp_async16(uint4* smem, uint64_t gsrc) {
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gsrc) : "memory");
}

/// Wait for all of this thread's cp.async copies (their data is then visible to it).
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}

/// A queue's counters, kept in the registers of the lane that owns the queue and stored
/// into its bam_sim_queue now and then (the host reads them while the kernel runs).
struct queue_counters {
    uint64_t reads = 0, writes = 0, others = 0, read_bytes = 0, write_bytes = 0, errors = 0, bad_doorbells = 0;

    __device__ void load(const bam_sim_queue& Q) {
        reads = Q.reads;
        writes = Q.writes;
        others = Q.others;
        read_bytes = Q.read_bytes;
        write_bytes = Q.write_bytes;
        errors = Q.errors;
        bad_doorbells = Q.bad_doorbells;
    }
    __device__ void store(bam_sim_queue& Q) const {
        Q.reads = reads;
        Q.writes = writes;
        Q.others = others;
        Q.read_bytes = read_bytes;
        Q.write_bytes = write_bytes;
        Q.errors = errors;
        Q.bad_doorbells = bad_doorbells;
    }
};

struct cmd_info {
    uint64_t medium;  // device pointer into the medium
    uint64_t dev1;    // first data segment (device pointer)
    uint64_t prp2;    // PRP2 as given (IOVA)
    uint32_t len1;    // bytes of the first segment
    uint32_t bytes;   // total bytes
    uint32_t status;  // status field, 0 = ok so far
    uint32_t op;      // 0 none, 1 read, 2 write, 3 flush
};

/// Region 0 (the I/O buffer region, where nearly every PRP points), read once at the
/// start: region_dev checks it without a memory access.
struct region0 {
    uint64_t iova = 0, len = 0, dev = 0;
};

__device__ __forceinline__ bool region_dev(const bam_sim_view& v, const region0& r0, uint64_t iova, uint64_t len,
                                           uint64_t& dev) {
    if (v.nregions > 0 && iova >= r0.iova && iova - r0.iova <= r0.len && len <= r0.len - (iova - r0.iova)) {
        dev = r0.dev + (iova - r0.iova);
        return true;
    }
    const bam_sim_region* r = reinterpret_cast<const bam_sim_region*>(v.regions);
    for (uint32_t i = 1; i < v.nregions; ++i) {
        const uint64_t base = __ldg(&r[i].iova);
        const uint64_t rlen = __ldg(&r[i].len);
        if (iova >= base && iova - base <= rlen && len <= rlen - (iova - base)) {
            dev = __ldg(&r[i].dev) + (iova - base);
            return true;
        }
    }
    return false;
}

/// Warp copy of `len` bytes (16-byte aligned addresses and length), 8 vectors per lane
/// in flight.
__device__ __forceinline__ void warp_copy16(char* dst, const char* src, uint32_t len, uint32_t lane) {
    uint32_t off = lane * 16;
    for (; off + 7 * 512 < len; off += 8 * 512) {
        uint4 x[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = *reinterpret_cast<const uint4*>(src + off + k * 512);
#pragma unroll
        for (int k = 0; k < 8; ++k) *reinterpret_cast<uint4*>(dst + off + k * 512) = x[k];
    }
    for (; off < len; off += 512) *reinterpret_cast<uint4*>(dst + off) = *reinterpret_cast<const uint4*>(src + off);
}

__device__ __forceinline__ void warp_copy(char* dst, const char* src, uint32_t len, uint32_t lane) {
    if (((reinterpret_cast<uint64_t>(dst) | reinterpret_cast<uint64_t>(src) | len) & 15u) == 0) {
        warp_copy16(dst, src, len, lane);
    } else {
        for (uint32_t off = lane * 4; off < len; off += 128)
            *reinterpret_cast<uint32_t*>(dst + off) = *reinterpret_cast<const uint32_t*>(src + off);
    }
}

/// Move one segment between the medium and a PRP target.
__device__ __forceinline__ void move_seg(uint32_t op, uint64_t medium, uint64_t dev, uint32_t len, uint32_t lane) {
    if (op == 1) warp_copy(reinterpret_cast<char*>(dev), reinterpret_cast<const char*>(medium), len, lane);
    else warp_copy(reinterpret_cast<char*>(medium), reinterpret_cast<const char*>(dev), len, lane);
}

/// The rest of a command after its first segment: PRP2 as data pointer or PRP list
/// (with chaining at list-page ends). Returns a status field.
__device__ uint32_t move_rest(const bam_sim_view& v, const region0& r0, uint32_t op, uint64_t medium, uint64_t prp2, uint32_t rest,
                              uint32_t page_shift, uint32_t lane) {
    const uint64_t page = 1ull << page_shift;
    if ((prp2 & 3u) != 0) return nvme::SC_INVALID_PRP_OFFSET;
    if (rest <= page) {
        if ((prp2 & (page - 1)) != 0) return nvme::SC_INVALID_PRP_OFFSET;
        uint64_t dev;
        if (!region_dev(v, r0, prp2, rest, dev)) return nvme::SC_DATA_TRANSFER_ERROR;
        move_seg(op, medium, dev, rest, lane);
        return 0;
    }
    uint64_t list = prp2;
    uint64_t npages = (rest + page - 1) >> page_shift;
    while (npages > 0) {
        const uint64_t in_page = (page - (list & (page - 1))) / 8;  // entries left on this list page
        uint64_t ldev;
        const uint64_t take = npages <= in_page ? npages : in_page - 1;  // last entry chains
        if (!region_dev(v, r0, list, (take + (npages > in_page ? 1 : 0)) * 8, ldev)) return nvme::SC_DATA_TRANSFER_ERROR;
        const uint64_t* entries = reinterpret_cast<const uint64_t*>(ldev);
        // Lanes fetch and check up to 32 entries at a time, then the warp copies them.
        for (uint64_t i0 = 0; i0 < take; i0 += 32) {
            const uint64_t i = i0 + lane;
            uint64_t e = 0, d = 0;
            bool ok = true;
            if (i < take) {
                e = entries[i];
                const uint64_t r = rest > lane * page ? rest - lane * page : 0;
                ok = (e & (page - 1)) == 0 && region_dev(v, r0, e, r < page ? r : page, d);
            }
            const uint32_t bad = __ballot_sync(0xffffffffu, !ok);
            if (bad) return (__shfl_sync(0xffffffffu, e, __ffs(bad) - 1) & (page - 1)) ? nvme::SC_INVALID_PRP_OFFSET
                                                                                       : nvme::SC_DATA_TRANSFER_ERROR;
            const uint64_t cnt = take - i0 < 32 ? take - i0 : 32;
            for (uint32_t k = 0; k < cnt; ++k) {
                const uint64_t dk = shfl_u64(0xffffffffu, d, k);
                const uint32_t len = static_cast<uint32_t>(rest > page ? page : rest);
                move_seg(op, medium, dk, len, lane);
                medium += len;
                rest -= len;
            }
        }
        npages -= take;
        if (npages > 0) {
            const uint64_t next = entries[take];
            if ((next & 7u) != 0) return nvme::SC_INVALID_PRP_OFFSET;
            list = next;
        }
    }
    return 0;
}

// ---- The controller's steps -----------------------------------------------------------
// controller() below is a loop over these. All are inlined: the service loop holds the
// block's whole register file, and a call would save and restore its live values.

/// Lane j's registers for the warp's j-th queue (queue w + j * W): its indices and
/// counters, stored into its bam_sim_queue now and then, and what the poll reads.
struct lane_queue {
    uint32_t sq_head = 0, cq_tail = 0, pend_head = 0, pend_tail = 0;
    // CQ head doorbell value last read (acquire), as an index; starts as "CQ full" so
    // that the first post reads the doorbell.
    uint32_t cq_head_seen = 0;
    queue_counters counters;
    uint32_t* sq_db = nullptr;  // the queue's SQ doorbell
    uint32_t mask = 0;          // its depth - 1
    bool sys = false;           // queue of another GPU: system-scope poll (BAM_SIM_Q_SYSTEM)
};

/// Profile of warp 0 (published with `loops`): SM cycles in the loop, in visits that
/// fetched commands (fetch, validation, data, model), in visits that posted CQEs, and
/// commands fetched. Cheap (clock64 reads); read by SimArray::profile().
struct loop_profile {
    uint64_t start;  // clock64() when the loop began
    uint64_t fetch = 0, post = 0, cmds = 0;
};

/// What the steps read of the block, fixed while the kernel runs.
struct sim_env {
    const bam_sim_ssd* ssds;  // the SSD table (global memory)
    bam_sim_ssd* ssd_tab;     // its first smem_ssds entries, in shared memory
    uint32_t smem_ssds;
    uint4* stage_smem;  // the block's staging area for small commands' data
    region0 r0;
    uint64_t tbase;  // time base of the virtual clocks (globaltimer ns)
};

/// The queue a visit serves, from the warp's shared table (warp-uniform).
struct visit_queue {
    const queue_consts* consts;  // the table's entry (the CQ head doorbell is read from it)
    bool sys;                    // another GPU's queue (SHARED only)
    uint32_t depth, mask, shift;
    bam_sqe* sq;
    bam_cqe* cq;
    bam_sim_pending* pend;
    uint32_t* bitmap;
    uint32_t qid;
    const bam_sim_ssd* ssd;  // its SSD's parameters
};

/// A visit's copy of the queue's indices (warp-uniform, shuffled from the owning lane).
struct visit_indices {
    uint32_t sq_head, cq_tail, pend_head, pend_tail, cq_head_seen;
};

/// A visit's counter deltas, per lane (summed over the warp when the visit closes).
struct visit_counts {
    uint64_t reads = 0, writes = 0, others = 0, read_bytes = 0, write_bytes = 0, errors = 0, bad_doorbells = 0;
};

/// A lane's command of a visit, as fetched and validated.
struct fetched_cmd {
    cmd_info info = {};
    uint32_t cid = 0;
    uint32_t conflict = 0;
    uint32_t lie = 0;  // BAM_SIM_LIE_* of a command in the fault range
    uint64_t cost_ps = 0;
};

/// Checks the block in with the host and returns the virtual clocks' time base, which
/// block 0's thread 0 sets (relaxed: only the value matters; every thread spins on it).
__device__ __forceinline__ uint64_t start_clock(bam_sim_control* ctl) {
    if (threadIdx.x == 0) {
        // Time base of the virtual clocks (ps since base fit in 64 bits for 213 days;
        // absolute globaltimer ns * 1000 would overflow).
        if (blockIdx.x == 0) atomic_dev<uint64_t>(ctl->clock_base).store(globaltimer(), cuda::memory_order_relaxed);
        atomic_dev<uint32_t>(ctl->started).fetch_add(1u, cuda::memory_order_relaxed);
    }
    uint64_t tbase;
    while ((tbase = atomic_dev<uint64_t>(ctl->clock_base).load(cuda::memory_order_relaxed)) == 0) __nanosleep(100);
    return tbase;
}

/// The SSDs' parameters into shared memory (the block's threads together; fixed while
/// the kernel runs, except the fault fields: see take_faults). Plain copies, published
/// to the block by the caller's __syncthreads.
__device__ __forceinline__ void load_ssd_table(const bam_sim_ssd* ssds, bam_sim_ssd* ssd_tab, uint32_t smem_ssds) {
    for (uint32_t i = threadIdx.x; i < smem_ssds * (sizeof(bam_sim_ssd) / 16); i += blockDim.x)
        reinterpret_cast<uint4*>(ssd_tab)[i] = reinterpret_cast<const uint4*>(ssds)[i];
}

/// Region 0 of the view, read once (plain loads: the host wrote it before the launch).
__device__ __forceinline__ region0 load_region0(const bam_sim_view& v) {
    region0 r0;
    if (v.nregions > 0) {
        const bam_sim_region* r = reinterpret_cast<const bam_sim_region*>(v.regions);
        r0.iova = r[0].iova;
        r0.len = r[0].len;
        r0.dev = r[0].dev;
    }
    return r0;
}

/// Lane j's indices and counters of its queue `Q`, as the host (or the previous run of
/// the kernel) left them (plain loads: written before the launch).
__device__ __forceinline__ void load_lane_queue(const bam_sim_queue& Q, lane_queue& lane_state) {
    lane_state.sq_head = Q.sq_head;
    lane_state.cq_tail = Q.cq_tail;
    lane_state.pend_head = Q.pend_head;
    lane_state.pend_tail = Q.pend_tail;
    lane_state.counters.load(Q);
    lane_state.cq_head_seen = (lane_state.cq_tail + 1u) & ((Q.depth & ~BAM_SIM_Q_SYSTEM) - 1u);
}

/// Lane j's queue `Q`: its constants into the warp's part of the shared table (`entry`;
/// published by the caller's __syncthreads), its SQ doorbell, depth mask and scope into
/// the lane's registers for the poll.
template <bool SHARED>
__device__ __forceinline__ void share_queue_consts(const bam_sim_queue& Q, queue_consts& entry,
                                                   lane_queue& lane_state) {
    queue_consts k;
    k.sq = reinterpret_cast<bam_sqe*>(Q.sq);
    k.cq = reinterpret_cast<bam_cqe*>(Q.cq);
    k.pend = reinterpret_cast<bam_sim_pending*>(Q.pending);
    k.bitmap = reinterpret_cast<uint32_t*>(Q.cid_bitmap);
    k.sq_db = reinterpret_cast<uint32_t*>(Q.sq_db);
    k.cq_db = reinterpret_cast<uint32_t*>(Q.cq_db);
    k.depth = Q.depth;  // with BAM_SIM_Q_SYSTEM: the shared table has no room for a flag
    k.qid = Q.qid;
    k.ssd = Q.ssd;
    entry = k;
    lane_state.sq_db = k.sq_db;
    lane_state.mask = (k.depth & ~BAM_SIM_Q_SYSTEM) - 1u;
    lane_state.sys = SHARED && (k.depth & BAM_SIM_Q_SYSTEM) != 0;
}

/// Lane j's registers back into its bam_sim_queue when the kernel stops (plain stores:
/// the host reads them after the kernel's exit, see controller).
__device__ __forceinline__ void store_lane_queue(bam_sim_queue& Q, const lane_queue& lane_state) {
    Q.sq_head = lane_state.sq_head;
    Q.cq_tail = lane_state.cq_tail;
    Q.pend_head = lane_state.pend_head;
    Q.pend_tail = lane_state.pend_tail;
    lane_state.counters.store(Q);
}

/// The control block, every 64th loop (lane 0 reads, the warp gets the answers): stop
/// and stall (relaxed), the fault epoch (acquire: the host wrote the fault fields before
/// it; new fields are copied by take_faults), and for warp `w` 0 the loop count and the
/// profile (relaxed stores). Sets `stalled`; returns whether to stop (warp-uniform).
__device__ __forceinline__ bool take_control(bam_sim_control* ctl, const sim_env& env, uint32_t* seen_epoch,
                                             uint32_t lane, uint32_t w, uint64_t iter, const loop_profile& prof,
                                             bool& stalled) {
    uint32_t stop = 0, stall = 0;
    if (lane == 0) {
        stop = atomic_dev<uint32_t>(ctl->stop).load(cuda::memory_order_relaxed);
        stall = atomic_dev<uint32_t>(ctl->stall).load(cuda::memory_order_relaxed);
        // Acquire: the host wrote the fault fields before the epoch.
        const uint32_t epoch = atomic_dev<uint32_t>(ctl->fault_epoch).load(cuda::memory_order_acquire);
        if (epoch != *seen_epoch) take_faults(ctl, env.ssds, env.ssd_tab, env.smem_ssds, epoch, seen_epoch);
        if (w == 0) {
            atomic_dev<uint64_t>(ctl->loops).store(iter, cuda::memory_order_relaxed);
            atomic_dev<uint64_t>(ctl->prof_cycles).store(clock64() - prof.start, cuda::memory_order_relaxed);
            atomic_dev<uint64_t>(ctl->prof_fetch).store(prof.fetch, cuda::memory_order_relaxed);
            atomic_dev<uint64_t>(ctl->prof_post).store(prof.post, cuda::memory_order_relaxed);
            atomic_dev<uint64_t>(ctl->prof_cmds).store(prof.cmds, cuda::memory_order_relaxed);
        }
    }
    stop = __shfl_sync(0xffffffffu, stop, 0);
    stalled = __shfl_sync(0xffffffffu, stall, 0) != 0;
    return stop != 0;
}

/// Poll: lane j (`owns`: it has a queue) reads queue j's SQ doorbell into `db_lane` (all
/// of the warp's queues in one round trip); returns whether the queue has a new tail or
/// completions still pending, for a visit.
/// Acquire: pairs with the submitters' release (fence + doorbell RMW), so the visit
/// reads the SQEs without another round trip (an acquire re-read of the doorbell when it
/// shows work cost one on every command's path). It empties L1, which the service loop
/// does not use (its constants are in shared memory).
__device__ __forceinline__ bool poll_sq_doorbell(const lane_queue& lane_state, bool owns, uint32_t& db_lane) {
    bool has_work = false;
    if (owns) {
        // Another GPU's queue: its submitters release at system scope (BAM_QP_F_MMIO),
        // so the acquire that pairs with them is system scope too.
        db_lane = lane_state.sys ? atomic_sys<uint32_t>(*lane_state.sq_db).load(cuda::memory_order_acquire)
                         : atomic_dev<uint32_t>(*lane_state.sq_db).load(cuda::memory_order_acquire);
        has_work = db_lane != (lane_state.sq_head & lane_state.mask) || lane_state.pend_head != lane_state.pend_tail;
    }
    return has_work;
}

/// The queue whose shared table entry is `entry`, as a visit uses it (loads from shared
/// memory; `sys` folds to false in the single-GPU instantiation).
template <bool SHARED>
__device__ __forceinline__ visit_queue open_queue(const queue_consts& entry, const sim_env& env) {
    visit_queue q;
    q.consts = &entry;
    q.sys = SHARED && (entry.depth & BAM_SIM_Q_SYSTEM) != 0;  // warp-uniform
    q.depth = entry.depth & ~BAM_SIM_Q_SYSTEM;
    q.mask = q.depth - 1;
    q.shift = __ffs(q.depth) - 1;
    q.sq = entry.sq;
    q.cq = entry.cq;
    q.pend = entry.pend;
    q.bitmap = entry.bitmap;
    const uint32_t ssd_i = entry.ssd;
    q.qid = entry.qid;
    q.ssd = ssd_i < env.smem_ssds ? &env.ssd_tab[ssd_i] : &env.ssds[ssd_i];
    return q;
}

/// How many new SQEs a visit fetches: those up to the doorbell value `db`, at most 32
/// and what the pending FIFO has room for. A `db` that is no index of the queue fetches
/// none and counts a bad doorbell.
__device__ __forceinline__ uint32_t fetch_count(uint32_t db, const visit_queue& q, const visit_indices& idx,
                                                visit_counts& deltas) {
    uint32_t n = 0;
    if (db > q.mask) {
        deltas.bad_doorbells = 1;  // invalid doorbell write: ignored (a real controller raises an AER)
    } else {
        const uint32_t avail = (db - idx.sq_head) & q.mask;
        const uint32_t pend_room = q.depth - (idx.pend_tail - idx.pend_head);
        n = avail < 32 ? avail : 32;
        if (n > pend_room) n = pend_room;
    }
    return n;
}

/// Validates read or write SQE `e` (opcode `opc`) against SSD `ssd` like a strict
/// controller: namespace, LBA range, MDTS, PRP1's offset and region; fills `cmd.info`
/// (op, sizes, medium address, first segment, PRP2, status), the fault range's status and
/// lie, and the device model's cost. Plain loads of the SQE (in registers already) and of
/// the SSD's parameters.
__device__ __forceinline__ void validate_rw(const bam_sim_view& v, const region0& r0, const bam_sqe& e, uint32_t opc,
                                            const bam_sim_ssd& ssd, fetched_cmd& cmd) {
    cmd_info& info = cmd.info;
    info.op = opc == nvme::OP_READ ? 1 : 2;
    const uint64_t slba = (static_cast<uint64_t>(e.cdw11) << 32) | e.cdw10;
    const uint32_t nlb = (e.cdw12 & 0xffffu) + 1u;
    const uint32_t lba_shift = ssd.lba_shift;
    const uint32_t page_shift = ssd.page_shift;
    const uint64_t bytes = static_cast<uint64_t>(nlb) << lba_shift;
    const uint32_t mdts = ssd.mdts_bytes;
    const uint64_t page = 1ull << page_shift;
    info.bytes = static_cast<uint32_t>(bytes);
    if (e.nsid != ssd.nsid) {
        info.status = nvme::SC_INVALID_NAMESPACE;
    } else if (slba >= ssd.nlb || nlb > ssd.nlb - slba) {
        info.status = nvme::SC_LBA_OUT_OF_RANGE;
    } else if (mdts != 0 && bytes > mdts) {
        info.status = nvme::SC_INVALID_FIELD;
    } else if ((e.prp1 & 3u) != 0) {
        info.status = nvme::SC_INVALID_PRP_OFFSET;
    } else {
        info.medium = ssd.medium + (slba << lba_shift);
        const uint64_t first = page - (e.prp1 & (page - 1));
        info.len1 = static_cast<uint32_t>(bytes < first ? bytes : first);
        info.prp2 = e.prp2;
        if (!region_dev(v, r0, e.prp1, info.len1, info.dev1)) info.status = nvme::SC_DATA_TRANSFER_ERROR;
        const uint64_t fault_lba = ssd.fault_lba, fault_nlb = ssd.fault_nlb;
        if (info.status == 0 && fault_nlb != 0 && slba < fault_lba + fault_nlb && fault_lba < slba + nlb) {
            info.status = ssd.fault_status;
            cmd.lie = ssd.flags & BAM_SIM_LIE_MASK;
        }
        const uint64_t per_cmd = info.op == 1 ? ssd.ps_per_read_cmd : ssd.ps_per_write_cmd;
        const uint64_t per_byte = info.op == 1 ? ssd.ps_per_read_byte : ssd.ps_per_write_byte;
        cmd.cost_ps = per_cmd > per_byte * bytes ? per_cmd : per_byte * bytes;
    }
}

/// Lane `lane` (< the visit's count) fetches the SQE at sq_head + lane and validates it
/// (validate_rw; flush: namespace only; anything else: invalid). Plain loads of the SQE:
/// the poll's acquire and the caller's __syncwarp ordered them after the submitter's
/// release. The CID bitmap's atomicOr (relaxed) catches a CID reused while in flight
/// (Command ID Conflict); its round trip overlaps the validation.
__device__ __forceinline__ void read_command(const bam_sim_view& v, const region0& r0, const visit_queue& q,
                                             uint32_t sq_head, uint32_t lane, fetched_cmd& cmd) {
    const bam_sim_ssd& ssd = *q.ssd;
    const uint4* src = reinterpret_cast<const uint4*>(q.sq + ((sq_head + lane) & q.mask));
    bam_sqe e;
    uint4* ev = reinterpret_cast<uint4*>(&e);
#pragma unroll
    for (int k = 0; k < 4; ++k) ev[k] = src[k];
    const uint32_t opc = e.cdw0 & 0xffu;
    cmd.cid = e.cdw0 >> 16;
    // CID reuse while in flight -> Command ID Conflict. The atomic's round
    // trip overlaps the validation below; its result is applied after it.
    const uint32_t bit = 1u << (cmd.cid & 31u);
    const uint32_t old = atomicOr(&q.bitmap[cmd.cid >> 5], bit);
    if ((e.cdw0 & 0x0000ff00u) != 0) {
        cmd.info.status = nvme::SC_INVALID_FIELD;  // fused ops, SGLs: not supported
    } else if (opc == nvme::OP_FLUSH) {
        cmd.info.op = 3;
        if (e.nsid != ssd.nsid && e.nsid != 0xffffffffu) cmd.info.status = nvme::SC_INVALID_NAMESPACE;
    } else if (opc == nvme::OP_READ || opc == nvme::OP_WRITE) {
        validate_rw(v, r0, e, opc, ssd, cmd);
    } else {
        cmd.info.status = nvme::SC_INVALID_OPCODE;
    }
    if (old & bit) {
        cmd.info = cmd_info{};
        cmd.info.status = nvme::SC_CID_CONFLICT;
        cmd.cost_ps = 0;
        cmd.conflict = 1;
        cmd.lie = 0;
    }
}

/// What move_small needs of lane `k`'s command `info` (every lane calls: shuffles).
struct small_cmd {
    uint32_t op;
    uint64_t medium, dev1;
    uint32_t len;
};
__device__ __forceinline__ small_cmd small_cmd_of(const cmd_info& info, int k) {
    small_cmd m;
    m.op = __shfl_sync(0xffffffffu, info.op, k);
    m.medium = shfl_u64(0xffffffffu, info.medium, k);
    m.dev1 = shfl_u64(0xffffffffu, info.dev1, k);
    m.len = __shfl_sync(0xffffffffu, info.len1, k);
    return m;
}

/// Moves the data of the small commands (one segment of <= 512 aligned bytes) among the
/// lanes' `info` (lanes < n), SMALL_BATCH at a time, each lane moving 16 bytes of each,
/// so that SMALL_BATCH loads are in flight per lane. Returns the mask of those lanes.
/// Ordering: each lane's cp.async copies are complete and visible to it after
/// cp_async_wait_all; it then stores the same 16-byte pieces it copied (no other lane's).
__device__ __forceinline__ uint32_t move_small(const cmd_info& info, uint32_t n, uint4* stage_smem, uint32_t lane) {
    const bool small = lane < n && info.status == 0 && (info.op == 1 || info.op == 2) && info.bytes == info.len1 &&
                       info.len1 <= 512 && ((info.medium | info.dev1 | info.len1) & 15u) == 0;
    const uint32_t small_mask = __ballot_sync(0xffffffffu, small);
    // Each round: every lane starts one 16-byte cp.async (global -> this warp's
    // shared staging area) per command, SMALL_BATCH commands, waits for its own
    // copies, then stores its 16-byte pieces to the destinations. No data sits
    // in registers, so a whole round is in flight at once.
    uint4* stage = stage_smem + (threadIdx.x / 32) * (SMALL_BATCH * 32);
    for (uint32_t rem = small_mask; rem != 0;) {
        const uint32_t round_first = rem;
        for (int u = 0; u < SMALL_BATCH && rem != 0; ++u) {
            const int k = __ffs(rem) - 1;
            rem &= rem - 1;
            const small_cmd m = small_cmd_of(info, k);
            if (lane * 16 < m.len) cp_async16(stage + u * 32 + lane, (m.op == 1 ? m.medium : m.dev1) + lane * 16);
        }
        cp_async_wait_all();
        uint32_t again = round_first;
        for (int u = 0; u < SMALL_BATCH && again != rem; ++u) {
            const int k = __ffs(again) - 1;
            again &= again - 1;
            const small_cmd m = small_cmd_of(info, k);
            if (lane * 16 < m.len)
                *reinterpret_cast<uint4*>((m.op == 1 ? m.dev1 : m.medium) + lane * 16) = stage[u * 32 + lane];
        }
    }
    return small_mask;
}

/// Moves the data of the other valid reads and writes among the lanes' `info` (lanes < n,
/// not in `small_mask`), one command at a time by the whole warp: the first segment,
/// then the rest through PRP2 or its PRP list (move_rest, whose status lands in the
/// command's lane). Plain loads and stores; the visit's __syncwarp before the CQE
/// posts orders them among the lanes.
__device__ __forceinline__ void move_large(const bam_sim_view& v, const region0& r0, cmd_info& info, uint32_t n,
                                           uint32_t small_mask, const bam_sim_ssd& ssd, uint32_t lane) {
    for (uint32_t k = 0; k < n; ++k) {
        const uint32_t op = __shfl_sync(0xffffffffu, info.op, k);
        uint32_t st = __shfl_sync(0xffffffffu, info.status, k);
        if (st != 0 || op == 0 || op == 3 || ((small_mask >> k) & 1u)) continue;
        const uint64_t med = shfl_u64(0xffffffffu, info.medium, k);
        const uint64_t dev1 = shfl_u64(0xffffffffu, info.dev1, k);
        const uint32_t len1 = __shfl_sync(0xffffffffu, info.len1, k);
        const uint32_t bytes = __shfl_sync(0xffffffffu, info.bytes, k);
        move_seg(op, med, dev1, len1, lane);
        if (bytes > len1) {
            const uint64_t prp2 = shfl_u64(0xffffffffu, info.prp2, k);
            st = move_rest(v, r0, op, med + len1, prp2, bytes - len1, ssd.page_shift, lane);
            if (lane == k) info.status = st;
        }
    }
}

/// Device model: when each lane's command (lanes < n) is due, in globaltimer ns. The
/// commands' costs run one after another on the SSD's virtual clock (ps since `tbase`),
/// which never lags the present; their latency comes on top. The clock's atomics are
/// relaxed: it orders no data, only times.
__device__ __forceinline__ uint64_t due_time(const fetched_cmd& cmd, const bam_sim_ssd& ssd, uint32_t n, uint64_t tbase,
                                             uint32_t lane) {
    const uint64_t now = globaltimer();
    uint64_t due = now;
    const uint64_t lat = cmd.info.op == 2 ? ssd.lat_write_ns : ssd.lat_read_ns;
    // Inclusive prefix sum of the costs over lanes < n (skipped when no command
    // costs anything, as with the `ideal` model). Shuffled up by `d`, not from lane
    // lane - d: inlined into the service loop, the source lanes of an indexed shuffle
    // were hoisted out of it and held in registers that the loop spilled.
    uint64_t pre = lane < n ? cmd.cost_ps : 0;
    uint64_t total = 0;
    if (__any_sync(0xffffffffu, pre != 0)) {
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const uint64_t o = shfl_up_u64(0xffffffffu, pre, d);
            if (lane >= static_cast<uint32_t>(d)) pre += o;
        }
        total = shfl_u64(0xffffffffu, pre, 31);
    }
    if (total != 0) {
        uint64_t start = 0;
        if (lane == 0) {
            atomic_dev<uint64_t> vc(*reinterpret_cast<uint64_t*>(ssd.vclock));
            vc.fetch_max((now - tbase) * 1000ull, cuda::memory_order_relaxed);
            start = vc.fetch_add(total, cuda::memory_order_relaxed);
        }
        start = shfl_u64(0xffffffffu, start, 0);
        due = tbase + (start + pre) / 1000ull;
    }
    due += lat;
    return due;
}

/// Lane `lane` (< n) counts its command and queues its completion, due at `due` (later
/// by the SSD's lie_ns when it is to be withheld), in the pending FIFO at pend_tail +
/// lane; `fresh` keeps a copy for a post in the same visit. Plain stores: the FIFO is
/// the warp's own, and the caller's __syncwarp orders them before other lanes' loads.
__device__ __forceinline__ void queue_pending(const fetched_cmd& cmd, uint64_t due, const bam_sim_ssd& ssd,
                                              const visit_queue& q, uint32_t pend_tail, uint32_t lane,
                                              visit_counts& deltas, bam_sim_pending& fresh) {
    const cmd_info& info = cmd.info;
    if (info.status != 0) ++deltas.errors;
    if (info.op == 1) {
        ++deltas.reads;
        deltas.read_bytes += info.status == 0 ? info.bytes : 0;
    } else if (info.op == 2) {
        ++deltas.writes;
        deltas.write_bytes += info.status == 0 ? info.bytes : 0;
    } else {
        ++deltas.others;
    }
    bam_sim_pending entry;
    entry.due_ns = cmd.lie == BAM_SIM_LIE_WITHHOLD ? due + ssd.lie_ns : due;
    entry.cid = static_cast<uint16_t>(cmd.cid);
    entry.status = static_cast<uint16_t>(info.status);
    entry.flags = cmd.conflict | (cmd.lie << 8);
    q.pend[(pend_tail + lane) & q.mask] = entry;
    fresh = entry;
}

/// Step 2 of a visit: fetches the `n` (> 0) new SQEs, validates them, moves their data
/// and queues their completions with the time the device model says they are due
/// (`fresh`: this lane's, for a post in the same visit); advances the visit's SQ head
/// and pending tail.
/// Ordering: a __syncwarp between the poll's acquire and the SQE loads (below), and
/// one after the data moves and FIFO stores, before the visit's post.
__device__ __forceinline__ void fetch_commands(const bam_sim_view& v, const sim_env& env, const visit_queue& q,
                                               visit_indices& idx, uint32_t n, uint32_t lane, visit_counts& deltas,
                                               bam_sim_pending& fresh, loop_profile& prof) {
    const bam_sim_ssd& ssd = *q.ssd;
    // Lane j's acquire in the poll, then this barrier (memory ordering among
    // the warp's lanes), then every lane's SQE loads: each lane sees the SQEs
    // the doorbell value it read released.
    __syncwarp();
    const uint64_t pc0 = clock64();
    fetched_cmd cmd;
    if (lane < n) read_command(v, env.r0, q, idx.sq_head, lane, cmd);
    // Data movement. Small commands (one segment of <= 512 aligned bytes) go
    // SMALL_BATCH at a time, each lane moving 16 bytes of each, so that
    // SMALL_BATCH loads are in flight per lane; the others one command at a
    // time by the warp.
    const uint32_t small_mask = move_small(cmd.info, n, env.stage_smem, lane);
    move_large(v, env.r0, cmd.info, n, small_mask, ssd, lane);
    const uint64_t due = due_time(cmd, ssd, n, env.tbase, lane);
    if (lane < n) queue_pending(cmd, due, ssd, q, idx.pend_tail, lane, deltas, fresh);
    idx.sq_head += n;
    idx.pend_tail += n;
    __syncwarp();
    prof.fetch += clock64() - pc0;
    prof.cmds += n;
}

/// Free CQ entries for up to `m` completions: from the CQ head last read, or, when that
/// leaves fewer than `m`, from the CQ head doorbell read again (acquire; see below).
/// A doorbell value that is no index of the queue leaves no room.
__device__ __forceinline__ uint32_t cq_room(const visit_queue& q, visit_indices& idx, uint32_t m) {
    uint32_t room = q.depth - 1u - ((idx.cq_tail - idx.cq_head_seen) & q.mask);
    if (m > room) {
        // Read the CQ head doorbell again, with acquire (every lane: each
        // writes CQ slots): the host's reads of the slots it gave back happen
        // before our stores into them. Between reads the last value stands.
        const uint32_t cq_head = q.sys ? atomic_sys<uint32_t>(*q.consts->cq_db).load(cuda::memory_order_acquire)
                                   : atomic_dev<uint32_t>(*q.consts->cq_db).load(cuda::memory_order_acquire);
        if (cq_head <= q.mask) idx.cq_head_seen = cq_head;
        room = cq_head > q.mask ? 0u : q.depth - 1u - ((idx.cq_tail - idx.cq_head_seen) & q.mask);
    }
    return room;
}

/// Step 1 of a visit: posts the due completions at the head of the pending FIFO, in
/// order, while the CQ has room (`fresh`: the FIFO's entries when the visit found it
/// empty and fetched them, still in registers). Each posted command's CID is freed in
/// the bitmap (relaxed) before its CQE can be seen.
/// Ordering: a __syncwarp orders every lane's data stores and CQE DW0-2 before the DW3
/// stores with release (system scope for another GPU's queue) in post_cqe / post_lying.
__device__ __forceinline__ void post_completions(const visit_queue& q, visit_indices& idx, uint32_t pend_was_empty,
                                                 const bam_sim_pending& fresh, uint32_t lane, bool& progress,
                                                 loop_profile& prof) {
    const uint64_t pc0 = clock64();
    uint32_t m = idx.pend_tail - idx.pend_head;
    if (m > 32) m = 32;
    const uint32_t room = cq_room(q, idx, m);
    if (m > room) m = room;
    const uint64_t now = globaltimer();
    bam_sim_pending entry = {};
    bool ready = false;
    if (lane < m) {
        // Fetched in this visit into an empty FIFO: still in registers.
        entry = pend_was_empty ? fresh : q.pend[(idx.pend_head + lane) & q.mask];
        ready = entry.due_ns <= now;
    }
    const uint32_t cnt = contiguous_ready(0xffffffffu, __ballot_sync(0xffffffffu, ready));
    const uint32_t k = cnt < m ? cnt : m;
    if (k > 0) {
        progress = true;
        if (lane < k && (entry.flags & 1u) == 0) {
            // Free the CID before the CQE can be seen: the host may reuse it then.
            atomicAnd(&q.bitmap[entry.cid >> 5], ~(1u << (entry.cid & 31u)));
        }
        const uint32_t sqhd = idx.sq_head & q.mask;
        __syncwarp();  // data stores of all lanes ordered before the release below
        if (__ballot_sync(0xffffffffu, lane < k && (entry.flags >> 8) != 0) != 0) {
            // A lying controller (SimArray::set_fault with a Lie): out of line.
            idx.cq_tail = post_lying(q.cq, q.mask, q.shift, idx.cq_tail, k, sqhd, q.qid, q.sys, entry, room - k,
                                    q.bitmap + 2048);
        } else {
            // Another GPU's reader: post_cqe releases at system scope (the data
            // and DW0-2, ordered by the __syncwarp above, go with it).
            if (lane < k) {
                const uint32_t dw3 = static_cast<uint32_t>(entry.cid) | (static_cast<uint32_t>(entry.status) << 17);
                post_cqe(q.cq, q.mask, q.shift, idx.cq_tail + lane, dw3, sqhd, q.qid, q.sys, 0);
            }
            idx.cq_tail += k;
        }
        idx.pend_head += k;
    }
    prof.post += clock64() - pc0;
}

/// Folds a visit's changes back into the registers of lane `j`, the queue's owner: the
/// indices, and the counter deltas summed over the warp (warp reductions; registers
/// only, no memory access).
__device__ __forceinline__ void close_visit(uint32_t j, uint32_t lane, const visit_indices& idx, visit_counts& deltas,
                                            lane_queue& lane_state) {
    deltas.reads = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(deltas.reads));
    deltas.writes = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(deltas.writes));
    deltas.others = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(deltas.others));
    deltas.errors = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(deltas.errors));
    const uint64_t read_bytes = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(deltas.read_bytes));
    const uint64_t write_bytes = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(deltas.write_bytes));
    if (lane == j) {
        lane_state.sq_head = idx.sq_head;
        lane_state.cq_tail = idx.cq_tail;
        lane_state.pend_head = idx.pend_head;
        lane_state.pend_tail = idx.pend_tail;
        lane_state.cq_head_seen = idx.cq_head_seen;
        lane_state.counters.reads += deltas.reads;
        lane_state.counters.writes += deltas.writes;
        lane_state.counters.others += deltas.others;
        lane_state.counters.errors += deltas.errors;
        lane_state.counters.read_bytes += read_bytes;
        lane_state.counters.write_bytes += write_bytes;
        lane_state.counters.bad_doorbells += deltas.bad_doorbells;
    }
}

/// A visit of the warp's j-th queue (every lane; `entry`: its shared table entry,
/// `db_lane`: the SQ doorbell values the lanes polled): fetch new SQEs (step 2, as the
/// file's header numbers them), then post due completions (step 1: a command due at
/// once, fetched into an empty FIFO, is posted in the same visit from registers), then
/// fold the changes into lane j's registers. Sets `progress` when it did either.
template <bool SHARED>
__device__ __forceinline__ void visit(const bam_sim_view& v, const sim_env& env, const queue_consts& entry, uint32_t j,
                                      uint32_t lane, uint32_t db_lane, lane_queue& lane_state, bool& progress,
                                      loop_profile& prof) {
    const visit_queue q = open_queue<SHARED>(entry, env);
    visit_indices idx;
    idx.sq_head = __shfl_sync(0xffffffffu, lane_state.sq_head, j);
    idx.cq_tail = __shfl_sync(0xffffffffu, lane_state.cq_tail, j);
    idx.pend_head = __shfl_sync(0xffffffffu, lane_state.pend_head, j);
    idx.pend_tail = __shfl_sync(0xffffffffu, lane_state.pend_tail, j);
    idx.cq_head_seen = __shfl_sync(0xffffffffu, lane_state.cq_head_seen, j);
    const uint32_t pend_was_empty = idx.pend_head == idx.pend_tail;
    visit_counts deltas;

    // ---- 2. fetch new SQEs -------------------------------------------------------
    const uint32_t db = __shfl_sync(0xffffffffu, db_lane, j);
    bam_sim_pending fresh = {};  // this lane's command fetched in this visit
    const uint32_t n = fetch_count(db, q, idx, deltas);
    if (n > 0) {
        progress = true;
        fetch_commands(v, env, q, idx, n, lane, deltas, fresh, prof);
    }

    // ---- 1. post due completions ------------------------------------------------
    if (idx.pend_tail != idx.pend_head) post_completions(q, idx, pend_was_empty, fresh, lane, progress, prof);
    // Fold this visit's changes back into lane j's registers.
    close_visit(j, lane, idx, deltas, lane_state);
}

}  // namespace

/// The controller kernel's body. SHARED: some queues are another GPU's (BAM_SIM_Q_SYSTEM),
/// polled, acquired and released at system scope; the single-GPU instantiation has no
/// such branch in its loop (the branches on a warp-uniform flag make the CQE post slower
/// and cost the 512 B IOPS measurably).
/// Ordering: a __syncthreads publishes the block's shared tables before the loop; each
/// visit orders its own accesses (fetch_commands, post_completions); at the end the
/// lanes' stores of their queues' state precede, through a __syncthreads, thread 0's
/// release increment of `exited`.
template <bool SHARED>
__device__ __forceinline__ void controller(bam_sim_view v) {
    // The block owns its SM: with 128 registers per thread a 512-thread block takes the
    // whole register file (the host checks; otherwise it also asks for all shared memory).
    // Dynamic shared memory: staging for small commands' data (BAM_SIM_STAGE_BYTES), then
    // the queue constants of each warp, then the SSDs' parameters (abi.h).
    extern __shared__ uint4 stage_smem[];
    queue_consts* const qtab = reinterpret_cast<queue_consts*>(reinterpret_cast<char*>(stage_smem) + BAM_SIM_STAGE_BYTES);
    bam_sim_ssd* const ssd_tab = reinterpret_cast<bam_sim_ssd*>(qtab + SIM_WARPS * 32);
    bam_sim_control* ctl = reinterpret_cast<bam_sim_control*>(v.control);
    const uint64_t tbase = start_clock(ctl);
    const uint32_t lane = lane_id();
    const uint32_t warps_per_block = blockDim.x / 32;
    const uint32_t nwarps = gridDim.x * warps_per_block;
    const uint32_t w = blockIdx.x * warps_per_block + threadIdx.x / 32;
    bam_sim_queue* queues = reinterpret_cast<bam_sim_queue*>(v.queues);
    const bam_sim_ssd* ssds = reinterpret_cast<const bam_sim_ssd*>(v.ssds);
    const uint32_t smem_ssds = v.nssd < SMEM_SSDS ? v.nssd : SMEM_SSDS;
    load_ssd_table(ssds, ssd_tab, smem_ssds);
    const sim_env env{ssds, ssd_tab, smem_ssds, stage_smem, load_region0(v), tbase};
    // Queues of this warp (<= 32); lane j: state of queue w + j * nwarps.
    const uint32_t my_queues = w < v.nqueues ? (v.nqueues - w + nwarps - 1) / nwarps : 0;
    lane_queue lane_state;
    if (lane < my_queues) load_lane_queue(queues[w + lane * nwarps], lane_state);
    // Lane j: queue j's SQ doorbell and depth mask, for the poll, and the queue's
    // constants in this warp's part of the shared table.
    queue_consts* const my_qtab = qtab + (threadIdx.x / 32) * 32;
    if (lane < my_queues) share_queue_consts<SHARED>(queues[w + lane * nwarps], my_qtab[lane], lane_state);
    __syncthreads();  // the tables are written

    bool stalled = false;
    // The fault epoch whose fields this warp has copied, in shared memory rather than in
    // a register of the service loop (start() zeroes the control block; the copy above
    // holds the table's fields as they were at launch).
    __shared__ uint32_t fault_epochs[SIM_WARPS];
    uint32_t* const seen_epoch = &fault_epochs[threadIdx.x / 32];
    if (lane == 0) *seen_epoch = 0;
    loop_profile prof{static_cast<uint64_t>(clock64())};
    for (uint64_t iter = 0;; ++iter) {
        if ((iter & 63u) == 0 && take_control(ctl, env, seen_epoch, lane, w, iter, prof, stalled)) break;
        if (stalled || my_queues == 0) {
            __nanosleep(1000);
            continue;
        }
        uint32_t db_lane = 0;
        const bool has_work = poll_sq_doorbell(lane_state, lane < my_queues, db_lane);
        bool progress = false;
        for (uint32_t work = __ballot_sync(0xffffffffu, has_work); work != 0; work &= work - 1) {
            const uint32_t j = __ffs(work) - 1;
            visit<SHARED>(v, env, my_qtab[j], j, lane, db_lane, lane_state, progress, prof);
        }
        // Publish counters now and then so that the host can read them while running.
        if ((iter & 1023u) == 0 && lane < my_queues) lane_state.counters.store(queues[w + lane * nwarps]);
        if (!progress) __nanosleep(64);
    }
    if (lane < my_queues) store_lane_queue(queues[w + lane * nwarps], lane_state);
    __syncthreads();
    if (threadIdx.x == 0) atomic_dev<uint32_t>(ctl->exited).fetch_add(1u, cuda::memory_order_release);
}

/// The controller of a simulated array whose queues are all this GPU's.
extern "C" __global__ void __launch_bounds__(SIM_THREADS, 1) bam_sim_controller(bam_sim_view v) {
    controller<false>(v);
}

/// The controller of an array shared by several GPUs (the others' queues flagged
/// BAM_SIM_Q_SYSTEM).
extern "C" __global__ void __launch_bounds__(SIM_THREADS, 1) bam_sim_controller_shared(bam_sim_view v) {
    controller<true>(v);
}
