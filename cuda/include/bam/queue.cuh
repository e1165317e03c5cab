// bam/queue.cuh — NVMe I/O queue pairs in GPU memory, shared by thousands of threads.
//
// Protocol (per queue pair of `depth` = D entries, D a power of two):
//
//  * Tickets. A submitter takes a ticket t from `state.sq_ticket` (one atomic add per
//    group of lanes of a warp that target the same queue). Ticket t owns SQ slot
//    s = t mod D in lap L = t / D, and uses CID = s. Per-slot words (`slots`):
//      mark[s] = L + 1   once ticket t's SQE is written (release)
//      cpl[s]  = (status << 16) | 1   once its CQE has been consumed from the CQ
//      seq[s]  = L + 1   once the ticket's owner took its completion (slot released)
//  * A ticket may write its slot when ready(t) and ready(t + 1), where
//    ready(x) := seq[x mod D] >= x / D ("ticket x - D has been released"). The first
//    makes slot and CID free (CIDs are unique per queue while in flight); the second
//    proves ticket t + 1 - D completed, so the controller fetched it and the SQ head
//    (which the CQE's SQHD reported) is at least t + 2 - D: writing tail t + 1 never
//    makes the queue look empty or overrun. At most D - 1 commands are in flight, so
//    the CQ (also D entries) cannot overflow either.
//  * Tail. Whoever holds `sq_lock` advances `sq_tail` over every contiguous entry
//    whose mark is set and rings the SQ doorbell once for the batch. A submitter
//    leaves the push loop when the tail is past its ticket, or when the entry at the
//    tail is not published yet: that entry's owner has not left its own push loop
//    (its mark is set before it enters), and it will carry the tail past ours.
//  * Completions. A waiter whose cpl word is still zero tries `cq_lock`; the holder
//    consumes every CQE whose phase tag matches the lap, stores cpl[cid], records SQHD,
//    then rings the CQ head doorbell once for the batch.
//
// Memory ordering (libcu++ atomic_ref; see ring_doorbell for MMIO):
//  * SQE stores → mark release (device scope) → lock holder's mark acquire → doorbell.
//    For a controller on this GPU (the simulated array) the doorbell is a device-scope
//    release store, paired with the controller's acquire load.
//  * For a real SSD the doorbell is an MMIO store into the BAR (registered with
//    cuMemHostRegister(IOMEMORY)). The holder issues fence.sc.sys (__threadfence_system)
//    first. Release/acquire is cumulative in the PTX model: SQE stores made by other
//    threads happen-before the holder's fence, and a system-scope SC fence orders them
//    before the later MMIO store for every observer, the SSD's DMA reads included.
//  * The controller writes the CQE's DW0-DW2 before DW3 (phase), and data before the
//    CQE. We load DW3 with acquire (system scope for a real SSD, whose PCIe posted
//    writes arrive in order) before reading DW2 or the data buffer.
#pragma once

#include <stdint.h>

#include "abi.h"
#include "error.cuh"
#include "util.cuh"

namespace bam {

/// Result codes of device-side I/O calls (0 = success). `BAM_ERR_*` from abi.h.
using status_t = int;
constexpr status_t OK = 0;

/// A queue pair as seen by one thread: the view plus decoded pointers.
struct qp_ref {
    bam_qp_state* st;
    bam_sqe* sq;
    bam_cqe* cq;
    uint32_t* mark;
    uint32_t* cpl;
    uint32_t* seq;
    uint64_t sq_db;
    uint64_t cq_db;
    uint32_t mask;   // depth - 1
    uint32_t shift;  // log2(depth)
    uint32_t flags;
    uint16_t qid;
    uint16_t ssd;

