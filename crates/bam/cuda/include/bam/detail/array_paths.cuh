// bam/detail/array_paths.cuh — the paths of bam::array (bam/array.cuh) off its hit path:
// with_line (a group of lanes pins one line, has it filled on a miss, and works in it),
// the pin-per-access read (pinned_read) and access_lanes (the miss path of reads and the
// general path of stores and atomics). Each is a bounded loop that holds no line while it
// waits for another lane's; the comments at each say why it is shaped as it is.
// Internal to the device library (detail/): included by bam/array.cuh.
#pragma once

#include <stdint.h>

#include "../cache.cuh"
#include "../cache_abi.h"
#include "../util.cuh"

namespace bam {

namespace detail {

constexpr uint64_t NO_KEY = ~0ull;


/// Pins `line` of the array `v` describes for a group of lanes (`peers`, a lane mask; every lane of it
/// calls with the same line, `leader` is one of them) with `n` references and calls
/// `use(data)` on every lane of the group; returns false after an error (logged, nothing
/// held, `use` not called). `set`: the lanes that call together, a union of whole groups;
/// every lane of it calls with the same `set` (the loop below runs in step over it, so it
/// must be fixed when the groups are formed: `__activemask()` here could miss a group
/// member that is still behind, e.g. a leader that counted statistics on its own). The
/// call returns when every group of the set is done.
///
/// No lane holds a line while it waits for another lane's slot. Lanes that call together
/// wait for each other at reconvergence points (BSYNC) that the compiler places where it
/// likes; nvcc 13 moved the work after a retry loop below the loop's exit barrier, so a
/// group that had its line kept it pinned while its warp-mates retried, and with as many
/// slots as warps all slots ended up held that way. So the loop is uniform over every
/// calling lane (it ends on a warp vote) and each round has two phases:
///  1. hits: every pending leader pins its line with one atomic; a group whose line is
///     valid does its work (`use`) and releases it right away. A holder here waits only
///     for the other leaders' single atomic.
///  2. misses: the leaders still pending run the slow path (cache_acquire_slow: the fill
///     service fills the line, bam/detail/cache_service.cuh) and wait no longer than
///     busy_retry_ns for it. If other groups of the call are pending too, a leader only
///     waits for its line and drops its pin (RETRY_READY): the next round's phase 1 finds
///     it valid. A group that is pending alone keeps its line and does its work, as
///     nobody of the call waits for it while it holds.
/// At the end of each round a group holds nothing (callers that keep the line after `use`,
/// array_ref and acquire_line, excepted: see their sizing rules). Groups that could not
/// get their line back off and try again, bounded by the cache timeout (then
/// BAM_ERR_TIMEOUT with the line's LBA and detail no-slot or line-busy is in the log).
/// `with_line`'s default for `unpinned`: the group needs its line pinned.
struct needs_pin {
    __device__ __forceinline__ bool operator()() const { return false; }
};

/// ... `unpinned` (reads): called by every lane of a group whose leader just filled the
/// line (or found it valid) and dropped its pins (RETRY_READY); returns true when the
/// lane did its access without a pin (cache_read_unpinned). If every lane of the group
/// did, the group is done, without waiting for the next round to pin the line again: under
/// a heavy miss load a line can be evicted between its fill and that pin, and then it
/// is filled again (random 8-byte reads with a quarter of the data cached made several
/// fills per read that way).
template <typename F, typename U = needs_pin>
__device__ __forceinline__ bool with_line(const bam_array_view& v, uint64_t line, uint32_t set,
                                          uint32_t peers, int leader, uint32_t n, F&& use,
                                          bool has_line = true, U&& unpinned = U{}) {
    using namespace detail;
    const bool is_leader = static_cast<int>(lane_id()) == leader;
    const bool solo = peers == (1u << lane_id());  // a group of one: no shuffle, no sync
    deadline dl(0);  // the cache's timeout, started on the first miss
    // A lane of `set` without a line (has_line false, its whole group alike) only votes.
    bool done = !has_line, ok = !has_line;
    // The group got `addr` (an address, nullptr on error, or a RETRY_* sentinel).
    auto settle = [&](uint64_t addr) {
        if (addr == RETRY_READY) {
            // Valid a moment ago: try the access without a pin (no lane holds anything).
            const bool mine = unpinned();
            if (solo ? mine : __all_sync(peers, mine)) done = ok = true;
            return;
        }
        if (is_retry(reinterpret_cast<char*>(addr))) return;
        done = true;
        if (addr == 0) return;
        ok = true;
        // Memory ordering among the group: the leader's acquire of the line (or of the
        // fill's completion) happens-before every member's access to the data. A shuffle
        // alone does not order memory.
        if (!solo) __syncwarp(peers);
        use(reinterpret_cast<char*>(addr));
    };
    for (uint32_t round = 0;; ++round) {
        // Phase 1: hits.
        unsigned long long old = 0;
        bool hit = false;  // this lane is a leader whose pin found the line ready
        if (!done) {
            uint64_t addr = RETRY_BUSY;  // "not yet" for the group unless the leader hits
            if (is_leader) {
                char* p = cache_try_hit(v, line, n, old, false);
                if (p != nullptr) {
                    addr = reinterpret_cast<uint64_t>(p);
                    hit = true;
                }
            }
            settle(solo ? addr : shfl_u64(peers, addr, leader));
        }
        // The round's hits, one statistics atomic for the call (detail::stat_at).
        const uint32_t hits = __ballot_sync(set, hit);
        if (hits != 0 && static_cast<int>(lane_id()) == __ffs(set) - 1) stat(v, ST_HITS, __popc(hits));
        // Phase 2: misses. A pending leader holds n pins on a line that was not valid.
        const uint32_t pending = __ballot_sync(set, !done && is_leader);
        if (pending == 0) return ok;
        uint64_t addr = 0;
        if (!done) {
            if (is_leader) {
                const bool alone = (pending & (pending - 1)) == 0;
                char* p = cache_acquire_slow(v, line, n, old, dl, true, alone);
                if (is_retry(p) && dl.expired_now()) {
                    // (RETRY_READY until the timeout: the line was evicted each time before
                    // we came back for it, i.e. no slot would keep it.)
                    log_cache_timeout(cache_of(v), v, line,
                                      reinterpret_cast<uintptr_t>(p) == RETRY_BUSY ? BAM_CACHE_ERR_LINE_BUSY
                                                                                   : BAM_CACHE_ERR_NO_SLOT);
                    p = nullptr;
                }
                addr = reinterpret_cast<uint64_t>(p);
            }
            if (!solo) addr = shfl_u64(peers, addr, leader);
            settle(addr);
        }
        if (__all_sync(set, done)) return ok;
        // Back off (64 ns doubling to ~4 us, staggered by lane so that groups spread out);
        // a line that was just filled (RETRY_READY) is pinned again at once.
        if (!done && addr != RETRY_READY) __nanosleep((64u << (round < 6 ? round : 6)) + 32u * lane_id());
    }
}

/// What a pinned read returns: the element and whether it succeeded.
template <typename T>
struct pinned_result {
    T val;
    bool ok;
};

/// The pin-per-access read (bam::array<T>::read_pinned, kept for comparisons with the
/// unpinned hit path), out of line: the lanes of `set` (every one of them calls, each
/// with its own in-range element: line `line`, index `sub` in it) group by line, each
/// group's leader pins its line once (with_line, which has it filled on a miss), the
/// group reads, and the leader releases the line. Statistics: hits and misses
/// (with_line); the caller counts the accesses.
template <typename T>
__device__ __noinline__ pinned_result<T> pinned_read(uint64_t cache, uint32_t id, uint64_t line, uint32_t sub,
                                                     uint32_t set) {
    // The array's view as the host published it (only its cache-wide fields are used):
    // a view argument would make every caller keep an addressable copy of its own.
    const bam_array_view v = detail::view_of(reinterpret_cast<const bam_cache_dev*>(cache), id);
    pinned_result<T> r{T{}, false};
    const uint32_t peers = __match_any_sync(set, line_key(v.id, line));
    const int leader = __ffs(peers) - 1;
    const bool is_leader = static_cast<int>(lane_id()) == leader;
    auto use = [&](char* base) {
        r.val = reinterpret_cast<const T*>(base)[sub];
        // Orders every group member's read before the leader's release.
        __syncwarp(peers);
        if (is_leader) cache_release(v, line, 1, false);
    };
    // A read of a line just filled does not wait to pin it again (see with_line).
    T got{};
    bool unpinned_done = false;
    r.ok = with_line(v, line, set, peers, leader, 1, use, true, [&] {
        unpinned_done = cache_read_unpinned(v, line, sub * static_cast<uint32_t>(sizeof(T)), got);
        return unpinned_done;
    });
    if (unpinned_done) r.val = got;
    return r;
}

/// The miss path of bam::array's reads and the general path of its stores and atomics:
/// the lanes of `set` call together, every one of them with its own in-range element
/// (line `line`, index `sub` in it). Each lane pins its line; once the line is valid it
/// calls `use(T* element)` (a read, a store, an atomic) and releases the line (dirty when
/// `WRITE`) in the same round. A lane whose line is not valid posts it
/// to the fill service if nobody has (it sets BUSY: one request per line) and keeps its
/// pin while it waits: a pin on an invalid line holds no slot, and once the line is
/// filled the pin keeps it in its slot until the lane has used it, at most one round
/// later (without it, under a heavy miss load a line was evicted before its waiters
/// looked, filled again, and so on: a torture test of 32,768 threads on 192 slots timed
/// out). The loop is uniform over `set` and ends on a warp vote that comes after every
/// release (see with_line: no lane keeps a valid line while it waits for another lane).
/// Inlined, and it calls nothing: a few atomics per lane, so the kernel it is in keeps
/// its own register budget. Returns false after an error (logged: by the fill service
/// for a fill that failed, here for a timeout), `use` not called then.
template <typename T, bool WRITE, typename F>
__device__ __forceinline__ bool access_lanes(const bam_array_view& v, uint64_t line, uint32_t sub, uint32_t set,
                                             F&& use) {
    using namespace detail;
    const bam_cache_dev* c = cache_of(v);
    word_ref w = line_word(v, line);
    deadline dl(0);  // the cache's timeout, set on the first wait
    bool pinned = false, requested = false, done = false, ok = false;
    uint32_t spins = 0;
    for (;;) {
        bool hit = false;
        if (!done) {
            // Acquire: a VALID read here makes the fill's data (or a previous writer's
            // stores, through the release sequence) visible.
            const unsigned long long old = pinned ? w.load(cuda::memory_order_acquire)
                                                  : w.fetch_add(1ull, cuda::memory_order_acquire);
            pinned = true;
            if ((old & (VALID | BUSY)) == VALID) {
                use(reinterpret_cast<T*>(slot_ptr(v, old >> 32)) + sub);
                // Release: our access happens-before an evictor's CAS that reads this
                // release sequence. A line that was dirty when pinned stays dirty.
                cache_release(v, line, 1, WRITE && (old & DIRTY) == 0);
                hit = !requested;
                done = ok = true;
            } else {
                if (dl.timeout_ns == 0) dl.timeout_ns = __ldg(&c->timeout_ns);
                if ((old & BUSY) == 0) {
                    // Invalid and not busy: claim it (post its fill), or learn that our
                    // fill failed. A line filled meanwhile is seen by the next round's
                    // acquire.
                    unsigned long long prev = 0;
                    if (claim_fill(v, line, 1, dl, requested, prev) == claim::failed) done = true;
                }
                if (!done && dl.expired()) {
                    // A fill we posted may still complete: BUSY stays with the service.
                    log_cache_timeout(c, v, line, BAM_CACHE_ERR_LINE_BUSY);
                    word_unpin_relaxed(line_word_global(v, line), 1);
                    done = true;
                }
            }
        }
        // The round's hits, one statistics atomic for the call (detail::stat_at).
        const uint32_t hits = __ballot_sync(set, hit);
        if (hits != 0 && static_cast<int>(lane_id()) == __ffs(set) - 1) stat(v, ST_HITS, __popc(hits));
        if (__all_sync(set, done)) return ok;
        if (!done) backoff(spins);
    }
}

}  // namespace detail

}  // namespace bam
