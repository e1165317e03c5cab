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

/// A lying controller's post of the `k` due completions in the lanes' `pe` (every lane of
/// the warp calls; lane 0 posts, in order, after the caller's __syncwarp): each command
/// whose pe.flags carry a BAM_SIM_LIE_* gets its lie (sim_abi.h), extra CQEs only while
/// `spare` CQ entries are free. `lie_state`: the queue's memory of the last lie's CQE
/// (BAM_SIM_LIE_STALE; bit 16 marks it valid). Returns the new CQ tail. Out of line: the
/// service loop pays one ballot for it.
__device__ __noinline__ uint32_t post_lying(bam_cqe* cq, uint32_t mask, uint32_t shift, uint32_t qct, uint32_t k,
                                            uint32_t sqhd, uint32_t qid, bool sys, bam_sim_pending pe, uint32_t spare,
                                            uint32_t* lie_state) {
    constexpr uint32_t ALL = 0xffffffffu, NONE = 0xffffffffu;
    const uint32_t depth = mask + 1u;
    for (uint32_t i = 0; i < k; ++i) {
        const uint32_t cid = __shfl_sync(ALL, static_cast<uint32_t>(pe.cid), i);
        const uint32_t dw3 = cid | (static_cast<uint32_t>(__shfl_sync(ALL, static_cast<uint32_t>(pe.status), i)) << 17);
        const uint32_t lie = (__shfl_sync(ALL, pe.flags, i) >> 8) & BAM_SIM_LIE_MASK;
        const uint32_t other = __shfl_sync(ALL, static_cast<uint32_t>(pe.cid), i + 1u < k ? i + 1u : (i > 0 ? i - 1u : i));
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
        post_cqe(cq, mask, shift, qct++, d, hd, qid, sys, flip);
        if (lie == BAM_SIM_LIE_FLOOD) {
            for (uint32_t f = 0; f < depth; ++f) post_cqe(cq, mask, shift, qct++, dw3, sqhd, qid, sys, 0);
        }
        if (extra != NONE && spare > 0) {
            post_cqe(cq, mask, shift, qct++, extra, sqhd, qid, sys, 0);
            --spare;
        }
    }
    return __shfl_sync(ALL, qct, 0);
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

}  // namespace

