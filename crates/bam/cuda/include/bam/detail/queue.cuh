// bam/detail/queue.cuh — NVMe I/O queue pairs in GPU memory, shared by thousands of threads.
// Internal to the device library (detail/): kernels use it through bam/io.cuh.
//
// Protocol (per queue pair of `depth` = D entries, D a power of two):
//
//  * Tickets. A submitter takes a ticket t from `state.sq_ticket` (one atomic add per
//    group of lanes of a warp that target the same queue). Ticket t owns SQ slot
//    s = t mod D in lap L = t / D, and uses CID = t mod 2^16: the slot in the low
//    log2(D) bits, the lap's low bits above them (its generation; D <= 32768 leaves at
//    least one bit). Per-slot words (`slots`):
//      mark[s] = L + 1   once ticket t's SQE is written (after a fence: a release)
//      cpl[s]  = (status << 16) | (L mod 2^15) << 1 | 1   once its CQE was consumed: by
//                a reaper for the owner to take, or by the owner itself (a lone waiter,
//                under the CQ lock). Tagged with the lap, never cleared: a completion of
//                an earlier lap can never be taken by a later one.
//      seq[s]  = L + 1   once the ticket's owner took its completion (slot released; a
//                lone waiter that consumed its own CQE stores it under the CQ lock)
//  * A ticket may write its slot when ready(t) and ready(t + 1), where
//    ready(x) := seq[x mod D] >= x / D ("ticket x - D has been released"). The first
//    makes slot and CID free (CIDs are unique per queue while in flight); the second
//    proves ticket t + 1 - D completed, so the controller fetched it and the SQ head
//    (which the CQE's SQHD reported) is at least t + 2 - D: writing tail t + 1 never
//    makes the queue look empty or overrun. At most D - 1 commands are in flight, so
//    the CQ (also D entries) cannot overflow either.
//  * Tail. The word `sq_tail` holds (tail << 20) | P, P = submitters that announced an
//    entry since the holder took over. A submitter publishes its entry (SQE, fence,
//    mark), then announces it with one RMW: a CAS {t, 0} -> {t, 1} when the tail is its
//    own ticket and nobody is pushing (the lone case: one RMW, no wait), else
//    fetch_add(1). If P was 0 it is the *holder*: it advances the tail over the
//    contiguous published entries, rings the doorbell once (a holder whose own entries,
//    or its warp group's, are at the tail rings them first, then once more if it found
//    entries behind them), and leaves with one exchange that stores the new tail and
//    P = 0. A group rings its entries before the scan only when they are exactly the
//    tickets from the tail on: lanes that meet in push_tail may have taken their tickets
//    in different reservations (a warp's lanes diverge between reserve and push), so a
//    lane's ticket can lie below the leader's, already rung by another holder. An
//    earlier form checked only that the group's count equalled its span: with a ticket
//    below the leader's in the group and a hole above it (an entry whose owner was still
//    in wait_slot), it rang past the hole, and the controller fetched the hole's SQE of
//    the previous lap; its CQE named that lap's CID (the stress matrix's 1-SSD, 64-entry,
//    512 B store runs; bam_push_mixed_group in the tests reproduces it).
//    If P was not 0 it waits, reading the word with acquire, until the tail passes its
//    entries, or P is 0 (the holder left: it announces again, and may become the
//    holder), or the entry at the tail is unpublished: then that entry's owner has not
//    announced yet (the acquire would show its mark otherwise) and will, after our
//    announcement, so it sees our mark and pushes through ours. Every check is an RMW
//    or an acquire load on the one word, so there is no store-buffering race between a
//    mark and a separate tail load, and no holder stays on duty while others keep
//    announcing (an earlier form that kept the holder scanning while announcements
//    came in held one submitter for up to a millisecond under steady load).
//  * Completions. `cq_head` holds (head << 1) | LOCK. A waiter whose completion has
//    not been handed to it, and that sees the CQE at the head posted, takes the lock
//    with a CAS on the head it saw, consumes every posted CQE from there (its own: it
//    keeps the status; others': cpl[cid]), then stores the new head with the lock
//    clear. The CQ head doorbell is batched: rung when D/8 CQEs (at least 1) are
//    consumed and not yet rung, or by a waiter that has polled for a while and finds
//    consumed entries unrung (so a controller that stops on a full CQ is always
//    released).
//  * A CQE is a completion only if it names the command that holds its slot now: CID
//    = the ticket seq[s] * D + s (mod 2^16, seq[s] the slot's laps released), published
//    (mark[s] == seq[s] + 1) and not yet completed (cpl[s] not tagged with its lap; for
//    a lone waiter reaping its own, its own CID, and slot words updated before the CQ
//    lock is let go, so that a second copy of the CQE is seen as one). (An earlier form
//    cleared cpl[s] and then released seq[s], and a lone waiter released seq[s] after the
//    unlock: a duplicate consumed in either window passed as the slot's completion and
//    stayed in cpl[s] for the next lap's command, which took it before its data came.)
//    Anything else (a CID of an earlier lap: duplicate or late; of a slot whose command
//    was never published; a second CQE for one command) is a protocol violation: logged
//    with the slot's words, never taken as a completion, and the queue is failed (its
//    waiters end BAM_ERR_ABORTED and their buffers stay quarantined). A reaper consumes
//    at most D - 1 CQEs in one hold: a controller that posts more broke the protocol
//    too. A premature CQE that carries the right CID cannot be told from a real one,
//    here as in every driver.
//
// Memory ordering (libcu++ atomic_ref and PTX fences; see ring_doorbell for MMIO). A
// fence.acq_rel.gpu costs about one L2 round trip, so the single-command path uses as
// few as the ordering needs:
//  * Submit: SQE stores -> fence -> mark store (after the fence: a release of the SQE)
//    -> announcement: the fast path's CAS (acquire), or fetch_add (acq_rel: its fence
//    orders the mark before the announcement). A holder reads marks with acquire loads
//    (the lone form: relaxed loads, then a fence), so it sees the SQE of every entry it
//    pushes; before the doorbell it fences again unless it pushes only its own entries,
//    whose stores precede its own fence. For a controller on this GPU (the simulated
//    array) the doorbell is a relaxed atomic exchange after that fence: a release of the
//    SQEs, and, as an RMW, part of the release sequence of the previous holder's
//    doorbell write, so a controller that reads our value also sees the SQEs the earlier
//    holders rang. The doorbell must also release the holder's own marks, stored after
//    its fence: a reaper that consumes the CQE of a command checks its mark (above), so
//    the controller may not see the doorbell before the mark. (The lone holder once rang
//    its own entries with a relaxed exchange right after that fence: the mark and the
//    doorbell were two relaxed stores with nothing ordering them, the controller could
//    fetch the entry, complete it and have its CQE consumed by another waiter before
//    the mark reached L2, and that waiter dropped the completion as a protocol
//    violation. Users' loads of a few hundred MB lost a completion that way, then the
//    data; bulk.rs reproduces it.) For a real SSD the doorbell is an MMIO store into the BAR
//    (cuMemHostRegister(IOMEMORY)), preceded by fence.sc.sys (__threadfence_system):
//    release/acquire is cumulative in the PTX model, so SQE stores made by other threads
//    happen-before the holder's fence, and a system-scope SC fence orders them before the
//    MMIO store for every observer, the SSD's DMA reads included. The holder's closing
//    RMW is a release: the next holder's doorbell write comes after ours.
//  * The controller writes the CQE's DW0-DW2 before DW3 (phase), and data before the
//    CQE. We load DW3 with acquire (system scope for a real SSD, whose PCIe posted
//    writes arrive in order) before reading DW2 or the data buffer. The reaper fences
//    once after its acquires; its cpl stores, the unlock, the doorbell and the owner's
//    seq store follow that fence, so each is a release. A waiter's wait therefore ends
//    with a fence.acq_rel.gpu after the acquire of its completion: any strong store or
//    RMW the caller makes afterwards releases the data the command transferred (the
//    cache publishes a filled line with a relaxed RMW on that basis).
#pragma once

