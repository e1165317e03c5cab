// bam/detail/fill_queue.cuh — fill queues: NVMe queue pairs that one block of the fill service
// owns (per SSD), coordinated in shared memory.
// Internal to the device library (detail/): the cache service's, not for user kernels.
//
// The shared queue protocol (bam/detail/queue.cuh) lets any thread of any kernel submit:
// it pays for that with global atomics and fences on every command (a ticket, the slot
// words, a mark, the tail word's RMWs, the reaper lock), a large share of a lone 4 KiB
// miss. The fill service's reads need none of that generality: when the I/O layer has
// queue pairs to spare (Cache::new reserves them, IoArray::reserve_fill_queues), each
// block of the service owns one queue pair of each SSD, and only the block's threads use
// it. The service sends a warp's lone request through it (the latency a lone miss feels
// in full) and the requests of a batch through the shared queues (cache_service.cuh,
// serve_fills: with every fill on the fill queues the simulated SSDs' queues carried the
// load unevenly and the kernel suite's quarter-cache runs took longer; docs/cache.md,
// "Fill queues"). Then:
//
//  * Tickets come from a shared-memory counter (one atomic for a warp's group of lanes).
//    Ticket t writes SQ slot t mod D, CID = the thread's index in the block in the low 9
//    bits and the thread's command count (mod 128, its generation) above. A thread has
//    at most one command in flight, so CIDs are unique among the queue's commands, and
//    with D >= FILLQ_MIN_DEPTH > 2 x 512 slots are free by construction: of the D - 2
//    tickets before t other than t - D and t - D + 1, at most 511 are in flight, so one
//    of them completed, and the controller, which fetches SQEs in order, fetched t - D
//    and t - D + 1 before it: slot t is free and tail t + 1 never makes the queue look
//    empty. For the same reason the CQ (D entries, its head doorbell rung every D / 4
//    consumed entries) never fills.
//  * Doorbells in ticket order: each group's leader fences once, then the leaders ring
//    one SSD at a time in ascending order, each once the tail rung so far reaches its
//    first ticket (shared memory, bounded). No marks, no tail word, no holder.
//  * Completions: a waiter that finds the CQE at the head posted takes the queue's
//    reaper lock (shared memory), consumes every posted CQE, and hands the others to
//    their threads through `state` (the thread's word: idle, waiting, or done with a
//    status); its own it keeps. A CQE whose thread is not waiting, or whose generation
//    is not that thread's current command's (a duplicate, a late or stale completion),
//    breaks the queue (a protocol violation, logged), as do more than D - 1 CQEs at once.
//  * Hand-over: the queue pair's shared-protocol state in GPU memory (bam_qp_state) is
//    where the service starts (fill_queues_init) and what it writes back when it stops
//    (fill_queues_fini), so that the shared queues, or a later cache's fill queues, go on
//    from there.
//
// Memory ordering. Submit: the lanes store their SQEs; __syncwarp orders them before
// their leader's fence.acq_rel.gpu, and the relaxed doorbell exchange after that fence
// is a release of every SQE of the group (fence + strong write; cumulative over the
// barrier). For a real SSD ring_doorbell adds fence.sc.sys before the MMIO store. The
// next group's leader acquires the rung tail (block scope) before its own doorbell, so a
// controller that reads a later doorbell value also sees the earlier groups' SQEs (the
// exchanges form one release sequence; MMIO stores to one doorbell keep the order of
// that causality chain). Complete: the reaper loads DW3 (relaxed), counts the posted
// ones, then fences (fence.acq_rel at the queue's scope: the loads become acquires of the
// controller's release); its hand-overs and unlock follow that fence. A waiter that finds
// its word done (block-scope acquire) fences at device scope before it returns, and a
// reaper returns after its own fence: either way a strong store or RMW the caller makes
// afterwards releases the data the command brought in (the contract of bam/detail/queue.cuh,
// on which the cache's publish relies).
//
// Failures: every wait is bounded by the I/O layer's timeout. A timeout or a CQE that
// names no waiting thread marks the queue broken (logged): its waiters return
// BAM_ERR_ABORTED (their commands may still land, so the caller quarantines the slots,
// as for the shared queues), the block's later fills for that SSD use the shared
// queues, and when the service stops the queue pair is marked failed.
#pragma once

