// bam/detail/cache_flush.cuh — the flush (bam_cache_flush in crates/bam/cuda/src/cache.cu):
// writes the dirty lines of the cache's slots back to storage, and on an array's teardown
// drops its lines. A warp works on one slot at a time: lane 0 locks the slot and claims its
// line, the warp writes the line back through the I/O layer, lane 0 settles the slot. A
// line whose write-back failed stays in its slot, valid and dirty (quarantined when the
// device may still read the slot): the data is reported, never dropped.
// Internal to the device library (detail/): compiled into the runtime's cache kernels.
#pragma once

#include <stdint.h>

#include "cache_service.cuh"

namespace bam {

namespace detail {

/// Adds 1 to one of a flush's counts (shared by the flush's warps).
__device__ __forceinline__ void flush_count(uint64_t& field) {
    atomicAdd(reinterpret_cast<unsigned long long*>(&field), 1ull);
}

/// An invalidating flush of array `only_id` first waits for its read-aheads (lane 0
/// waits; the warp meets it at the closing __syncwarp). Why, and the bound: below.
__device__ __forceinline__ void wait_readaheads(const bam_cache_dev* c, uint32_t only_id, uint64_t first,
                                                bam_flush_result* res, uint32_t lane) {
    // Read-aheads of the array may still be in the service's hands (they outlive the
    // kernel that asked for them): a slot they fill after this warp passed it would
    // keep a line of an array that is gone. Wait for them (bounded); if they do not
    // finish, count one pinned line, so that the array's id stays reserved.
    int late = 0;
    if (lane == 0) {
        word_ref pending = prefetching_of(c, only_id);
        deadline dl(__ldg(&c->timeout_ns));
        uint32_t spins = 0;
        // Acquire: reads readahead_done's release, so the fills' tags and words are seen.
        while (pending.load(cuda::memory_order_acquire) != 0) {
            if (dl.expired()) {
                late = 1;
                break;
            }
            backoff(spins);
        }
        if (late && first == 0) flush_count(res->pinned);
    }
    __syncwarp();
}

/// Locks slot tag `tag` for a flush (lane 0), spinning while another holder has it
/// locked, for the cache timeout at most. Returns the tag as it was before the lock
/// (the CAS acquires: the slot's last holder released it), a quarantined or reserved
/// tag as it is, without locking (never unlocked, or a spare with no line), or ~0
/// when the lock timed out.
__device__ __forceinline__ unsigned long long lock_for_flush(const bam_cache_dev* c, unsigned long long& tag_word) {
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> tag(tag_word);
    deadline dl(__ldg(&c->timeout_ns));
    uint32_t spins = 0;
    unsigned long long t;
    for (;;) {
        t = tag.load(cuda::memory_order_relaxed);
        // Quarantined (never unlocked) or a fill service warp's spare (no line): skip.
        if (t & (BAM_TAG_QUARANTINE | BAM_TAG_RESERVED)) break;
        if ((t & BAM_TAG_LOCK) == 0 &&
            tag.compare_exchange_strong(t, t | BAM_TAG_LOCK, cuda::memory_order_acquire, cuda::memory_order_relaxed))
            break;
        if (dl.expired()) {
            t = ~0ull;
            break;
        }
        backoff(spins);
    }
    return t;
}

/// A quarantined slot's line (tag `t`; quarantine_writeback) met by a flush of `only_id`
/// (lane 0): not written, not dropped; counted as failed and logged with its LBA.
__device__ __forceinline__ void report_quarantined(const bam_cache_dev* c, unsigned long long t, uint32_t only_id,
                                                   bam_flush_result* res) {
    const uint32_t id = tag_id(t);
    const uint64_t line = t & BAM_TAG_LINE_MASK;
    if (only_id == 0xffffffffu || id == only_id) {
        flush_count(res->failed);
        uint32_t ssd;
        uint64_t lba;
        const bam_cache_arr& a = arr_desc(c, id);
        locate(a, line, 0, ssd, lba);
        log_error(c->io, BAM_ERR_TIMEOUT, static_cast<uint16_t>(ssd), 0, 0xffff, nvme::OP_WRITE, lba,
                  __ldg(&a.line_lbas), BAM_CACHE_ERR_QUARANTINED);
    }
}

/// Claims the line of slot `s` (tag `t`, locked by lane 0, which calls) for a flush of
/// `only_id`: BUSY set and DIRTY taken with an acquiring CAS on the line word when the
/// line is idle and dirty (or `invalidate`). Returns 1 (write back), 2 (drop only) or 0
/// (skip: another array, or the line busy or pinned, which counts as pinned); `line` and
/// `id`: the tag's.
__device__ __forceinline__ int claim_for_flush(const bam_cache_dev* c, unsigned long long t, uint64_t s,
                                               uint32_t only_id, bool invalidate, bam_flush_result* res,
                                               uint64_t& line, uint32_t& id) {
    int action = 0;
    id = tag_id(t);
    line = t & BAM_TAG_LINE_MASK;
    if (only_id == 0xffffffffu || id == only_id) {
        const bam_cache_arr& ad = arr_desc(c, id);
        // The references resident views hold (Array::make_resident: one a
        // line per guard) do not make a line busy for a write-back; a line
        // may only be dropped with none (an array's teardown, which cannot
        // happen while a guard lives, counts such a line as pinned).
        const unsigned long long base = invalidate ? 0ull : __ldg(&ad.resident);
        word_ref w = desc_word(ad, line);
        unsigned long long cur = w.load(cuda::memory_order_relaxed);
        const bool idle = (cur & (VALID | BUSY)) == VALID && (cur & REFS) == base && (cur >> 32) == s;
        // The claim takes the DIRTY mark with it: a resident view's store that
        // lands during the write-back sees the line clean and marks it again
        // (mark_resident_dirty), so the store is not lost when the write-back
        // ends; every outcome but success puts it back.
        if (idle && (invalidate || (cur & DIRTY)) &&
            w.compare_exchange_strong(cur, (cur | BUSY) & ~static_cast<unsigned long long>(DIRTY),
                                      cuda::memory_order_acquire, cuda::memory_order_relaxed)) {
            action = (cur & DIRTY) ? 1 : 2;
        } else if ((cur & BUSY) || (cur & REFS) > base) {
            flush_count(res->pinned);
        }
    }
    return action;
}

/// Lane 0's part of a flush of slot `s`: locks it (lock_for_flush) and claims its line
/// (claim_for_flush), counting a slot it cannot lock as pinned and reporting a
/// quarantined line. Returns the action for the warp (0 skip, 1 write back, 2 drop
/// only); `t`: the slot's tag as locked (~0: not locked), `line` and `id`: its line.
__device__ __forceinline__ int take_for_flush(const bam_cache_dev* c, unsigned long long* tags, uint64_t s,
                                              uint32_t only_id, bool invalidate, bam_flush_result* res,
                                              unsigned long long& t, uint64_t& line, uint32_t& id) {
    t = lock_for_flush(c, tags[s]);
    if (t == ~0ull) {
        flush_count(res->pinned);
    } else if ((t & BAM_TAG_QUARANTINE) && (t & BAM_TAG_USED)) {
        // A line whose write-back may still be in the device's hands
        // (quarantine_writeback): not written, not dropped; logged with its LBA.
        report_quarantined(c, t, only_id, res);
    } else if (t != 0 && (t & (BAM_TAG_QUARANTINE | BAM_TAG_RESERVED)) == 0) {
        return claim_for_flush(c, t, s, only_id, invalidate, res, line, id);
    }
    return 0;
}

/// Writes the line claimed for a flush (`action` 1; the whole warp) from slot `s` to its
/// SSD or every replica (warp_write, which acquires each completion and fences), unless
/// the array is read-only: refused and logged as in writeback_io. Returns the outcome,
/// OK for a line only dropped (`action` 2).
__device__ __forceinline__ status_t flush_write_back(const bam_cache_dev* c, const bam_cache_arr& a, uint64_t s,
                                                     uint64_t line, int action, uint32_t lane) {
    status_t rc = OK;
    if (action == 1 && (__ldg(&a.flags) & BAM_ARR_F_READ_ONLY)) {
        // A kernel wrote into a read-only array: refused as in writeback_io (the line
        // stays dirty; the flush counts it as failed).
        if (lane == 0) {
            uint32_t ssd;
            uint64_t lba;
            locate(a, line, 0, ssd, lba);
            log_error(c->io, BAM_ERR_INVALID, static_cast<uint16_t>(ssd), 0, 0xffff, nvme::OP_WRITE, lba,
                      __ldg(&a.line_lbas), BAM_CACHE_ERR_READ_ONLY);
        }
        rc = BAM_ERR_INVALID;
    } else if (action == 1) {
        const uint32_t copies = __ldg(&a.layout) == BAM_LAYOUT_STRIPE ? 1u : __ldg(&a.nssd);
        for (uint32_t r = 0; r < copies; ++r) {
            uint32_t ssd;
            uint64_t lba;
            locate(a, line, r, ssd, lba);
            const status_t x = warp_write(c->io, ssd, lba, __ldg(&a.line_lbas), slot_ptr(c, s));
            // A replica the device may still be reading outranks one that failed for
            // good (as in writeback_io): the slot must then stay quarantined.
            if (rc == OK || (io_unsettled(x) && !io_unsettled(rc))) rc = x;
        }
    }
    return rc;
}

/// Settles a flushed slot `s` (lane 0) after its write-back's outcome `rc`: counts it,
/// sets the line word's flags and stores the slot's tag (from `t`, its value when
/// locked): unlocked, emptied (invalidate), or left locked in quarantine. Every settled
/// outcome clears BUSY with a release; see below.
__device__ __forceinline__ void settle_flushed(const bam_cache_dev* c, const bam_cache_arr& a,
                                               unsigned long long* tags, uint64_t s, uint64_t line,
                                               unsigned long long t, int action, status_t rc, bool invalidate,
                                               bam_flush_result* res) {
    word_ref w = desc_word(a, line);
    if (action == 1) {
        stat(c, ST_WRITES, __ldg(&a.layout) == BAM_LAYOUT_STRIPE ? 1u : __ldg(&a.nssd));
        stat(c, ST_WRITEBACKS, 1);
        if (rc == OK) {
            flush_count(res->written);
        } else {
            flush_count(res->failed);
            stat(c, ST_ERRORS, 1);
        }
    }
    // Every settled outcome clears BUSY with a release. A write-back that
    // completed, with success or an error status, read the slot before its
    // completion was posted, and warp_write acquired that completion and then
    // fenced (the wait contract, queue.cuh): the reads happen-before whatever a
    // pin that sees BUSY clear does to the line. A later flusher's or evictor's
    // acquiring CAS on the word reads from this release sequence. A command that
    // timed out may still be in flight: its line keeps BUSY, in quarantine.
    if (io_unsettled(rc)) {
        // Timed out or its queue broke: the device may still read the slot.
        // Quarantined with its line (quarantine_writeback; stored below, BUSY
        // stays), dirty again as an eviction's would be.
        w.fetch_or(DIRTY, cuda::memory_order_relaxed);
        t = quarantine_writeback(t);
    } else if (rc != OK) {
        // The write-back failed (the I/O layer logged it): the slot holds the only
        // copy of the data. Keep the line valid and dirty in its slot, in
        // invalidate mode too (tag unchanged, not dropped), so that a later flush
        // retries it.
        w.fetch_or(DIRTY, cuda::memory_order_relaxed);
        w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
    } else if (invalidate) {
        // Clean or written back: the line leaves the cache; a later pin finds it
        // invalid and reads it from the SSD, after our write.
        w.fetch_and(~static_cast<unsigned long long>(FLAGS), cuda::memory_order_release);
        flush_count(res->dropped);
        t = 0;  // slot becomes empty
    } else {
        // Written back: DIRTY went with the claim; a resident store since set it.
        w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
    }
    // Unlock the slot, or leave it locked in quarantine (release: a slot left
    // empty is filled by a taker that locked it with an acquiring CAS, so only
    // after the write-back's reads of it).
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(tags[s]).store(t, cuda::memory_order_release);
}

}  // namespace detail

/// Flush (or invalidate) the slots this warp is given: slot = first, first + stride...
/// Every lane of a full warp calls. Lines still pinned are counted and skipped.
/// `only_id` restricts the work to one array (0xffffffff: all); `invalidate` also drops
/// the lines from the cache (used when an array goes away), except a line whose
/// write-back failed: it is the only copy of its data, so it stays in its slot, valid and
/// dirty, in both modes (counted in `failed`, not in `dropped`), and a later flush
/// retries it. The host keeps the array's descriptor and line words while slots may
/// still name its lines (`Array::teardown`).
/// Per slot: lane 0 locks it and claims its line (take_for_flush), the warp writes the
/// line back (flush_write_back), lane 0 settles the slot (settle_flushed).
__device__ inline void cache_flush_slots(const bam_cache_dev* c, uint64_t first, uint64_t stride, uint32_t only_id,
                                         bool invalidate, bam_flush_result* res) {
    using namespace detail;
    const uint32_t lane = lane_id();
    if (invalidate && only_id != 0xffffffffu) wait_readaheads(c, only_id, first, res, lane);
    const uint32_t nslots = __ldg(&c->nslots);
    unsigned long long* tags = reinterpret_cast<unsigned long long*>(__ldg(&c->tags));
    for (uint64_t s = first; s < nslots; s += stride) {
        // Lane 0 locks the slot and claims the line; the warp writes it back.
        unsigned long long t = 0;
        int action = 0;  // 0 skip, 1 write back, 2 drop only
        uint64_t line = 0;
        uint32_t id = 0;
        if (lane == 0) action = take_for_flush(c, tags, s, only_id, invalidate, res, t, line, id);
        action = __shfl_sync(0xffffffffu, action, 0);
        if (action == 0) {
            if (lane == 0 && t != ~0ull && (t & (BAM_TAG_QUARANTINE | BAM_TAG_RESERVED)) == 0)
                cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(tags[s]).store(
                    t, cuda::memory_order_release);
            continue;
        }
        line = shfl_u64(0xffffffffu, line, 0);
        id = __shfl_sync(0xffffffffu, id, 0);
        const bam_cache_arr& a = arr_desc(c, id);
        const status_t rc = flush_write_back(c, a, s, line, action, lane);
        if (lane == 0) settle_flushed(c, a, tags, s, line, t, action, rc, invalidate, res);
        __syncwarp();
    }
}

}  // namespace bam