#include <stdint.h>

#include "../abi.h"
#include "../error.cuh"
#include "../util.cuh"

namespace bam {

// status_t, OK and io_unsettled: bam/error.cuh (public).

// The queue protocol's internals (the public API is in bam/io.cuh).
namespace detail {

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

constexpr uint32_t SQ_TAIL_SHIFT = 20;
constexpr uint64_t SQ_ANNOUNCED = (1ull << SQ_TAIL_SHIFT) - 1;  // low field of sq_tail
constexpr uint64_t CQ_LOCKED = 1;                                // low bit of cq_head

/// fence.acq_rel.gpu (see "Memory ordering" above).
__device__ __forceinline__ void fence_gpu() {
    cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device);
}

/// The fence a reaper issues after its CQE loads: system scope for a real SSD.
__device__ __forceinline__ void fence_completions(const qp_ref& q) {
    if (q.mmio()) cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_system);
    else fence_gpu();
}

/// Write a doorbell. `fenced`: the caller issued fence_gpu() after every acquire whose
/// data this doorbell must carry itself (fence + relaxed write is a release). See the
/// ordering argument at the top of this file.
__device__ __forceinline__ void ring_doorbell(uint64_t db, uint32_t value, bool mmio, bool fenced) {
    if (mmio) {
        // fence.sc.sys: every store this thread has observed (the SQEs other threads
        // published, acquired through their marks) and every CQE it has consumed is
        // ordered before the MMIO store below, for all observers.
        __threadfence_system();
        // Uncached store into the BAR mapping: one 32-bit PCIe posted write.
        *reinterpret_cast<volatile uint32_t*>(db) = value;
    } else {
        // An exchange, not a store: as an RMW it continues the release sequence of the
        // previous doorbell write, so a controller that acquires our value also
        // synchronizes with the earlier holders (whose SQEs it may fetch now).
        atomic_dev<uint32_t>(*reinterpret_cast<uint32_t*>(db))
            .exchange(value, fenced ? cuda::memory_order_relaxed : cuda::memory_order_release);
    }
}