#include <stdint.h>

#include "../io.cuh"
#include "queue.cuh"

namespace bam {
namespace detail {

/// SSDs whose fill queues a block keeps in shared memory (fills for SSDs beyond use the
/// shared queues).
constexpr uint32_t FILLQ_MAX_SSDS = 16;
/// The least depth of a fill queue: above twice the block's threads (see above).
constexpr uint32_t FILLQ_MIN_DEPTH = 2 * BAM_FILL_SERVICE_THREADS;

/// fill_queue::broken: why a fill queue is not used (0: it is).
constexpr uint32_t FQ_BROKEN = 1;     // broke while in use: marked failed when the block stops
constexpr uint32_t FQ_NOT_TAKEN = 2;  // never used: its state is left as it was

/// Fill-queue command ids: the thread in the low bits, its generation above.
constexpr uint32_t FQ_THREAD_BITS = 9;
constexpr uint32_t FQ_GEN_MASK = 0xffffu >> FQ_THREAD_BITS;
static_assert(BAM_FILL_SERVICE_THREADS <= (1u << FQ_THREAD_BITS), "fill-queue CIDs");

__device__ __forceinline__ uint16_t fq_cid(uint32_t thread, uint32_t gen) {
    return static_cast<uint16_t>(thread | (gen << FQ_THREAD_BITS));
}

/// A thread's word in fill_queues::state.
constexpr uint32_t FQ_IDLE = 0;
constexpr uint32_t FQ_WAITING = 1;
constexpr uint32_t FQ_DONE = 2;  // | (status field << 2)

/// One SSD's fill queue, as the block sees it (shared memory).
struct fill_queue {
    qp_ref q;
    uint64_t base;      // sq_ticket (= CQ head) of the queue pair when the block took it
    uint64_t base_rung; // its cq_rung then (the counters below are these, mod 2^32, on)
    uint32_t ticket;   // next SQ ticket
    uint32_t rung;     // the SQ tail rung so far (tickets below it are the controller's)
    uint32_t head;     // CQ head (absolute), under `lock`
    uint32_t cq_rung;  // the CQ head doorbell value rung last (absolute)
    uint32_t lock;     // the reaper lock: 0 free
    uint32_t broken;   // 0: in use; FQ_BROKEN: a wait timed out or a CQE was wrong;
                       // FQ_NOT_TAKEN: not quiet or too shallow when the block started
};

/// The block's fill queues (shared memory).
struct fill_queues {
    fill_queue q[FILLQ_MAX_SSDS];              // SSD s's fill queue
    uint32_t state[BAM_FILL_SERVICE_THREADS];  // FQ_*: each thread's command
    uint8_t gen[BAM_FILL_SERVICE_THREADS];     // each thread's command count, mod 128
    uint32_t n;                                // SSDs 0 .. n - 1 have fill queues
};

using block_u32 = cuda::atomic_ref<uint32_t, cuda::thread_scope_block>;

/// Sets up the block's fill queues (every thread of the block calls; ends with
/// __syncthreads): of each SSD's queue pairs (the io view's uniform layout), the cache's
/// `nfill` from `first` on, one per block of the service (`nfill` must equal gridDim.x,
/// else the block has none). A queue pair goes on from where its last user left it: its
/// shared-protocol state in GPU memory (bam_qp_state) says where the SQ tail and the CQ
/// head are. One that is not quiet (commands in flight, a lock held,
/// failed) or not deep enough (FILLQ_MIN_DEPTH) is not used.
__device__ inline void fill_queues_init(fill_queues& fq, const bam_io_view& io, uint32_t first, uint32_t nfill) {
    const uint32_t k = io.flags >> BAM_IO_QPS_PER_SSD_SHIFT;
    const uint32_t n = k != 0 && nfill == gridDim.x ? (io.nssd < FILLQ_MAX_SSDS ? io.nssd : FILLQ_MAX_SSDS) : 0u;
    for (uint32_t s = threadIdx.x; s < n; s += blockDim.x) {
        fill_queue& f = fq.q[s];
        f.q = load_qp(io, s * k + first + blockIdx.x);
        // Plain loads: the queue pair's last users were earlier kernels.
        const bam_qp_state* st = f.q.st;
        const uint64_t ticket = st->sq_ticket, tail = st->sq_tail, head = st->cq_head, failed = st->failed;
        const bool quiet = tail == ticket << SQ_TAIL_SHIFT && head == ticket << 1 && failed == 0;
        f.base = ticket;
        f.base_rung = st->cq_rung;
        f.ticket = f.rung = f.head = static_cast<uint32_t>(ticket);
        f.cq_rung = static_cast<uint32_t>(f.base_rung);
        f.lock = 0;
        f.broken = quiet && f.q.mask + 1u >= FILLQ_MIN_DEPTH ? 0u : FQ_NOT_TAKEN;
    }
    for (uint32_t t = threadIdx.x; t < BAM_FILL_SERVICE_THREADS; t += blockDim.x) {
        fq.state[t] = FQ_IDLE;
        fq.gen[t] = 0;
    }
    if (threadIdx.x == 0) fq.n = n;
    __syncthreads();
}

/// Hands the block's fill queues back (every thread of the block calls, after its last
/// fill): each queue pair's shared-protocol state in GPU memory is made to say what the
/// fill queue did, as if the shared protocol had submitted and completed those commands
/// (ticket, SQ tail, CQ head, the slot words of the tickets used), so that the next user
/// of the queue pair (the shared queues once the cache is gone, or another cache's fill
/// queue) goes on from there. A queue pair left broken (a command may still be in flight)
/// is marked failed: its next users get BAM_ERR_ABORTED, not a queue out of step. One the
/// block never took (FQ_NOT_TAKEN) is left as it was.
__device__ inline void fill_queues_fini(fill_queues& fq) {
    __syncthreads();
    for (uint32_t s = 0; s < fq.n; ++s) {
        fill_queue& f = fq.q[s];
        const qp_ref& q = f.q;
        bam_qp_state* st = q.st;
        if (f.broken == FQ_NOT_TAKEN) continue;  // never used: nothing to hand back
        if (f.broken != 0) {
            if (threadIdx.x == 0) atomic_dev<uint64_t>(st->failed).store(1, cuda::memory_order_relaxed);
            continue;
        }
        const uint64_t t0 = f.base;
        const uint64_t t = t0 + static_cast<uint32_t>(f.ticket - static_cast<uint32_t>(t0));  // absolute
        const uint32_t used = static_cast<uint32_t>(t - t0);
        // The slots of the last `depth` tickets used: published and released in the lap
        // of their ticket (the shared protocol's mark and seq words, queue.cuh).
        const uint32_t depth = q.mask + 1u;
        for (uint32_t k = threadIdx.x; k < depth && k < used; k += blockDim.x) {
            const uint64_t u = t - 1 - k;  // the last `depth` tickets used, newest first
            const uint32_t slot = static_cast<uint32_t>(u & q.mask), lap = q.lap(u) + 1u;
            q.mark[slot] = lap;
            q.seq[slot] = lap;
            q.cpl[slot] = 0;
        }
        if (threadIdx.x == 0) {
            st->sq_ticket = t;
            st->sq_tail = t << SQ_TAIL_SHIFT;
            st->cq_head = (t0 + static_cast<uint32_t>(f.head - static_cast<uint32_t>(t0))) << 1;
            st->cq_rung = f.base_rung + static_cast<uint32_t>(f.cq_rung - static_cast<uint32_t>(f.base_rung));
            st->completions += used;
        }
    }
}

/// Whether a read of `nlb` blocks on `target` may go through the block's fill queue of
/// SSD `ssd`: the SSD has one that works, and the read is one command.
__device__ __forceinline__ bool fill_queue_usable(fill_queues& fq, const io_target& target, uint32_t nlb) {
    if (target.ssd >= fq.n || fq.q[target.ssd].broken) return false;
    const uint64_t bytes = static_cast<uint64_t>(nlb) << target.lba_shift;
    return nlb <= 65536u && (target.mdts_bytes == 0 || bytes <= target.mdts_bytes);
}

/// Submits a read of `nlb` blocks at `lba` into `buf` on the block's fill queue of the
/// target's SSD (fill_queue_usable said yes). Any set of active lanes may call;
/// the lanes of one SSD form a group. Each group takes its tickets with one shared-memory
/// atomic and writes its SQEs; each group's leader fences once (all groups' fences
/// overlap); then the leaders ring one SSD at a time, in ascending order, each once the
/// groups before its own (other warps') have rung that SSD's queue. Ascending order makes
/// the waits acyclic: a leader waits only for tickets below its own on one SSD, held by a
/// warp that has rung every SSD below it. (A first form let each group ring on its own,
/// as the warp's divergent groups were scheduled: groups of two warps waited on each
/// other through two SSDs until the scheduler switched paths; a second rang in ascending
/// order but fenced in the loop, one fence after the other. Both slowed the kernel
/// suite's quarter-cache runs.)
/// Returns OK (then fill_wait), or BAM_ERR_INVALID (nothing submitted, logged) or
/// BAM_ERR_TIMEOUT (a group before ours never rang: the queue is broken; ours were not
/// rung, logged).
__device__ inline status_t fill_submit(fill_queues& fq, const bam_io_view& io, const io_target& target, uint64_t lba,
                                       uint32_t nlb, void* buf) {
    constexpr uint32_t BAD = 0xfffffffeu, DONE = 0xffffffffu;
    const uint64_t bytes = static_cast<uint64_t>(nlb) << target.lba_shift;
    uint64_t prp1 = 0, prp2 = 0;
    const bool ok = nlb != 0 && nlb <= target.nlb && lba <= target.nlb - nlb &&
                    build_prps(target.buf, reinterpret_cast<uint64_t>(buf), bytes, prp1, prp2);
    fill_queue& f = fq.q[target.ssd];
    const qp_ref& q = f.q;
    const uint32_t key = ok ? target.ssd : BAD;
    const uint32_t active = __activemask();
    const uint32_t group = __match_any_sync(active, key);
    const int leader = __ffs(group) - 1;
    const bool is_leader = static_cast<int>(lane_id()) == leader;
    const uint32_t n = __popc(group);
    uint32_t t0 = 0;
    if (ok) {
        if (is_leader) t0 = block_u32(f.ticket).fetch_add(n, cuda::memory_order_relaxed);
        t0 = __shfl_sync(group, t0, leader);
        bam_sqe e;
        const uint32_t g = (fq.gen[threadIdx.x] + 1u) & FQ_GEN_MASK;
        fq.gen[threadIdx.x] = static_cast<uint8_t>(g);  // only this thread writes it
        nvme::make_rw(e, nvme::OP_READ, fq_cid(threadIdx.x, g), target.nsid, lba, nlb, prp1, prp2);
        write_sqe(q, t0 + __popc(group & lanemask_lt()), e);
        // Our word says "waiting" before the controller can see our command (the
        // doorbell below is a release): a reaper that consumes its CQE finds it so.
        block_u32(fq.state[threadIdx.x]).store(FQ_WAITING, cuda::memory_order_relaxed);
    } else {
        log_error(io, BAM_ERR_INVALID, target.ssd, q.qid, 0xffff, nvme::OP_READ, lba, nlb, 0);
    }
    // The group's SQE stores precede its leader's fence: with the relaxed doorbell write
    // after it, a release of every SQE of the group (cumulative over the barrier).
    __syncwarp(active);
    if (ok && is_leader) fence_gpu();
    int rc = ok ? OK : BAM_ERR_INVALID;
    bool left = ok && is_leader;  // a leader whose turn has not come yet
    for (;;) {
        const uint32_t turn = __reduce_min_sync(active, left ? key : DONE);
        if (turn == DONE) break;
        if (!left || key != turn) continue;
        left = false;
        // Ring in ticket order: wait until the groups before ours have rung (acquire:
        // their doorbell writes come before ours).
        deadline dl(io.timeout_ns);
        uint32_t spins = 0;
        while (block_u32(f.rung).load(cuda::memory_order_acquire) != t0) {
            if (block_u32(f.broken).load(cuda::memory_order_relaxed) != 0 || dl.expired()) {
                rc = BAM_ERR_TIMEOUT;
                break;
            }
            backoff(spins);
        }
        if (rc == OK) {
            ring_doorbell(q.sq_db, (t0 + n) & q.mask, q.mmio(), true);
            block_u32(f.rung).store(t0 + n, cuda::memory_order_release);
        } else {
            // A group before ours never rang (its leader timed out, or the queue broke):
            // ours are not rung either, and nobody may ring past them.
            block_u32(f.broken).store(FQ_BROKEN, cuda::memory_order_relaxed);
            log_error(io, BAM_ERR_TIMEOUT, target.ssd, q.qid, t0 & q.mask, nvme::OP_READ, lba, nlb, 3);
        }
    }
    rc = __shfl_sync(group, rc, leader);
    if (ok && rc != OK) block_u32(fq.state[threadIdx.x]).store(FQ_IDLE, cuda::memory_order_relaxed);
    return rc;
}

/// Consumes the posted CQEs at the head of fill queue `f` (the caller holds its lock):
/// returns true if this thread's own was among them (its status field in `own_status`);
/// the others go to their threads' words. A CQE that names no waiting thread breaks the
/// queue (logged). Ends after a fence that follows the CQE loads.
__device__ inline bool fill_reap_locked(fill_queues& fq, fill_queue& f, const bam_io_view& io, uint32_t& own_status) {
    const qp_ref& q = f.q;
    uint32_t h = f.head;
    bool took = false;
    for (;;) {
        uint32_t d[4];
        load_cqe_dw3x4(q, h, d);
        uint32_t cnt = 0;
        while (cnt < 4 && cqe_posted(q, h + cnt, d[cnt])) ++cnt;
        // Acquire for these CQEs and their data; release for what follows.
        fence_completions(q);
        for (uint32_t k = 0; k < cnt; ++k) {
            const uint32_t cid = d[k] & 0xffffu, status_field = d[k] >> 17;
            const uint32_t th = cid & ((1u << FQ_THREAD_BITS) - 1u);
            const bool current = th < BAM_FILL_SERVICE_THREADS && cid == fq_cid(th, fq.gen[th]) &&
                                 block_u32(fq.state[th]).load(cuda::memory_order_relaxed) == FQ_WAITING;
            if (current && th == threadIdx.x) {
                took = true;
                own_status = status_field;
                block_u32(fq.state[th]).store(FQ_IDLE, cuda::memory_order_relaxed);
            } else {
                const uint32_t sqhd = q.cq[(h + k) & q.mask].sqhd;  // after the fence: the CQE's own
                if (current && sqhd <= q.mask) {
                    block_u32(fq.state[th]).store(FQ_DONE | (status_field << 2), cuda::memory_order_relaxed);
                    continue;
                }
                // No waiting command of that generation (BAM_PROTO_NO_COMMAND: the NLB
                // field holds the thread's word and generation), or an SQ head outside.
                block_u32(f.broken).store(FQ_BROKEN, cuda::memory_order_relaxed);
                if (current)
                    log_error(io, BAM_ERR_PROTOCOL, q.ssd, q.qid, cid, BAM_PROTO_SQ_HEAD, 0, sqhd, d[k]);
                else
                    log_error(io, BAM_ERR_PROTOCOL, q.ssd, q.qid, cid, BAM_PROTO_NO_COMMAND, 0,
                              th < BAM_FILL_SERVICE_THREADS ? (fq.state[th] << 8) | fq.gen[th] : 0xffffffffu, d[k]);
            }
        }
        h += cnt;
        if (h - f.head >= q.mask + 1u) {
            // More than D - 1 CQEs posted at once: the controller broke the protocol.
            block_u32(f.broken).store(FQ_BROKEN, cuda::memory_order_relaxed);
            log_error(io, BAM_ERR_PROTOCOL, q.ssd, q.qid, 0xffff, BAM_PROTO_CQ_FLOOD, h - f.head, 0, 0);
            break;
        }
        if (cnt < 4) break;
    }
    f.head = h;
    // The CQ head doorbell every quarter of the queue (it never fills: see the top).
    if (h - f.cq_rung >= (q.mask + 1u) / 4u) {
        ring_doorbell(q.cq_db, h & q.mask, q.mmio(), true);
        f.cq_rung = h;
    }
    return took;
}

/// Waits for this thread's command on the fill queue of the target's SSD (fill_submit
/// returned OK) and returns OK, BAM_ERR_NVME (the status logged unless `log_status` is
/// false), BAM_ERR_TIMEOUT (logged; the queue is broken) or BAM_ERR_ABORTED (the queue
/// broke while we waited; logged). On OK or BAM_ERR_NVME it returns after a fence that
/// follows the acquire of the completion (see the top of this file).
__device__ inline status_t fill_wait(fill_queues& fq, const bam_io_view& io, const io_target& target, uint64_t lba,
                                     uint32_t nlb, bool log_status) {
    fill_queue& f = fq.q[target.ssd];
    const qp_ref& q = f.q;
    block_u32 mine(fq.state[threadIdx.x]);
    const uint16_t my_cid = fq_cid(threadIdx.x, fq.gen[threadIdx.x]);  // for the log
    deadline dl(io.timeout_ns);
    uint32_t spins = 0;
    uint32_t status_field = 0;
    for (;;) {
        const uint32_t w = mine.load(cuda::memory_order_acquire);
        if (w >= FQ_DONE) {
            status_field = w >> 2;
            mine.store(FQ_IDLE, cuda::memory_order_relaxed);
            fence_gpu();  // the wait's contract: a fence after the acquire
            break;
        }
        // The CQE at the head posted and the lock free: reap.
        const uint32_t h = block_u32(f.head).load(cuda::memory_order_relaxed);
        if (cqe_posted(q, h, load_cqe_dw3(q, h & q.mask, cuda::memory_order_relaxed)) &&
            block_u32(f.lock).load(cuda::memory_order_relaxed) == 0) {
            uint32_t expect = 0;
            if (block_u32(f.lock).compare_exchange_strong(expect, 1u, cuda::memory_order_acquire,
                                                          cuda::memory_order_relaxed)) {
                const bool took = fill_reap_locked(fq, f, io, status_field);
                block_u32(f.lock).store(0u, cuda::memory_order_release);
                if (took) break;
                continue;  // ours may have been handed over: look again at once
            }
        }
        if (block_u32(f.broken).load(cuda::memory_order_relaxed) != 0) {
            mine.store(FQ_IDLE, cuda::memory_order_relaxed);
            log_error(io, BAM_ERR_ABORTED, target.ssd, q.qid, my_cid, nvme::OP_READ, lba, nlb, 0);
            return BAM_ERR_ABORTED;
        }
        if (dl.expired()) {
            block_u32(f.broken).store(FQ_BROKEN, cuda::memory_order_relaxed);
            mine.store(FQ_IDLE, cuda::memory_order_relaxed);
            log_error(io, BAM_ERR_TIMEOUT, target.ssd, q.qid, my_cid, nvme::OP_READ, lba, nlb, 0);
            return BAM_ERR_TIMEOUT;
        }
        backoff(spins);
    }
    if (status_field != 0) {
        if (log_status) log_error(io, BAM_ERR_NVME, target.ssd, q.qid, my_cid, nvme::OP_READ, lba, nlb, status_field);
        return BAM_ERR_NVME;
    }
    return OK;
}

}  // namespace detail
}  // namespace bam