    __device__ __forceinline__ bool mmio() const { return (flags & BAM_QP_F_MMIO) != 0; }
    __device__ __forceinline__ uint32_t lap(uint64_t t) const {
        return static_cast<uint32_t>(t >> shift);
    }
};

__device__ __forceinline__ qp_ref load_qp(const bam_io_view& io, uint32_t qpi) {
    const bam_qp_view* v = reinterpret_cast<const bam_qp_view*>(io.qps) + qpi;
    qp_ref q;
    q.st = reinterpret_cast<bam_qp_state*>(__ldg(&v->state));
    q.sq = reinterpret_cast<bam_sqe*>(__ldg(&v->sq));
    q.cq = reinterpret_cast<bam_cqe*>(__ldg(&v->cq));
    const uint32_t depth = __ldg(&v->depth);
    uint32_t* slots = reinterpret_cast<uint32_t*>(__ldg(&v->slots));
    q.mark = slots;
    q.cpl = slots + depth;
    q.seq = slots + 2 * depth;
    q.sq_db = __ldg(&v->sq_db);
    q.cq_db = __ldg(&v->cq_db);
    q.mask = depth - 1;
    q.shift = __ffs(depth) - 1;
    q.flags = __ldg(&v->flags);
    q.qid = __ldg(&v->qid);
    q.ssd = __ldg(&v->ssd);
    return q;
}

/// Store a doorbell. See the ordering argument at the top of this file.
__device__ __forceinline__ void ring_doorbell(uint64_t db, uint32_t value, bool mmio) {
    if (mmio) {
        // fence.sc.sys: every store this thread has observed (the SQEs other threads
        // published with release, acquired through their marks) and every CQE it has
        // consumed is ordered before the MMIO store below, for all observers.
        __threadfence_system();
        // Uncached store into the BAR mapping: one 32-bit PCIe posted write.
        *reinterpret_cast<volatile uint32_t*>(db) = value;
    } else {
        atomic_dev<uint32_t>(*reinterpret_cast<uint32_t*>(db))
            .store(value, cuda::memory_order_release);
    }
}

__device__ __forceinline__ uint32_t load_cqe_dw3(const qp_ref& q, uint32_t idx) {
    uint32_t* p = reinterpret_cast<uint32_t*>(&q.cq[idx]) + 3;
    if (q.mmio()) return atomic_sys<uint32_t>(*p).load(cuda::memory_order_acquire);
    return atomic_dev<uint32_t>(*p).load(cuda::memory_order_acquire);
}

__device__ __forceinline__ bool try_lock(uint32_t* lock) {
    atomic_dev<uint32_t> l(*lock);
    if (l.load(cuda::memory_order_relaxed) != 0) return false;
    return l.exchange(1u, cuda::memory_order_acquire) == 0;
}

__device__ __forceinline__ void unlock(uint32_t* lock) {
    atomic_dev<uint32_t>(*lock).store(0u, cuda::memory_order_release);
}

/// Slot-release test: ticket x - D has been released by its owner.
__device__ __forceinline__ bool slot_ready(const qp_ref& q, uint64_t x) {
    const uint32_t s = atomic_dev<uint32_t>(q.seq[x & q.mask]).load(cuda::memory_order_acquire);
    return static_cast<int32_t>(s - q.lap(x)) >= 0;
}

/// Reserve `k` consecutive tickets on queue `qpi`. Lanes of a warp that reserve on the
/// same queue at the same time share one atomic. Any set of active lanes may call.
template <bool LONE = false>
__device__ __forceinline__ uint64_t reserve_tickets(const qp_ref& q, uint32_t qpi, uint32_t k) {
    const uint32_t active = co_active<LONE>();
    const uint32_t peers = co_match<LONE>(active, qpi);
    const int leader = __ffs(peers) - 1;
    const uint32_t lane = lane_id();
    uint32_t prefix = 0, total = 0;
    if (co_all<LONE>(peers, k == 1u)) {
        prefix = __popc(peers & lanemask_lt());
        total = __popc(peers);
    } else {
        for (uint32_t m = peers; m != 0; m &= m - 1) {
            const int src = __ffs(m) - 1;
            const uint32_t kk = co_shfl<LONE>(peers, k, src);
            if (static_cast<uint32_t>(src) < lane) prefix += kk;
            total += kk;
        }
    }
    uint64_t base = 0;
    if (static_cast<int>(lane) == leader) {
        base = atomic_dev<unsigned long long>(*reinterpret_cast<unsigned long long*>(&q.st->sq_ticket))
                   .fetch_add(total, cuda::memory_order_relaxed);
    }
    base = co_shfl_u64<LONE>(peers, base, leader);
    return base + prefix;
}

/// Wait until ticket t may write its slot (see the protocol above).
__device__ __forceinline__ status_t wait_slot(const bam_io_view& io, const qp_ref& q, uint64_t t,
                                              uint8_t opcode, uint64_t lba) {
    if (slot_ready(q, t) && slot_ready(q, t + 1)) return OK;
    deadline dl(io.timeout_ns);
    uint32_t spins = 0;
    while (!(slot_ready(q, t) && slot_ready(q, t + 1))) {
        if (atomic_dev<uint64_t>(q.st->failed).load(cuda::memory_order_relaxed) != 0) {
            log_error(io, BAM_ERR_ABORTED, q.ssd, q.qid, t & q.mask, opcode, lba, 0, 0);
            return BAM_ERR_ABORTED;
        }
        if (dl.expired()) {
            atomic_dev<uint64_t>(q.st->failed).store(1, cuda::memory_order_relaxed);
            log_error(io, BAM_ERR_TIMEOUT, q.ssd, q.qid, t & q.mask, opcode, lba, 0, 1);
            return BAM_ERR_TIMEOUT;
        }
        backoff(spins);
    }
    return OK;
}

/// Write the SQE for ticket t and publish it.
__device__ __forceinline__ void write_sqe(const qp_ref& q, uint64_t t, const bam_sqe& e) {
    uint4* dst = reinterpret_cast<uint4*>(q.sq + (t & q.mask));
    const uint4* src = reinterpret_cast<const uint4*>(&e);
#pragma unroll
    for (int i = 0; i < 4; ++i) dst[i] = src[i];
    // Release: the SQE stores above become visible to whoever acquires this mark.
    atomic_dev<uint32_t>(q.mark[t & q.mask]).store(q.lap(t) + 1u, cuda::memory_order_release);
}

/// Make sure the tail doorbell covers ticket `t` (each calling lane its own ticket).
/// Lanes that call together on the same queue cooperate: the leader takes the tail
/// lock and the group scans up to 32 marks per step.
template <bool LONE = false>
__device__ __forceinline__ status_t push_tail(const bam_io_view& io, const qp_ref& q, uint32_t qpi,
                                              uint64_t t) {
    const uint32_t active = co_active<LONE>();
    const uint32_t group = co_match<LONE>(active, qpi);
    const uint64_t tmax = co_reduce_max_u64<LONE>(group, t);
    const int leader = __ffs(group) - 1;
    const bool is_leader = static_cast<int>(lane_id()) == leader;
    const uint32_t rank = __popc(group & lanemask_lt());
    const uint32_t p = __popc(group);
    atomic_dev<uint64_t> tail_ref(q.st->sq_tail);
    deadline dl(io.timeout_ns);
    uint32_t spins = 0;
    for (;;) {
        // 0: done, 1: retry, 2: holding the lock
        int action = 0;
        uint64_t tail = 0;
        if (is_leader) {
            tail = tail_ref.load(cuda::memory_order_acquire);
            if (tail > tmax) {
                action = 0;
            } else if (atomic_dev<uint32_t>(q.mark[tail & q.mask]).load(cuda::memory_order_acquire) !=
                       q.lap(tail) + 1u) {
                action = 0;  // the owner of the entry at the tail will push past ours
            } else if (try_lock(&q.st->sq_lock)) {
                tail = tail_ref.load(cuda::memory_order_relaxed);
                action = 2;
            } else {
                action = 1;
            }
        }
        action = co_shfl<LONE>(group, action, leader);
        if (action == 0) return OK;
        if (action == 1) {
            int expired = is_leader ? dl.expired() : 0;
            expired = co_shfl<LONE>(group, expired, leader);
            if (expired) {
                if (is_leader) {
                    atomic_dev<uint64_t>(q.st->failed).store(1, cuda::memory_order_relaxed);
                    log_error(io, BAM_ERR_TIMEOUT, q.ssd, q.qid, tmax & q.mask, 0, 0, 0, 2);
                }
                return BAM_ERR_TIMEOUT;
            }
            backoff(spins);
            continue;
        }
        tail = co_shfl_u64<LONE>(group, tail, leader);
        uint64_t nt = tail;
        for (;;) {
            const uint64_t e = nt + rank;
            const bool ready =
                atomic_dev<uint32_t>(q.mark[e & q.mask]).load(cuda::memory_order_acquire) ==
                q.lap(e) + 1u;
            const uint32_t cnt = contiguous_ready(group, co_ballot<LONE>(group, ready));
            nt += cnt;
            if (cnt < p) break;
        }
        if (is_leader) {
            if (nt != tail) {
                ring_doorbell(q.sq_db, static_cast<uint32_t>(nt & q.mask), q.mmio());
                q.st->sq_doorbells += 1;
                tail_ref.store(nt, cuda::memory_order_release);
            }
            unlock(&q.st->sq_lock);
        }
        co_syncwarp<LONE>(group);
    }
}

/// Consume completions from the CQ if nobody else is doing it. Lanes that call
/// together on the same queue cooperate (up to 32 CQEs per step).
template <bool LONE = false>
__device__ __forceinline__ void reap(const bam_io_view& io, const qp_ref& q, uint32_t qpi) {
    const uint32_t active = co_active<LONE>();
    const uint32_t group = co_match<LONE>(active, qpi);
    const int leader = __ffs(group) - 1;
    const bool is_leader = static_cast<int>(lane_id()) == leader;
    const uint32_t rank = __popc(group & lanemask_lt());
    const uint32_t p = __popc(group);
    uint64_t head = 0;
    int got = 0;
    if (is_leader) {
        head = atomic_dev<uint64_t>(q.st->cq_head).load(cuda::memory_order_relaxed);
        const uint32_t dw3 = load_cqe_dw3(q, head & q.mask);
        const uint32_t want = (q.lap(head) & 1u) ^ 1u;
        if (((dw3 >> 16) & 1u) == want && try_lock(&q.st->cq_lock)) {
            head = atomic_dev<uint64_t>(q.st->cq_head).load(cuda::memory_order_relaxed);
            got = 1;
        }
    }
    got = co_shfl<LONE>(group, got, leader);
    if (!got) return;
    head = co_shfl_u64<LONE>(group, head, leader);
    uint64_t h = head;
    for (;;) {
        const uint64_t e = h + rank;
        const uint32_t dw3 = load_cqe_dw3(q, e & q.mask);
        const bool ready = ((dw3 >> 16) & 1u) == ((q.lap(e) & 1u) ^ 1u);
        const uint32_t cnt = contiguous_ready(group, co_ballot<LONE>(group, ready));
        if (rank < cnt) {
            const uint32_t cid = dw3 & 0xffffu;
            const uint32_t sf = dw3 >> 17;
            const bam_cqe& c = q.cq[e & q.mask];
            const uint16_t sqhd = c.sqhd;  // ordered after the acquire of DW3
            bool valid = cid <= q.mask;
            if (valid) {
                // A CQE must name a published, unreleased ticket: mark == seq + 1.
                const uint32_t m = atomic_dev<uint32_t>(q.mark[cid]).load(cuda::memory_order_relaxed);
                const uint32_t s = atomic_dev<uint32_t>(q.seq[cid]).load(cuda::memory_order_relaxed);
                valid = (m == s + 1u) &&
                        atomic_dev<uint32_t>(q.cpl[cid]).load(cuda::memory_order_relaxed) == 0u;
            }
            if (valid && sqhd <= q.mask) {
                // Release: the data the controller wrote (ordered before the CQE, which
                // we acquired) becomes visible to the waiter that acquires cpl.
                atomic_dev<uint32_t>(q.cpl[cid]).store((sf << 16) | 1u, cuda::memory_order_release);
            } else {
                log_error(io, BAM_ERR_PROTOCOL, q.ssd, q.qid, cid, 0, 0, 0, dw3);
            }
            if (rank == cnt - 1) q.st->sq_head = sqhd;
        }
        h += cnt;
        if (cnt < p) break;
    }
    if (is_leader) {
        if (h != head) {
            q.st->completions += h - head;
            atomic_dev<uint64_t>(q.st->cq_head).store(h, cuda::memory_order_relaxed);
            // The CQ slots we consumed may be reused by the controller after this store;
            // all of them were read above.
            ring_doorbell(q.cq_db, static_cast<uint32_t>(h & q.mask), q.mmio());
            q.st->cq_doorbells += 1;
        }
        unlock(&q.st->cq_lock);
    }
    co_syncwarp<LONE>(group);
}

/// Wait for ticket t's completion, release its slot and return its status field
/// through `status` (0 = success). Every wait is bounded by io.timeout_ns.
template <bool LONE = false>
__device__ __forceinline__ status_t wait_ticket(const bam_io_view& io, const qp_ref& q, uint32_t qpi,
                                                uint64_t t, uint32_t& status) {
    const uint32_t s = t & q.mask;
    atomic_dev<uint32_t> cpl(q.cpl[s]);
    deadline dl(io.timeout_ns);
    uint32_t spins = 0;
    uint32_t c;
    while ((c = cpl.load(cuda::memory_order_acquire)) == 0u) {
        reap<LONE>(io, q, qpi);
        if ((c = cpl.load(cuda::memory_order_acquire)) != 0u) break;
        if (atomic_dev<uint64_t>(q.st->failed).load(cuda::memory_order_relaxed) != 0) {
            return BAM_ERR_ABORTED;  // logged by the caller with the command's details
        }
        if (dl.expired()) {
            atomic_dev<uint64_t>(q.st->failed).store(1, cuda::memory_order_relaxed);
            return BAM_ERR_TIMEOUT;
        }
        backoff(spins);
    }
    status = c >> 16;
    cpl.store(0u, cuda::memory_order_relaxed);
    // Release the slot (and CID) to ticket t + D.
    atomic_dev<uint32_t>(q.seq[s]).store(q.lap(t) + 1u, cuda::memory_order_release);
    return OK;
}

}  // namespace bam