/// The controller kernel's body. SHARED: some queues are another GPU's (BAM_SIM_Q_SYSTEM),
/// polled, acquired and released at system scope; the single-GPU instantiation has no
/// such branch in its loop (the branches on a warp-uniform flag make the CQE post slower
/// and cost the 512 B IOPS measurably).
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
    if (threadIdx.x == 0) {
        // Time base of the virtual clocks (ps since base fit in 64 bits for 213 days;
        // absolute globaltimer ns * 1000 would overflow).
        if (blockIdx.x == 0) atomic_dev<uint64_t>(ctl->clock_base).store(globaltimer(), cuda::memory_order_relaxed);
        atomic_dev<uint32_t>(ctl->started).fetch_add(1u, cuda::memory_order_relaxed);
    }
    uint64_t tbase;
    while ((tbase = atomic_dev<uint64_t>(ctl->clock_base).load(cuda::memory_order_relaxed)) == 0) __nanosleep(100);
    const uint32_t lane = lane_id();
    const uint32_t warps_per_block = blockDim.x / 32;
    const uint32_t W = gridDim.x * warps_per_block;
    const uint32_t w = blockIdx.x * warps_per_block + threadIdx.x / 32;
    bam_sim_queue* queues = reinterpret_cast<bam_sim_queue*>(v.queues);
    const bam_sim_ssd* ssds = reinterpret_cast<const bam_sim_ssd*>(v.ssds);
    // The SSDs' parameters into shared memory (fixed while the kernel runs, except the
    // fault fields: see take_faults).
    const uint32_t smem_ssds = v.nssd < SMEM_SSDS ? v.nssd : SMEM_SSDS;
    for (uint32_t i = threadIdx.x; i < smem_ssds * (sizeof(bam_sim_ssd) / 16); i += blockDim.x)
        reinterpret_cast<uint4*>(ssd_tab)[i] = reinterpret_cast<const uint4*>(ssds)[i];
    region0 r0;
    if (v.nregions > 0) {
        const bam_sim_region* r = reinterpret_cast<const bam_sim_region*>(v.regions);
        r0.iova = r[0].iova;
        r0.len = r[0].len;
        r0.dev = r[0].dev;
    }
    const uint32_t myq = w < v.nqueues ? (v.nqueues - w + W - 1) / W : 0;  // queues of this warp (<= 32)

    // Lane j: state of queue w + j * W.
    uint32_t sq_head = 0, cq_tail = 0, pend_head = 0, pend_tail = 0;
    // CQ head doorbell value last read (acquire), as an index; starts as "CQ full" so
    // that the first post reads the doorbell.
    uint32_t cq_head_seen = 0;
    queue_counters counters;
    if (lane < myq) {
        const bam_sim_queue& Q = queues[w + lane * W];
        sq_head = Q.sq_head;
        cq_tail = Q.cq_tail;
        pend_head = Q.pend_head;
        pend_tail = Q.pend_tail;
        counters.load(Q);
        cq_head_seen = (cq_tail + 1u) & ((Q.depth & ~BAM_SIM_Q_SYSTEM) - 1u);
    }

    // Lane j: queue j's SQ doorbell and depth mask, for the poll, and the queue's
    // constants in this warp's part of the shared table.
    queue_consts* const my_qtab = qtab + (threadIdx.x / 32) * 32;
    uint32_t* my_sq_db = nullptr;
    uint32_t my_mask = 0;
    bool my_sys = false;  // queue of another GPU: system-scope poll (BAM_SIM_Q_SYSTEM)
    if (lane < myq) {
        const bam_sim_queue& Q = queues[w + lane * W];
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
        my_qtab[lane] = k;
        my_sq_db = k.sq_db;
        my_mask = (k.depth & ~BAM_SIM_Q_SYSTEM) - 1u;
        my_sys = SHARED && (k.depth & BAM_SIM_Q_SYSTEM) != 0;
    }
    __syncthreads();  // the tables are written

    uint64_t iter = 0;
    bool stalled = false;
    // The fault epoch whose fields this warp has copied, in shared memory rather than in
    // a register of the service loop (start() zeroes the control block; the copy above
    // holds the table's fields as they were at launch).
    __shared__ uint32_t fault_epochs[SIM_WARPS];
    uint32_t* const seen_epoch = &fault_epochs[threadIdx.x / 32];
    if (lane == 0) *seen_epoch = 0;
    // Profile of warp 0 (published with `loops`): SM cycles in the loop, in visits that
    // fetched commands (fetch, validation, data, model), in visits that posted CQEs, and
    // commands fetched. Cheap (clock64 reads); read by SimArray::profile().
    const uint64_t prof_c0 = clock64();
    uint64_t prof_fetch = 0, prof_post = 0, prof_cmds = 0;
    for (;; ++iter) {
        if ((iter & 63u) == 0) {
            uint32_t stop = 0, stall = 0;
            if (lane == 0) {
                stop = atomic_dev<uint32_t>(ctl->stop).load(cuda::memory_order_relaxed);
                stall = atomic_dev<uint32_t>(ctl->stall).load(cuda::memory_order_relaxed);
                // Acquire: the host wrote the fault fields before the epoch.
                const uint32_t epoch = atomic_dev<uint32_t>(ctl->fault_epoch).load(cuda::memory_order_acquire);
                if (epoch != *seen_epoch) take_faults(ctl, ssds, ssd_tab, smem_ssds, epoch, seen_epoch);
                if (w == 0) {
                    atomic_dev<uint64_t>(ctl->loops).store(iter, cuda::memory_order_relaxed);
                    atomic_dev<uint64_t>(ctl->prof_cycles).store(clock64() - prof_c0, cuda::memory_order_relaxed);
                    atomic_dev<uint64_t>(ctl->prof_fetch).store(prof_fetch, cuda::memory_order_relaxed);
                    atomic_dev<uint64_t>(ctl->prof_post).store(prof_post, cuda::memory_order_relaxed);
                    atomic_dev<uint64_t>(ctl->prof_cmds).store(prof_cmds, cuda::memory_order_relaxed);
                }
            }
            stop = __shfl_sync(0xffffffffu, stop, 0);
            stalled = __shfl_sync(0xffffffffu, stall, 0) != 0;
            if (stop) break;
        }
        if (stalled || myq == 0) {
            __nanosleep(1000);
            continue;
        }
        // Poll: lane j reads queue j's SQ doorbell (all of the warp's queues in one round
        // trip); only queues with a new tail or completions still pending are visited.
        // Acquire: pairs with the submitters' release (fence + doorbell RMW), so the
        // visit reads the SQEs without another round trip (an acquire re-read of the
        // doorbell when it shows work cost one on every command's path). It empties L1,
        // which the service loop does not use (its constants are in shared memory).
        uint32_t db_lane = 0;
        bool has_work = false;
        if (lane < myq) {
            // Another GPU's queue: its submitters release at system scope (BAM_QP_F_MMIO),
            // so the acquire that pairs with them is system scope too.
            db_lane = my_sys ? atomic_sys<uint32_t>(*my_sq_db).load(cuda::memory_order_acquire)
                             : atomic_dev<uint32_t>(*my_sq_db).load(cuda::memory_order_acquire);
            has_work = db_lane != (sq_head & my_mask) || pend_head != pend_tail;
        }
        bool progress = false;
        for (uint32_t work = __ballot_sync(0xffffffffu, has_work); work != 0; work &= work - 1) {
            const uint32_t j = __ffs(work) - 1;
            const queue_consts& K = my_qtab[j];
            const bool sys = SHARED && (K.depth & BAM_SIM_Q_SYSTEM) != 0;  // warp-uniform
            const uint32_t depth = K.depth & ~BAM_SIM_Q_SYSTEM;
            const uint32_t mask = depth - 1;
            const uint32_t shift = __ffs(depth) - 1;
            bam_sqe* sq = K.sq;
            bam_cqe* cq = K.cq;
            bam_sim_pending* pend = K.pend;
            uint32_t* bitmap = K.bitmap;
            const uint32_t ssd_i = K.ssd;
            const uint32_t qid = K.qid;
            const bam_sim_ssd& S = ssd_i < smem_ssds ? ssd_tab[ssd_i] : ssds[ssd_i];
            uint32_t qsh = __shfl_sync(0xffffffffu, sq_head, j);
            uint32_t qct = __shfl_sync(0xffffffffu, cq_tail, j);
            uint32_t qph = __shfl_sync(0xffffffffu, pend_head, j);
            uint32_t qpt = __shfl_sync(0xffffffffu, pend_tail, j);
            uint32_t qch = __shfl_sync(0xffffffffu, cq_head_seen, j);
            const uint32_t pend_was_empty = qph == qpt;
            uint64_t d_reads = 0, d_writes = 0, d_others = 0, d_rbytes = 0, d_wbytes = 0, d_errors = 0, d_baddb = 0;

            // ---- 2. fetch new SQEs -------------------------------------------------------
            const uint32_t db = __shfl_sync(0xffffffffu, db_lane, j);
            uint32_t n = 0;
            bam_sim_pending fresh = {};  // this lane's command fetched in this visit
            if (db > mask) {
                d_baddb = 1;  // invalid doorbell write: ignored (a real controller raises an AER)
            } else {
                const uint32_t avail = (db - qsh) & mask;
                const uint32_t pend_room = depth - (qpt - qph);
                n = avail < 32 ? avail : 32;
                if (n > pend_room) n = pend_room;
            }
            if (n > 0) {
                const bam_sim_ssd& Sd = S;
                // Lane j's acquire in the poll, then this barrier (memory ordering among
                // the warp's lanes), then every lane's SQE loads: each lane sees the SQEs
                // the doorbell value it read released.
                __syncwarp();
                progress = true;
                const uint64_t pc0 = clock64();
                cmd_info ci = {};
                uint32_t cid = 0;
                uint32_t conflict = 0;
                uint32_t lie = 0;  // BAM_SIM_LIE_* of a command in the fault range
                uint64_t cost_ps = 0;
                if (lane < n) {
                    const uint4* src = reinterpret_cast<const uint4*>(sq + ((qsh + lane) & mask));
                    bam_sqe e;
                    uint4* ev = reinterpret_cast<uint4*>(&e);
#pragma unroll
                    for (int k = 0; k < 4; ++k) ev[k] = src[k];
                    const uint32_t opc = e.cdw0 & 0xffu;
                    cid = e.cdw0 >> 16;
                    // CID reuse while in flight -> Command ID Conflict. The atomic's round
                    // trip overlaps the validation below; its result is applied after it.
                    const uint32_t bit = 1u << (cid & 31u);
                    const uint32_t old = atomicOr(&bitmap[cid >> 5], bit);
                    if ((e.cdw0 & 0x0000ff00u) != 0) {
                        ci.status = nvme::SC_INVALID_FIELD;  // fused ops, SGLs: not supported
                    } else if (opc == nvme::OP_FLUSH) {
                        ci.op = 3;
                        if (e.nsid != Sd.nsid && e.nsid != 0xffffffffu) ci.status = nvme::SC_INVALID_NAMESPACE;
                    } else if (opc == nvme::OP_READ || opc == nvme::OP_WRITE) {
                        ci.op = opc == nvme::OP_READ ? 1 : 2;
                        const uint64_t slba = (static_cast<uint64_t>(e.cdw11) << 32) | e.cdw10;
                        const uint32_t nlb = (e.cdw12 & 0xffffu) + 1u;
                        const uint32_t lsh = Sd.lba_shift;
                        const uint32_t psh = Sd.page_shift;
                        const uint64_t bytes = static_cast<uint64_t>(nlb) << lsh;
                        const uint32_t mdts = Sd.mdts_bytes;
                        const uint64_t page = 1ull << psh;
                        ci.bytes = static_cast<uint32_t>(bytes);
                        if (e.nsid != Sd.nsid) {
                            ci.status = nvme::SC_INVALID_NAMESPACE;
                        } else if (slba >= Sd.nlb || nlb > Sd.nlb - slba) {
                            ci.status = nvme::SC_LBA_OUT_OF_RANGE;
                        } else if (mdts != 0 && bytes > mdts) {
                            ci.status = nvme::SC_INVALID_FIELD;
                        } else if ((e.prp1 & 3u) != 0) {
                            ci.status = nvme::SC_INVALID_PRP_OFFSET;
                        } else {
                            ci.medium = Sd.medium + (slba << lsh);
                            const uint64_t first = page - (e.prp1 & (page - 1));
                            ci.len1 = static_cast<uint32_t>(bytes < first ? bytes : first);
                            ci.prp2 = e.prp2;
                            if (!region_dev(v, r0, e.prp1, ci.len1, ci.dev1)) ci.status = nvme::SC_DATA_TRANSFER_ERROR;
                            const uint64_t fl = Sd.fault_lba, fn = Sd.fault_nlb;
                            if (ci.status == 0 && fn != 0 && slba < fl + fn && fl < slba + nlb) {
                                ci.status = Sd.fault_status;
                                lie = Sd.flags & BAM_SIM_LIE_MASK;
                            }
                            const uint64_t pc = ci.op == 1 ? Sd.ps_per_read_cmd : Sd.ps_per_write_cmd;
                            const uint64_t pb = ci.op == 1 ? Sd.ps_per_read_byte : Sd.ps_per_write_byte;
                            cost_ps = pc > pb * bytes ? pc : pb * bytes;
                        }
                    } else {
                        ci.status = nvme::SC_INVALID_OPCODE;
                    }
                    if (old & bit) {
                        ci = cmd_info{};
                        ci.status = nvme::SC_CID_CONFLICT;
                        cost_ps = 0;
                        conflict = 1;
                        lie = 0;
                    }
                }
                // Data movement. Small commands (one segment of <= 512 aligned bytes) go
                // SMALL_BATCH at a time, each lane moving 16 bytes of each, so that
                // SMALL_BATCH loads are in flight per lane; the others one command at a
                // time by the warp.
                const bool small = lane < n && ci.status == 0 && (ci.op == 1 || ci.op == 2) &&
                                   ci.bytes == ci.len1 && ci.len1 <= 512 &&
                                   ((ci.medium | ci.dev1 | ci.len1) & 15u) == 0;
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
                        const uint32_t op = __shfl_sync(0xffffffffu, ci.op, k);
                        const uint64_t med = shfl_u64(0xffffffffu, ci.medium, k);
                        const uint64_t dev1 = shfl_u64(0xffffffffu, ci.dev1, k);
                        const uint32_t len = __shfl_sync(0xffffffffu, ci.len1, k);
                        if (lane * 16 < len) cp_async16(stage + u * 32 + lane, (op == 1 ? med : dev1) + lane * 16);
                    }
                    cp_async_wait_all();
                    uint32_t again = round_first;
                    for (int u = 0; u < SMALL_BATCH && again != rem; ++u) {
                        const int k = __ffs(again) - 1;
                        again &= again - 1;
                        const uint32_t op = __shfl_sync(0xffffffffu, ci.op, k);
                        const uint64_t med = shfl_u64(0xffffffffu, ci.medium, k);
                        const uint64_t dev1 = shfl_u64(0xffffffffu, ci.dev1, k);
                        const uint32_t len = __shfl_sync(0xffffffffu, ci.len1, k);
                        if (lane * 16 < len)
                            *reinterpret_cast<uint4*>((op == 1 ? dev1 : med) + lane * 16) = stage[u * 32 + lane];
                    }
                }
                for (uint32_t k = 0; k < n; ++k) {
                    const uint32_t op = __shfl_sync(0xffffffffu, ci.op, k);
                    uint32_t st = __shfl_sync(0xffffffffu, ci.status, k);
                    if (st != 0 || op == 0 || op == 3 || ((small_mask >> k) & 1u)) continue;
                    const uint64_t med = shfl_u64(0xffffffffu, ci.medium, k);
                    const uint64_t dev1 = shfl_u64(0xffffffffu, ci.dev1, k);
                    const uint32_t len1 = __shfl_sync(0xffffffffu, ci.len1, k);
                    const uint32_t bytes = __shfl_sync(0xffffffffu, ci.bytes, k);
                    move_seg(op, med, dev1, len1, lane);
                    if (bytes > len1) {
                        const uint64_t prp2 = shfl_u64(0xffffffffu, ci.prp2, k);
                        st = move_rest(v, r0, op, med + len1, prp2, bytes - len1, Sd.page_shift, lane);
                        if (lane == k) ci.status = st;
                    }
                }
                // Device model: when each completion is due.
                const uint64_t now = globaltimer();
                uint64_t due = now;
                const uint64_t lat = ci.op == 2 ? Sd.lat_write_ns : Sd.lat_read_ns;
                // Inclusive prefix sum of the costs over lanes < n (skipped when no command
                // costs anything, as with the `ideal` model).
                uint64_t pre = lane < n ? cost_ps : 0;
                uint64_t total = 0;
                if (__any_sync(0xffffffffu, pre != 0)) {
#pragma unroll
                    for (int d = 1; d < 32; d <<= 1) {
                        const uint64_t o =
                            shfl_u64(0xffffffffu, pre, lane >= static_cast<uint32_t>(d) ? lane - d : lane);
                        if (lane >= static_cast<uint32_t>(d)) pre += o;
                    }
                    total = shfl_u64(0xffffffffu, pre, 31);
                }
                if (total != 0) {
                    uint64_t start = 0;
                    if (lane == 0) {
                        atomic_dev<uint64_t> vc(*reinterpret_cast<uint64_t*>(Sd.vclock));
                        vc.fetch_max((now - tbase) * 1000ull, cuda::memory_order_relaxed);
                        start = vc.fetch_add(total, cuda::memory_order_relaxed);
                    }
                    start = shfl_u64(0xffffffffu, start, 0);
                    due = tbase + (start + pre) / 1000ull;
                }
                due += lat;
                if (lane < n) {
                    if (ci.status != 0) ++d_errors;
                    if (ci.op == 1) {
                        ++d_reads;
                        d_rbytes += ci.status == 0 ? ci.bytes : 0;
                    } else if (ci.op == 2) {
                        ++d_writes;
                        d_wbytes += ci.status == 0 ? ci.bytes : 0;
                    } else {
                        ++d_others;
                    }
                    bam_sim_pending pe;
                    pe.due_ns = lie == BAM_SIM_LIE_WITHHOLD ? due + Sd.lie_ns : due;
                    pe.cid = static_cast<uint16_t>(cid);
                    pe.status = static_cast<uint16_t>(ci.status);
                    pe.flags = conflict | (lie << 8);
                    pend[(qpt + lane) & mask] = pe;
                    fresh = pe;
                }
                qsh += n;
                qpt += n;
                __syncwarp();
                prof_fetch += clock64() - pc0;
                prof_cmds += n;
            }

            // ---- 1. post due completions ------------------------------------------------
            if (qpt != qph) {
                const uint64_t pc0 = clock64();
                uint32_t m = qpt - qph;
                if (m > 32) m = 32;
                uint32_t room = depth - 1u - ((qct - qch) & mask);
                if (m > room) {
                    // Read the CQ head doorbell again, with acquire (every lane: each
                    // writes CQ slots): the host's reads of the slots it gave back happen
                    // before our stores into them. Between reads the last value stands.
                    const uint32_t cqh = sys ? atomic_sys<uint32_t>(*K.cq_db).load(cuda::memory_order_acquire)
                                             : atomic_dev<uint32_t>(*K.cq_db).load(cuda::memory_order_acquire);
                    if (cqh <= mask) qch = cqh;
                    room = cqh > mask ? 0u : depth - 1u - ((qct - qch) & mask);
                }
                if (m > room) m = room;
                const uint64_t now = globaltimer();
                bam_sim_pending pe = {};
                bool ready = false;
                if (lane < m) {
                    // Fetched in this visit into an empty FIFO: still in registers.
                    pe = pend_was_empty ? fresh : pend[(qph + lane) & mask];
                    ready = pe.due_ns <= now;
                }
                const uint32_t cnt = contiguous_ready(0xffffffffu, __ballot_sync(0xffffffffu, ready));
                const uint32_t k = cnt < m ? cnt : m;
                if (k > 0) {
                    progress = true;
                    if (lane < k && (pe.flags & 1u) == 0) {
                        // Free the CID before the CQE can be seen: the host may reuse it then.
                        atomicAnd(&bitmap[pe.cid >> 5], ~(1u << (pe.cid & 31u)));
                    }
                    const uint32_t sqhd = qsh & mask;
                    __syncwarp();  // data stores of all lanes ordered before the release below
                    if (__ballot_sync(0xffffffffu, lane < k && (pe.flags >> 8) != 0) != 0) {
                        // A lying controller (SimArray::set_fault with a Lie): out of line.
                        qct = post_lying(cq, mask, shift, qct, k, sqhd, qid, sys, pe, room - k, bitmap + 2048);
                    } else {
                        // Another GPU's reader: post_cqe releases at system scope (the data
                        // and DW0-2, ordered by the __syncwarp above, go with it).
                        if (lane < k)
                            post_cqe(cq, mask, shift, qct + lane,
                                     static_cast<uint32_t>(pe.cid) | (static_cast<uint32_t>(pe.status) << 17), sqhd,
                                     qid, sys, 0);
                        qct += k;
                    }
                    qph += k;
                }
                prof_post += clock64() - pc0;
            }
            // Fold this visit's changes back into lane j's registers.
            d_reads = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(d_reads));
            d_writes = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(d_writes));
            d_others = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(d_others));
            d_errors = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(d_errors));
            const uint64_t rb = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(d_rbytes));
            const uint64_t wb = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(d_wbytes));
            if (lane == j) {
                sq_head = qsh;
                cq_tail = qct;
                pend_head = qph;
                pend_tail = qpt;
                cq_head_seen = qch;
                counters.reads += d_reads;
                counters.writes += d_writes;
                counters.others += d_others;
                counters.errors += d_errors;
                counters.read_bytes += rb;
                counters.write_bytes += wb;
                counters.bad_doorbells += d_baddb;
            }
        }
        // Publish counters now and then so that the host can read them while running.
        if ((iter & 1023u) == 0 && lane < myq) counters.store(queues[w + lane * W]);
        if (!progress) __nanosleep(64);
    }
    if (lane < myq) {
        bam_sim_queue& Q = queues[w + lane * W];
        Q.sq_head = sq_head;
        Q.cq_tail = cq_tail;
        Q.pend_head = pend_head;
        Q.pend_tail = pend_tail;
        counters.store(Q);
    }
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