/// DW3 of CQ entry `idx` (CID, status, phase) with `order` (system scope for a real SSD).
__device__ __forceinline__ uint32_t load_cqe_dw3(const qp_ref& q, uint32_t idx,
                                                 cuda::memory_order order = cuda::memory_order_acquire) {
    uint32_t* p = reinterpret_cast<uint32_t*>(&q.cq[idx]) + 3;
    if (q.mmio()) return atomic_sys<uint32_t>(*p).load(order);
    return atomic_dev<uint32_t>(*p).load(order);
}

/// Whether CQE DW3 `dw3` at absolute CQ position `e` has been posted (phase of its lap).
__device__ __forceinline__ bool cqe_posted(const qp_ref& q, uint64_t e, uint32_t dw3) {
    return ((dw3 >> 16) & 1u) == ((q.lap(e) & 1u) ^ 1u);
}

/// The command id of ticket `t`: its slot and the low bits of its lap (the protocol above).
__device__ __forceinline__ uint16_t cid_of(uint64_t t) { return static_cast<uint16_t>(t); }

/// Statistics counter (fire-and-forget reduction; nothing waits for it).
__device__ __forceinline__ void count(uint64_t& field, uint64_t v) {
    atomicAdd(reinterpret_cast<unsigned long long*>(&field), static_cast<unsigned long long>(v));
}

/// Both slot-release tests for ticket t (see the protocol above), with both loads in
/// flight together. The acquire on seq[t] orders the SQE stores that follow after the
/// release of ticket t - D (its slot and CID); seq[t + 1] only counts.
__device__ __forceinline__ bool slots_free(const qp_ref& q, uint64_t t) {
    const uint32_t s1 = atomic_dev<uint32_t>(q.seq[(t + 1) & q.mask]).load(cuda::memory_order_relaxed);
    const uint32_t s0 = atomic_dev<uint32_t>(q.seq[t & q.mask]).load(cuda::memory_order_acquire);
    return static_cast<int32_t>(s0 - q.lap(t)) >= 0 && static_cast<int32_t>(s1 - q.lap(t + 1)) >= 0;
}

/// The lanes of the calling warp that work on queue pair `qpi` together (LONE: the
/// calling lane alone), with their leader (the lowest lane) and each lane's rank.
template <bool LONE>
struct queue_group {
    uint32_t mask;   // the group's lanes
    int leader;      // its lowest lane
    bool is_leader;  // this lane is the leader
    uint32_t rank;   // lanes of the group below this one
    uint32_t size;   // lanes in the group

    __device__ __forceinline__ explicit queue_group(uint32_t qpi) {
        mask = co_match<LONE>(co_active<LONE>(), qpi);
        leader = __ffs(mask) - 1;
        is_leader = static_cast<int>(lane_id()) == leader;
        rank = __popc(mask & lanemask_lt());
        size = __popc(mask);
    }
};

/// Reserve `k` consecutive tickets on queue `qpi`. Lanes of a warp that reserve on the
/// same queue at the same time share one atomic. Any set of active lanes may call.
template <bool LONE = false>
__device__ __forceinline__ uint64_t reserve_tickets(const qp_ref& q, uint32_t qpi, uint32_t k) {
    const queue_group<LONE> g(qpi);
    const uint32_t peers = g.mask;
    const int leader = g.leader;
    const uint32_t lane = lane_id();
    uint32_t prefix = 0, total = 0;
    if (co_all<LONE>(peers, k == 1u)) {
        prefix = g.rank;
        total = g.size;
    } else {
        for (uint32_t m = peers; m != 0; m &= m - 1) {
            const int src = __ffs(m) - 1;
            const uint32_t kk = co_shfl<LONE>(peers, k, src);
            if (static_cast<uint32_t>(src) < lane) prefix += kk;
            total += kk;
        }
    }
    uint64_t base = 0;
    if (g.is_leader) {
        base = atomic_dev<unsigned long long>(*reinterpret_cast<unsigned long long*>(&q.st->sq_ticket))
                   .fetch_add(total, cuda::memory_order_relaxed);
    }
    base = co_shfl_u64<LONE>(peers, base, leader);
    return base + prefix;
}

/// Wait until ticket t may write its slot (see the protocol above).
__device__ __forceinline__ status_t wait_slot(const bam_io_view& io, const qp_ref& q, uint64_t t,
                                              uint8_t opcode, uint64_t lba) {
    if (slots_free(q, t)) return OK;
    deadline dl(io.timeout_ns);
    uint32_t spins = 0;
    while (!slots_free(q, t)) {
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

/// Write the SQE for ticket t (not visible yet: see publish_marks).
__device__ __forceinline__ void write_sqe(const qp_ref& q, uint64_t t, const bam_sqe& e) {
    uint4* dst = reinterpret_cast<uint4*>(q.sq + (t & q.mask));
    const uint4* src = reinterpret_cast<const uint4*>(&e);
#pragma unroll
    for (int i = 0; i < 4; ++i) dst[i] = src[i];
}

/// Publish the SQEs of tickets t0 .. t0 + n - 1 written by this thread: one fence for
/// all, then their marks (each mark store, after the fence, is a release of its SQE).
__device__ __forceinline__ void publish_marks(const qp_ref& q, uint64_t t0, uint32_t n) {
    fence_gpu();
    for (uint32_t i = 0; i < n; ++i)
        atomic_dev<uint32_t>(q.mark[(t0 + i) & q.mask]).store(q.lap(t0 + i) + 1u, cuda::memory_order_relaxed);
}

/// The absolute tail from the 44-bit field of sq_tail, given a ticket `near` within
/// 2^43 of it (any ticket of an entry not yet released is within one queue depth).
__device__ __forceinline__ uint64_t abs_tail(uint64_t field, uint64_t near) {
    constexpr uint32_t bits = 64 - SQ_TAIL_SHIFT;
    const uint64_t d = (field - near) & ((1ull << bits) - 1);
    const uint64_t sign = 1ull << (bits - 1);
    return near + ((d ^ sign) - sign);  // sign-extended difference
}

/// Announce this lane's published entries t0 .. t0 + n - 1 (publish_marks done) and see
/// them rung (the combining protocol above). A holder makes one pass and leaves; an
/// announcer that finds a holder busy waits (bounded by io.timeout_ns) until the tail
/// passes its entries, the holder has left (then it announces again), or the entry at
/// the tail is unpublished (its owner will push through ours). Lanes that call together
/// on the same queue announce with one RMW by their leader and scan up to 32 marks per
/// step; LONE: a single thread, no warp intrinsic.
template <bool LONE = false>
__device__ __forceinline__ status_t push_tail(const bam_io_view& io, const qp_ref& q, uint32_t qpi, uint64_t t0,
                                              uint32_t n) {
    const queue_group<LONE> g(qpi);
    const uint32_t group = g.mask, rank = g.rank, p = g.size;
    const int leader = g.leader;
    const bool is_leader = g.is_leader;
    atomic_dev<unsigned long long> word(*reinterpret_cast<unsigned long long*>(&q.st->sq_tail));
    const uint64_t group_first = co_shfl_u64<LONE>(group, t0, leader);  // the leader's first ticket
    const uint64_t group_end = co_reduce_max_u64<LONE>(group, t0 + n);  // past the group's last one
    // The group's marks (each after its lane's fence) happen-before the leader's RMW.
    co_syncwarp<LONE>(group);
    // 0: done, 1: holder (the word's value in `old`), 2: wait for the holder, 3: timeout.
    int action = 0;
    uint64_t old = 0;
    if (is_leader) {
        // Fast path: our ticket is the tail and nobody is pushing. The CAS follows our
        // fence, which ordered our mark; its acquire reads the previous holder's closing
        // release (that holder's doorbell write comes before ours).
        unsigned long long expect = static_cast<unsigned long long>(group_first) << SQ_TAIL_SHIFT;
        if (word.compare_exchange_strong(expect, expect + 1ull, cuda::memory_order_acquire,
                                         cuda::memory_order_relaxed)) {
            old = expect;
            action = 1;
        } else if (abs_tail(expect >> SQ_TAIL_SHIFT, group_first) >= group_end) {
            action = 0;  // a holder saw our marks and rang them already
        } else {
            old = word.fetch_add(1ull, cuda::memory_order_acq_rel);
            action = (old & SQ_ANNOUNCED) == 0 ? 1 : 2;
        }
    }
    action = co_shfl<LONE>(group, action, leader);
    if (action == 0) return OK;
    if (action == 2) {
        // Wait (leader only). Acquire: the marks of everyone whose announcement precedes
        // the value read are visible, so an unpublished mark at the tail means its owner
        // has not announced yet, and will see our mark when it does.
        if (is_leader) {
            deadline dl(io.timeout_ns);
            uint32_t spins = 0;
            for (;;) {
                const uint64_t w = word.load(cuda::memory_order_acquire);
                const uint64_t tail = abs_tail(w >> SQ_TAIL_SHIFT, group_first);
                if (tail >= group_end) {
                    action = 0;
                    break;
                }
                if (atomic_dev<uint32_t>(q.mark[tail & q.mask]).load(cuda::memory_order_relaxed) != q.lap(tail) + 1u) {
                    action = 0;  // the owner of the entry at the tail will push past ours
                    break;
                }
                if ((w & SQ_ANNOUNCED) == 0) {
                    old = word.fetch_add(1ull, cuda::memory_order_acq_rel);  // the holder left: announce again
                    if ((old & SQ_ANNOUNCED) == 0) {
                        action = 1;
                        break;
                    }
                    continue;
                }
                if (dl.expired()) {
                    atomic_dev<uint64_t>(q.st->failed).store(1, cuda::memory_order_relaxed);
                    log_error(io, BAM_ERR_TIMEOUT, q.ssd, q.qid, group_first & q.mask, 0, 0, 0, 2);
                    action = 3;
                    break;
                }
                backoff(spins);
            }
        }
        action = co_shfl<LONE>(group, action, leader);
        if (action == 3) return BAM_ERR_TIMEOUT;
        if (action == 0) return OK;
    }
    // Holder: one pass over the contiguous published entries from the tail.
    old = co_shfl_u64<LONE>(group, old, leader);
    const uint64_t tail = abs_tail(old >> SQ_TAIL_SHIFT, group_first);
    co_syncwarp<LONE>(group);  // the group's mark loads follow the leader's acquire
    uint64_t nt = tail;
    uint64_t rung = tail;  // the doorbell value we wrote last (tail: none yet)
    bool foreign = true;   // pushing entries whose SQEs our own fence did not cover
    // Our entries (the group's) at the tail: ring them at once, so that the controller
    // starts while we look for entries published behind them (whose owners have not
    // announced yet: they find us gone, or their entries rung). Only when the entries are
    // exactly group_first .. group_end - 1, which takes both tests: every lane's tickets
    // at or above the leader's, and their count equal to the span. A lane that reserved
    // and then left (its wait_slot failed) leaves a hole; and lanes that took their
    // tickets in different reservations (a warp's lanes that diverged and met again here)
    // may hold tickets below the leader's, already rung by another holder, whose count
    // then fills the span in place of a hole ("Tail" in the protocol above). Only the
    // scan below may stop at a hole. Each lane's SQE and mark precede, through the warp
    // barrier above, the leader's doorbell write, which is a release (cumulative over the
    // other lanes' stores): the marks were stored after the lanes' fences, and the CQE's
    // reaper checks them (see "Memory ordering").
    if (tail == group_first && (LONE || (co_all<LONE>(group, t0 >= group_first) &&
                                         group_first + co_reduce_add<LONE>(group, n) == group_end))) {
        if (is_leader) {
            ring_doorbell(q.sq_db, static_cast<uint32_t>(group_end & q.mask), q.mmio(), false);
            count(q.st->sq_doorbells, 1);
        }
        nt = rung = group_end;
    }
    if constexpr (LONE) {
        // Four relaxed mark loads in flight at a time; the fence before the doorbell makes
        // them acquires where it matters (other threads' entries).
        for (;;) {
            uint32_t m[4];
#pragma unroll
            for (int k = 0; k < 4; ++k)
                m[k] = atomic_dev<uint32_t>(q.mark[(nt + k) & q.mask]).load(cuda::memory_order_relaxed);
            uint32_t cnt = 0;
            while (cnt < 4 && m[cnt] == q.lap(nt + cnt) + 1u) ++cnt;
            nt += cnt;
            if (cnt < 4) break;
        }
        foreign = !(rung >= t0 && nt <= t0 + n);
    } else {
        for (;;) {
            const uint64_t e = nt + rank;
            const bool ready =
                atomic_dev<uint32_t>(q.mark[e & q.mask]).load(cuda::memory_order_acquire) == q.lap(e) + 1u;
            const uint32_t cnt = contiguous_ready(group, co_ballot<LONE>(group, ready));
            nt += cnt;
            if (cnt < p) break;
        }
        co_syncwarp<LONE>(group);  // the lanes' acquires happen-before the leader's fence
    }
    if (is_leader) {
        if (nt != rung) {
            if (foreign) fence_gpu();
            ring_doorbell(q.sq_db, static_cast<uint32_t>(nt & q.mask), q.mmio(), true);
            count(q.st->sq_doorbells, 1);
        }
        // Leave: the new tail, and nobody announced. Those who announced during our pass
        // wait for exactly this (or for the tail to pass them) and announce again, so
        // one of them takes over; no holder stays on duty while others keep coming.
        // Release: our doorbell writes precede the next holder's.
        word.exchange(static_cast<unsigned long long>(nt) << SQ_TAIL_SHIFT, cuda::memory_order_release);
    }
    co_syncwarp<LONE>(group);
    return OK;
}

/// A protocol violation by the controller on queue `q`: logged with `dw3` (the CQE's, or
/// 0), `why` (BAM_PROTO_*) and the words `lba`, `nlb` it says, and the queue is failed
/// (every waiter ends BAM_ERR_ABORTED; their buffers stay quarantined, since the device
/// broke the protocol).
__device__ inline __noinline__ void protocol_violation(const bam_io_view& io, const qp_ref& q, uint32_t cid,
                                                       uint8_t why, uint64_t lba, uint32_t nlb, uint32_t dw3) {
    atomic_dev<uint64_t>(q.st->failed).store(1, cuda::memory_order_relaxed);
    log_error(io, BAM_ERR_PROTOCOL, q.ssd, q.qid, cid, why, lba, nlb, dw3);
}

/// cpl[] of the completion of a command of lap `lap` with status field `status_field`.
__device__ __forceinline__ uint32_t cpl_word(uint32_t lap, uint32_t status_field) {
    return (status_field << 16) | ((lap & 0x7fffu) << 1) | 1u;
}

/// Whether cpl[] word `c` holds the completion of lap `lap`'s command.
__device__ __forceinline__ bool cpl_done(uint32_t c, uint32_t lap) {
    return (c & 1u) != 0 && ((c >> 1) & 0x7fffu) == (lap & 0x7fffu);
}

/// Hand the CQE at CQ index `idx`, DW3 `dw3`, to its owner through cpl[] (after the
/// reaper's fence: a release) if it names the command that holds its slot (see the
/// protocol above) and its SQ head lies in the queue, else a protocol violation whose log
/// entry says what the queue held for the slot (BAM_PROTO_NO_COMMAND) or the SQ head.
__device__ __forceinline__ void hand_over(const bam_io_view& io, const qp_ref& q, uint32_t idx, uint32_t dw3) {
    const uint32_t cid = dw3 & 0xffffu;
    const uint32_t s = cid & q.mask;
    const uint32_t m = atomic_dev<uint32_t>(q.mark[s]).load(cuda::memory_order_relaxed);
    const uint32_t sq = atomic_dev<uint32_t>(q.seq[s]).load(cuda::memory_order_relaxed);
    const uint32_t c = atomic_dev<uint32_t>(q.cpl[s]).load(cuda::memory_order_relaxed);
    const uint32_t sqhd = q.cq[idx].sqhd;  // after the reaper's fence: the CQE's own
    // The slot's current command: ticket sq * D + s.
    const uint64_t t = (static_cast<uint64_t>(sq) << q.shift) | s;
    if (sqhd > q.mask) {
        protocol_violation(io, q, cid, BAM_PROTO_SQ_HEAD, 0, sqhd, dw3);
    } else if (cid == cid_of(t) && m == sq + 1u && !cpl_done(c, sq)) {
        atomic_dev<uint32_t>(q.cpl[s]).store(cpl_word(sq, dw3 >> 17), cuda::memory_order_relaxed);
    } else {
        protocol_violation(io, q, cid, BAM_PROTO_NO_COMMAND, (static_cast<uint64_t>(m) << 32) | sq, c, dw3);
    }
}

/// DW3 of the CQ entries at absolute positions head .. head + 3, relaxed, in one round
/// trip (a lone reaper's fence after taking the lock makes them acquires).
__device__ __forceinline__ void load_cqe_dw3x4(const qp_ref& q, uint64_t head, uint32_t (&d)[4]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) d[k] = load_cqe_dw3(q, (head + k) & q.mask, cuda::memory_order_relaxed);
}

/// What a lone reaper reads of the CQ before it takes the lock: DW3 of the four entries
/// from `head` and cq_rung (relaxed, all in one round trip).
struct cq_peek {
    uint32_t dw3[4];
    uint64_t rung;
};

__device__ __forceinline__ cq_peek peek_cq(const qp_ref& q, uint64_t head) {
    cq_peek peek;
    load_cqe_dw3x4(q, head, peek.dw3);
    peek.rung = atomic_dev<unsigned long long>(*reinterpret_cast<unsigned long long*>(&q.st->cq_rung))
                  .load(cuda::memory_order_relaxed);
    return peek;
}

/// Consume posted completions if the reaper lock is free (see the protocol above).
/// Returns true if the CQE of `own` (the caller's ticket, LONE only) was consumed here,
/// with its status in `own_status`; other CQEs go to their owners through cpl[].
/// `ring_idle`: when nothing is posted, ring the CQ head doorbell for consumed entries
/// not yet rung. Lanes that call together on the same queue cooperate (up to 32 CQEs
/// per step; their own completions then also go through cpl[]). When it consumed
/// anything, the calling lanes' last fence follows every acquire (the wait contract).
/// `head_seen`: the cq_head word as the caller read it (relaxed, together with its cpl
/// word). `peek` (LONE, when `peeked`): DW3 of the four CQ entries from head
/// head_seen >> 1 and cq_rung, read (relaxed) in the caller's round trip, so that reap
/// does not read them again.
template <bool LONE = false>
__device__ __forceinline__ bool reap(const bam_io_view& io, const qp_ref& q, uint32_t qpi, uint64_t own,
                                     bool ring_idle, uint32_t& own_status, uint64_t head_seen, bool peeked = false,
                                     cq_peek peek = cq_peek{}) {
    const queue_group<LONE> g(qpi);
    const uint32_t group = g.mask, rank = g.rank, p = g.size;
    const int leader = g.leader;
    const bool is_leader = g.is_leader;
    atomic_dev<unsigned long long> word(*reinterpret_cast<unsigned long long*>(&q.st->cq_head));
    atomic_dev<unsigned long long> rung_ref(*reinterpret_cast<unsigned long long*>(&q.st->cq_rung));
    uint64_t head = 0;
    int got = 0;  // 0: nothing, 1: consume, 2: ring only
    uint32_t d[4] = {0, 0, 0, 0};
    uint64_t rung = 0;  // read before the lock: at most older than the truth (it only grows)
    if (is_leader) {
        if ((head_seen & CQ_LOCKED) == 0) {
            head = head_seen >> 1;
            if constexpr (LONE) {
                // The head entry and the three behind it (read by the caller, or now).
                const cq_peek at = peeked ? peek : peek_cq(q, head);
#pragma unroll
                for (int k = 0; k < 4; ++k) d[k] = at.dw3[k];
                rung = at.rung;
            } else {
                d[0] = load_cqe_dw3(q, head & q.mask);
                rung = rung_ref.load(cuda::memory_order_relaxed);
            }
            const bool posted = cqe_posted(q, head, d[0]);
            if (posted || (ring_idle && rung != head)) {
                unsigned long long expect = head_seen;
                if (word.compare_exchange_strong(expect, head_seen | CQ_LOCKED, cuda::memory_order_acquire,
                                                 cuda::memory_order_relaxed))
                    got = posted ? 1 : 2;
            }
        }
    }
    got = co_shfl<LONE>(group, got, leader);
    if (!got) return false;
    head = co_shfl_u64<LONE>(group, head, leader);
    uint64_t h = head;
    bool took = false;
    if (got == 1) {
        co_syncwarp<LONE>(group);  // the group's CQE loads follow the leader's acquire
        if constexpr (LONE) {
            for (bool first = true;; first = false) {
                if (!first) load_cqe_dw3x4(q, h, d);
                uint32_t cnt = 0;
                while (cnt < 4 && cqe_posted(q, h + cnt, d[cnt])) ++cnt;
                // Acquire for these CQEs (and their data); release for the hand-overs,
                // the doorbell and the unlock below, and for the caller (the contract).
                fence_completions(q);
                for (uint32_t k = 0; k < cnt; ++k) {
                    if ((d[k] & 0xffffu) == cid_of(own) && took) {
                        // Our CID a second time in this hold.
                        protocol_violation(io, q, cid_of(own), BAM_PROTO_NO_COMMAND, 0, 0, d[k]);
                    } else if ((d[k] & 0xffffu) == cid_of(own)) {
                        // Our CID, and we are in flight (cpl was clear): ours.
                        took = true;
                        own_status = d[k] >> 17;
                        // Completed and released before the unlock (after the fence above:
                        // releases), so that a second copy of this CQE, in this hold or
                        // the next reaper's, names a completed command.
                        const uint32_t s = own & q.mask;
                        atomic_dev<uint32_t>(q.cpl[s]).store(cpl_word(q.lap(own), own_status),
                                                             cuda::memory_order_relaxed);
                        atomic_dev<uint32_t>(q.seq[s]).store(q.lap(own) + 1u, cuda::memory_order_relaxed);
                    } else {
                        hand_over(io, q, (h + k) & q.mask, d[k]);
                    }
                }
                h += cnt;
                if (h - head >= q.mask + 1u) {
                    // More than D - 1 CQEs posted at once: the controller broke the protocol.
                    protocol_violation(io, q, 0xffffu, BAM_PROTO_CQ_FLOOD, h - head, 0, 0);
                    break;
                }
                if (cnt < 4) break;
            }
        } else {
            for (;;) {
                const uint64_t e = h + rank;
                const uint32_t dw3 = load_cqe_dw3(q, e & q.mask);
                const uint32_t cnt = contiguous_ready(group, co_ballot<LONE>(group, cqe_posted(q, e, dw3)));
                // Every lane fences after the group's acquires: the leader's fence covers
                // the whole group's CQ reads for its doorbell and unlock below.
                co_syncwarp<LONE>(group);
                fence_completions(q);
                if (rank < cnt) {
                    hand_over(io, q, e & q.mask, dw3);
                    if (rank == cnt - 1) q.st->sq_head = q.cq[e & q.mask].sqhd;
                }
                h += cnt;
                if (h - head >= q.mask + 1u) {
                    // More than D - 1 CQEs posted at once: the controller broke the protocol.
                    if (is_leader) protocol_violation(io, q, 0xffffu, BAM_PROTO_CQ_FLOOD, h - head, 0, 0);
                    break;
                }
                if (cnt < p) break;
            }
        }
    } else if (is_leader) {
        fence_completions(q);  // ring only: our doorbell releases the reads of earlier holders
    }
    if (is_leader) {
        if (h != head) count(q.st->completions, h - head);
        // `rung` may be older than the last ring (then we ring early: harmless); reading
        // it again here would put another L2 round trip on the waiter's path.
        const uint64_t every = q.mask >= 8u ? (q.mask + 1u) / 8u : 1u;
        if (h - rung >= every || (got == 2 && h != rung)) {
            ring_doorbell(q.cq_db, static_cast<uint32_t>(h & q.mask), q.mmio(), true);
            rung_ref.store(h, cuda::memory_order_relaxed);
            count(q.st->cq_doorbells, 1);
        }
        word.store(h << 1, cuda::memory_order_relaxed);  // unlock; after the fence: a release
    }
    co_syncwarp<LONE>(group);
    return took;
}

/// Wait for ticket t's completion, release its slot and return its status field
/// through `status` (0 = success). Every wait is bounded by io.timeout_ns. On OK it
/// returns after a fence.acq_rel that follows the acquire of the completion (the
/// contract at the top of this file).
template <bool LONE = false>
__device__ __forceinline__ status_t wait_ticket(const bam_io_view& io, const qp_ref& q, uint32_t qpi,
                                                uint64_t t, uint32_t& status) {
    const uint32_t s = t & q.mask;
    atomic_dev<uint32_t> cpl(q.cpl[s]);
    atomic_dev<uint32_t> seq(q.seq[s]);
    deadline dl(io.timeout_ns);
    uint32_t spins = 0;
    atomic_dev<unsigned long long> head_word(*reinterpret_cast<unsigned long long*>(&q.st->cq_head));
    atomic_dev<uint64_t> failed(q.st->failed);
    // LONE: the CQ entries at the head seen on the previous poll are read together with
    // cpl and the head word, so that a poll costs one round trip, not two (these, then
    // reap's CQE loads). They serve when the head word has not changed since: CQ
    // positions are absolute, so an equal word means the same unlocked head, and the
    // phase tells whether each entry is posted in the head's lap. (Kept in registers: a
    // first form passed them by pointer, which put them in local memory, and a miss took
    // longer than with two round trips per poll.)
    uint64_t head_seen_prev = CQ_LOCKED;  // locked: nothing to peek at
    // While the command runs:
    if constexpr (LONE) head_seen_prev = head_word.load(cuda::memory_order_relaxed);
    for (;;) {
        // All loads in flight together (relaxed: no L1 invalidation between them).
        const uint32_t c = cpl.load(cuda::memory_order_relaxed);
        const uint64_t head_seen = head_word.load(cuda::memory_order_relaxed);
        const uint64_t fail = failed.load(cuda::memory_order_relaxed);
        cq_peek peek{};
        if constexpr (LONE) {
            if ((head_seen_prev & CQ_LOCKED) == 0) peek = peek_cq(q, head_seen_prev >> 1);
        }
        if (cpl_done(c, q.lap(t))) {
            status = c >> 16;
            // Release the slot (and CID) to ticket t + D (cpl keeps our lap's tag). The
            // fence of this release store also makes the relaxed load of cpl above an
            // acquire (of the reaper's release, and through it of the data): it is the
            // one the contract promises.
            seq.store(q.lap(t) + 1u, cuda::memory_order_release);
            return OK;
        }
        uint32_t status_field = 0;
        const bool peeked = LONE && (head_seen_prev & CQ_LOCKED) == 0 && head_seen == head_seen_prev;
        head_seen_prev = head_seen;
        if (reap<LONE>(io, q, qpi, t, spins >= 8, status_field, head_seen, peeked, peek)) {
            status = status_field;  // reap released the slot under the CQ lock
            return OK;
        }
        if (fail != 0) return BAM_ERR_ABORTED;  // logged by the caller with the command's details
        if (dl.expired()) {
            failed.store(1, cuda::memory_order_relaxed);
            return BAM_ERR_TIMEOUT;
        }
        backoff(spins);
    }
}

}  // namespace detail

}  // namespace bam
