// bam/detail/cache_service.cuh — the fill service, the persistent kernel of the cache
// (crates/bam/cuda/src/cache.cu) that reads the lines threads miss on, and the write-back
// helpers it shares with the flush (bam/detail/cache_flush.cuh).
// Internal to the device library (detail/): compiled into the runtime's cache kernels.
//
// The fill service is a persistent kernel (bam_cache_fill_service), started with the
// cache and stopped when it goes away. A thread that misses sets the line's BUSY bit and
// posts (array id, line) to the fill ring (detail::post_fill, bam/cache.cuh); a
// service thread takes the request (take_requests), takes a slot for the line (take_slot:
// the clock, evicting a victim and writing it back if dirty), reads the line into it
// through the I/O layer and publishes it (serve_fills). A warp of the service takes up to
// 32 requests at a time (take_requests) and submits their reads together, so the service
// has as many fills in flight as it has threads, and a warp's commands share one ticket
// atomic and one doorbell per queue. (A first form served one request per thread on its
// own, each lane with its own ticket and doorbell: the lanes of a warp contended for the
// tail of one queue, and misses ran many times slower than fills done by the missing
// threads themselves.)
//
// Why a service: a fill is the whole I/O path (building a command, the queue's tickets and
// doorbell, the bounded wait for its completion), and a kernel gets the registers of the
// most demanding function it may call. With the fill inside every bam::array access, every
// ported kernel ran with the I/O path's register count and a few warps per SM, or spilled
// its own loop to local memory under a register cap; now the I/O code runs only here.
#pragma once

#include <stdint.h>

#include "../cache.cuh"
#include "fill_queue.cuh"
#include "../io.cuh"

namespace bam {

namespace detail {

/// SSD and LBA a fill of `line` reads: replicated arrays read the replica line % nssd,
/// so that reads spread over the SSDs.
__device__ __forceinline__ void fill_source(const bam_array_view& v, uint64_t line, uint32_t& ssd, uint64_t& lba) {
    locate(v, line, v.nssd == 1 ? 0u : static_cast<uint32_t>(line % v.nssd), ssd, lba);
}

/// Writes `line` from `src` to its SSD (or every replica). One thread. Out of line: only
/// dirty evictions call it, and inlined it was a second copy of the whole I/O path inside
/// the miss path (3,694 instead of 5,965 SASS lines for cache_acquire_slow).
__device__ inline __noinline__ status_t writeback_io(const bam_cache_dev* c, const bam_cache_arr& a, uint64_t line,
                                        char* src) {
    if (a.flags & BAM_ARR_F_READ_ONLY) {
        // A kernel wrote into a read-only array (one that other GPUs may cache too): the
        // line is not written (it stays dirty, and flush and close report it).
        uint32_t ssd;
        uint64_t lba;
        locate(a, line, 0, ssd, lba);
        log_error(c->io, BAM_ERR_INVALID, static_cast<uint16_t>(ssd), 0, 0xffff, nvme::OP_WRITE, lba,
                  a.line_lbas, BAM_CACHE_ERR_READ_ONLY);
        return BAM_ERR_INVALID;
    }
    const uint32_t copies = a.layout == BAM_LAYOUT_STRIPE ? 1u : a.nssd;
    status_t rc = OK;
    for (uint32_t r = 0; r < copies; ++r) {
        uint32_t ssd;
        uint64_t lba;
        locate(a, line, r, ssd, lba);
        stat(c, ST_WRITES, 1);
        const status_t x = rw_sync<true>(c->io, nvme::OP_WRITE, ssd, lba, a.line_lbas, src);
        // A copy the device may still be reading outranks one that failed for good.
        if (rc == OK || (io_unsettled(x) && !io_unsettled(rc))) rc = x;
    }
    stat(c, ST_WRITEBACKS, 1);
    return rc;
}


/// The tag that takes the slot whose tag was `owner` (locked by the caller) out of the
/// cache for good, with its line still in it, after that line's write-back timed out or
/// its queue broke (the caller stores it with a release and leaves BUSY set):
/// the device may still read the slot for that write. The line word keeps VALID, DIRTY
/// and BUSY forever, so no pin succeeds (readers and writers of the line end in a cache
/// timeout error, never in data that a late write could tear), no fill reads an older
/// copy of the line from the SSD into another slot, and the slot data, the only sure copy
/// of the line, stays as it was. The tag keeps naming the line (LOCK | QUARANTINE |
/// owner), so every flush counts it as failed and the host keeps the array's id and LBAs
/// reserved: the data is reported, never dropped. (Recovery needs the controller reset,
/// which only the host can do.)
__device__ __forceinline__ unsigned long long quarantine_writeback(unsigned long long owner) {
    return owner | BAM_TAG_LOCK | BAM_TAG_QUARANTINE;
}

/// The array id a slot tag names (its flag bits masked out).
__device__ __forceinline__ uint32_t tag_id(unsigned long long t) {
    return static_cast<uint32_t>((t & ~(BAM_TAG_LOCK | BAM_TAG_USED | BAM_TAG_QUARANTINE)) >> 40);
}

/// A read-ahead of array `id` is done (published, dropped or quarantined). Release: what
/// the fill did to the line word and the slot tag happens-before the flush that waits for
/// the array's count to reach 0 (cache_flush_slots) and then works on them.
__device__ __forceinline__ void readahead_done(const bam_cache_dev* c, uint32_t id) {
    prefetching_of(c, id).fetch_sub(1ull, cuda::memory_order_release);
}

/// The clock hand's next position (relaxed: positions only spread the evictors).
/// `clock`: the hand's address (from the array view: no descriptor read).
__device__ __forceinline__ uint64_t draw_hand(uint64_t clock) {
    return cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(*reinterpret_cast<unsigned long long*>(clock))
        .fetch_add(1ull, cuda::memory_order_relaxed);
}

/// The slot of hand position `pos`: its low 32 bits modulo the slot count (a 32-bit
/// division; the sequence skips once every 2^32 draws, which only moves the clock).
__device__ __forceinline__ uint32_t hand_slot(uint64_t pos, uint32_t nslots) {
    return static_cast<uint32_t>(pos) % nslots;
}


/// The tags of the aligned group of four slots that holds slot `s0` (relaxed; ~0 past the
/// last slot), for take_slot's `group_tags`.
__device__ __forceinline__ void load_group_tags(unsigned long long* tags, uint32_t nslots, uint32_t s0,
                                                unsigned long long (&group)[4]) {
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) {
        const uint32_t slot = (s0 & ~3u) + k;
        group[k] = slot < nslots ? word_ref(tags[slot]).load(cuda::memory_order_relaxed) : ~0ull;
    }
}

/// Slots one take_slot call visits at most (a victim is usually among the first few; a
/// search that finds none gives up soon, so that the warp-mates of its service thread,
/// which wait for it with slots locked, are not held long).
constexpr uint32_t SLOT_SEARCH = 256;

/// Takes a slot for a new line: the clock hand visits slots; an empty slot is taken,
/// an occupied one is evicted if its line is valid, unreferenced and not busy.
/// Returns the slot with its tag LOCKED; -1 when `dl` expired; -2 after visiting
/// `MAX_VISITS` slots (or all, if fewer) without a victim (the caller tries again later,
/// holding no slot meanwhile).
/// `nslots` and `tags`: the cache's; `first` and `first_tag`: the slot of a hand position
/// the caller drew (draw_hand, hand_slot) and that slot's tag as it read it (relaxed),
/// all read ahead, while its other round trips were in flight. `group_tags`: the tags of
/// the aligned group of four slots that holds `first`, read in the same round trip; when
/// `first` is occupied and a slot of its group is empty, the empty one is taken instead:
/// misses that race for one line each draw a hand position and only the winner uses its
/// own, so the hand skips slots, and without this a cache as large as its data evicted
/// valid lines on its second lap while skipped slots were still empty.
/// `MAX_VISITS`: the search's bound (SLOT_SEARCH for a fill).
template <uint32_t MAX_VISITS = SLOT_SEARCH>
__device__ inline int64_t take_slot(const bam_cache_dev* c, uint64_t clock, uint32_t nslots, unsigned long long* tags,
                                    deadline& dl, uint32_t first, unsigned long long first_tag,
                                    const unsigned long long (&group_tags)[4]) {
    uint32_t visited = 0;
    const uint32_t search = nslots < MAX_VISITS ? nslots : MAX_VISITS;
    if (first_tag != 0) {
        const uint32_t g = first & ~3u;
#pragma unroll
        for (uint32_t k = 0; k < 4; ++k) {
            if (group_tags[k] == 0 && g + k < nslots && g + k != first) {
                first = g + k;
                first_tag = 0;
                break;
            }
        }
    }
    for (bool drawn = true;; drawn = false) {
        const uint32_t s = drawn ? first : hand_slot(draw_hand(clock), nslots);
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> tag(tags[s]);
        unsigned long long t = drawn ? first_tag : tag.load(cuda::memory_order_relaxed);
        if ((t & BAM_TAG_LOCK) == 0 && tag.compare_exchange_strong(t, t | BAM_TAG_LOCK, cuda::memory_order_acquire,
                                                                    cuda::memory_order_relaxed)) {
            if (t == 0) return static_cast<int64_t>(s);  // empty slot
            const uint32_t id = tag_id(t);
            const uint64_t line = t & BAM_TAG_LINE_MASK;
            const bam_cache_arr& a = arr_desc(c, id);
            word_ref w = desc_word(a, line);
            unsigned long long cur = w.load(cuda::memory_order_relaxed);
            const bool evictable = (cur & (VALID | BUSY | REFS)) == VALID && (cur >> 32) == s;
            // Acquire: reads from the release sequence of the last writer's fetch_sub, so
            // the slot's data (written before it) is what we write back.
            if (evictable && w.compare_exchange_strong(cur, cur | BUSY, cuda::memory_order_acquire,
                                                       cuda::memory_order_relaxed)) {
                const status_t wb = (cur & DIRTY) ? writeback_io(c, a, line, slot_ptr(c, s)) : OK;
                if (wb != OK) {
                    // The I/O layer logged the failure. The dirty data must not be lost:
                    // the line stays valid and dirty in its slot, and we look for another
                    // victim.
                    stat(c, ST_ERRORS, 1);
                    if (io_unsettled(wb)) {
                        // The device may still be reading the slot (a late write): nobody
                        // may change the data under it, and the slot must never take
                        // another line. Quarantined with its line (quarantine_writeback).
                        tag.store(quarantine_writeback(t), cuda::memory_order_release);
                    } else {
                        // Failed for good (an error status): a flush retries it.
                        w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
                        tag.store(t, cuda::memory_order_release);
                    }
                } else {
                    // Release: pins that see the line invalid re-read it (after our write-back).
                    w.fetch_and(~static_cast<unsigned long long>(FLAGS), cuda::memory_order_release);
                    stat(c, ST_EVICTIONS, 1);
                    return static_cast<int64_t>(s);
                }
            } else {
                tag.store(t, cuda::memory_order_release);  // unlock, unchanged
            }
        }
        if (++visited >= search) {
            // No victim among the slots visited: pinned, busy or locked.
            return dl.expired() ? -1 : -2;
        } else if ((visited & 63u) == 0 && dl.expired()) {
            return -1;
        }
    }
}



/// Slots the search for a warp's next spare visits at most. It runs while the warp's
/// reads are in flight, and the warp-mates of the lane that searches wait for their
/// completions meanwhile: a short search, tried again after the warp's next submission
/// when it finds nothing.
constexpr uint32_t SPARE_SEARCH = 32;

/// A warp's spare slot when it has none (it takes one during its next fill).
constexpr uint32_t NO_SPARE = 0xffffffffu;

/// The spare table: one word per service warp that may hold a spare (spare_warps of
/// them), right after the slot tags (cache_abi.h): its spare slot or NO_SPARE. In global
/// memory, not in the warp's registers or shared memory, so that the host can take the
/// spares back (bam_cache_recall_spares: resident arrays want runs of slots that held
/// spares would break). Only two parties write a word, with exchanges or stores that
/// leave it consistent with the slot's tag: the warp (it takes its spare with an
/// exchange, puts it back or installs the next one with a store) and the recall (an
/// exchange for NO_SPARE, then the slot's tag is cleared). Null for a warp with no word.
__device__ __forceinline__ uint32_t* spare_word(const bam_cache_dev* c, unsigned long long* tags, uint32_t nslots) {
    const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    return warp < __ldg(&c->spare_warps) ? reinterpret_cast<uint32_t*>(tags + nslots) + warp : nullptr;
}

/// Takes the calling warp's next spare slot (one lane, right after its warp submitted
/// its reads and before it waits for them): through the clock as a fill takes one (an
/// empty slot, else an idle line evicted and, if dirty, written back first), then held
/// as LOCK | RESERVED (BAM_TAG_RESERVED: the clock, flushes and the host's placement pass
/// it by). Returns the slot, or NO_SPARE when no slot was found.
///
/// Why: the warp's next fill reads into its spare at once, without the clock's atomic,
/// the tag loads and the slot's CAS (and an eviction's word RMWs) before its command; the
/// search for the spare after it runs while that command is in flight. Every fill still
/// costs one search, so a steady miss load does no more work than without spares (a first
/// form refilled spares while warps were idle: that code alone slowed the service
/// measurably). The spares are slots on top of the cache's capacity
/// (bam_cache_dev.spare_warps): a cache sized to its data keeps every line.
///
/// Inlined: out of line (a call in the fill path) one 4 KiB miss takes longer, though
/// ptxas reports more spill stores for the inlined form.
///
/// Memory ordering: the tag store is relaxed. Nothing synchronizes through a spare's
/// tag: the slot holds no line, other threads only see that it is locked, and the warp
/// that fills it later orders its own accesses after this store (the same thread or,
/// through __syncwarp, a lane of the same warp).
__device__ __forceinline__ uint32_t take_spare(const bam_cache_dev* c) {
    const uint32_t nslots = __ldg(&c->nslots);
    unsigned long long* tags = reinterpret_cast<unsigned long long*>(__ldg(&c->tags));
    const uint64_t clock = __ldg(&c->clock);
    const uint32_t s0 = hand_slot(draw_hand(clock), nslots);
    unsigned long long group[4];
    load_group_tags(tags, nslots, s0, group);
    deadline dl(__ldg(&c->timeout_ns));
    const int64_t s = take_slot<SPARE_SEARCH>(c, clock, nslots, tags, dl, s0, group[s0 & 3u], group);
    if (s < 0) return NO_SPARE;
    word_ref(tags[s]).store(BAM_TAG_LOCK | BAM_TAG_RESERVED, cuda::memory_order_relaxed);
    return static_cast<uint32_t>(s);
}

/// Takes the spare out of spare table word `spare_entry` (NO_SPARE left there) and
/// empties its slot: the service stopping (the warp's own word), or the host's recall
/// (any word). Release: ordered after everything the caller did, for whoever takes the
/// slot next.
__device__ __forceinline__ void drop_spare(unsigned long long* tags, uint32_t nslots, uint32_t* spare_entry) {
    const uint32_t s = atomic_dev<uint32_t>(*spare_entry).exchange(NO_SPARE, cuda::memory_order_relaxed);
    if (s < nslots) word_ref(tags[s]).store(0ull, cuda::memory_order_release);
}

/// Takes up to 32 requests of the fill ring for the calling warp (every lane of a full
/// warp calls): lane k gets the request of ticket pos + k if `*mine` comes back true.
/// `pos`: where the warp expects the ring's head (the head it saw last, moved past what
/// it took; it looks at those entries and at the head in the same round trip, and takes
/// the head's value when they differ). Returns false once the host asked the service to
/// stop and no request is left; while the ring is empty it polls, sleeping up to 128 ns
/// between looks. A ticket its requester gave up (post_fill) is skipped at the head.
///
/// Memory ordering: the acquire load of an entry reads its requester's release (the
/// BUSY the requester set on the line before is visible). The store that frees the entry
/// is relaxed: our read of the entry comes before it in program order and both are strong
/// operations on one location, so by coherence the read cannot return the write of the
/// next lap's requester, who posts only after it has read the free state. (A release
/// here put a fence on every miss's path, between taking the request and serving it.)
__device__ inline bool take_requests(bam_fill_ctl* ctl, unsigned long long* ring, uint32_t shift,
                                     unsigned long long& pos, bool* mine, uint64_t* key) {
    word_ref head(*reinterpret_cast<unsigned long long*>(&ctl->head));
    const unsigned long long mask = (1ull << shift) - 1;
    const uint32_t lane = lane_id();
    uint32_t idle = 0;
    for (;;) {
        const unsigned long long t = pos + lane;
        word_ref e(ring[t & mask]);
        const unsigned long long lap_bits = ((t >> shift) & 7ull) << BAM_FILL_LAP_SHIFT;
        unsigned long long h = 0;
        uint32_t given_up = 0;  // lane 0: post_fill's mark for the head's ticket, in the same round trip
        if (lane == 0) {
            h = head.load(cuda::memory_order_relaxed);
            given_up = atomic_dev<uint32_t>(fill_ring_given_up(ring, shift)[t & mask]).load(cuda::memory_order_relaxed);
        }
        const unsigned long long val = e.load(cuda::memory_order_acquire);
        h = shfl_u64(0xffffffffu, h, 0);
        const bool posted = (val & ~BAM_FILL_KEY_MASK) == (lap_bits | BAM_FILL_POSTED);
        // The posted tickets from pos on (a run: a later one waits for the gap).
        const uint32_t run = __ffs(~__ballot_sync(0xffffffffu, posted)) - 1u;  // all: ffs(0) - 1 = ~0
        const uint32_t n = run > 32u ? 32u : run;
        if (h != pos) {  // other warps took requests: look at the head
            pos = h;
            continue;
        }
        if (n == 0) {
            // The head's ticket given up by its requester (post_fill's mark: its lap + 1),
            // with its entry free for its lap: skip it, as if taken, and free the entry
            // for the next lap. (Its entry still holding the previous lap's request cannot
            // be: that ticket was taken before the head got here; we wait for its free.)
            int skipped = 0;
            if (lane == 0) {
                if (given_up == static_cast<uint32_t>(pos >> shift) + 1u && val == lap_bits) {
                    unsigned long long seen = pos;
                    if (head.compare_exchange_strong(seen, pos + 1, cuda::memory_order_relaxed,
                                                     cuda::memory_order_relaxed)) {
                        e.store((((pos >> shift) + 1) & 7ull) << BAM_FILL_LAP_SHIFT, cuda::memory_order_relaxed);
                        skipped = 1;
                    }
                }
            }
            if (__shfl_sync(0xffffffffu, skipped, 0)) {
                pos += 1;
                continue;
            }
            int quit = 0;
            if (lane == 0) {
                quit = cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(ctl->stop).load(
                           cuda::memory_order_relaxed) != 0 &&
                       word_ref(*reinterpret_cast<unsigned long long*>(&ctl->tail)).load(cuda::memory_order_relaxed) <=
                           pos;
            }
            if (__shfl_sync(0xffffffffu, quit, 0)) return false;
            // A short sleep while requests may be near (a miss waits for this), longer
            // once the ring has been empty for a while.
            __nanosleep(idle < 256 ? 32u : 128u);
            ++idle;
            continue;
        }
        int won = 0;
        unsigned long long seen = pos;
        if (lane == 0) won = head.compare_exchange_strong(seen, pos + n, cuda::memory_order_relaxed, cuda::memory_order_relaxed);
        won = __shfl_sync(0xffffffffu, won, 0);
        if (!won) {  // another warp took them: go on from the head it left
            pos = shfl_u64(0xffffffffu, seen, 0);
            continue;
        }
        *mine = lane < n;
        if (*mine) {
            *key = val & BAM_FILL_KEY_MASK;
            e.store((((t >> shift) + 1) & 7ull) << BAM_FILL_LAP_SHIFT, cuda::memory_order_relaxed);
        }
        pos += n;
        return true;
    }
}

/// A service lane's fill request (decoded from its key when the lane has one) and what
/// its fill keeps from round to round of serve_fills. (The I/O target of its SSD is a
/// local of its own: it lives in local memory, and as a member it took the struct there.)
struct fill_request {
    bool ahead;        // a read-ahead (BAM_FILL_PREFETCH): nobody waits for it
    uint32_t id;       // the array
    uint64_t line;     // the line of it to fill
    bam_array_view v;  // the array's view as the host published it
    uint32_t place;    // where the host would like the line (0: anywhere; bam_array_view::place)
    bool placed_line;  // the line has a slot of its own (place): never takes or replaces a spare
    bool pending;      // no slot yet, no failure yet
    uint32_t ssd;      // where the line is read from (fill_source, in the first round)
    uint64_t lba;
};

/// serve_fills' first round with the warp's spare (`spare`: lane 0's value, broadcast
/// here; `spare_entry`: its word in the spare table): the spare goes to the lowest lane
/// whose request is pending and has no placement (that lane's `slot` := the spare and
/// `use_spare`), or, when no lane can use it, back into the table (relaxed: only the warp
/// and the recall write the word, see spare_word). Returns whether the warp takes its
/// next spare this round: its spare is gone, or it had none.
__device__ __forceinline__ bool offer_spare(uint32_t* const spare_entry, uint32_t& spare, const fill_request& r,
                                            int64_t& slot, bool& use_spare) {
    spare = __shfl_sync(0xffffffffu, spare, 0);
    const uint32_t takers = __ballot_sync(0xffffffffu, r.pending && !r.placed_line);
    if (spare != NO_SPARE && takers != 0) {
        use_spare = lane_id() == static_cast<uint32_t>(__ffs(takers) - 1);
        if (use_spare) slot = spare;
    } else if (spare != NO_SPARE && lane_id() == 0) {
        // Nobody here can use it: back into the table.
        atomic_dev<uint32_t>(*spare_entry).store(spare, cuda::memory_order_relaxed);
    }
    return spare == NO_SPARE || takers != 0;
}

/// The first round of a request: the SSD and LBA its line is read from (fill_source)
/// and that SSD's I/O `target`, from this warp's copy in shared memory (`targets`) for
/// SSDs below ntargets, else from the descriptors (plain loads: fixed while the cache
/// lives).
__device__ __forceinline__ void find_target(const bam_cache_dev* c, fill_request& r, io_target& target,
                                            const io_target* targets, uint32_t ntargets) {
    fill_source(r.v, r.line, r.ssd, r.lba);
    target = r.ssd < ntargets ? targets[r.ssd] : load_target(c->io, r.ssd);
}

/// A round's search for a slot for the request (one lap of the clock at most, from
/// slot `want` when `placed`, else from hand position `hand`): returns the slot, LOCKED
/// (take_slot), or < 0 for none this round. A request that gives up (a miss whose cache
/// timeout expired, a read-ahead whose lap found no victim) is no longer pending and
/// clears the line's BUSY with a release (see below).
__device__ __forceinline__ int64_t take_fill_slot(const bam_cache_dev* c, fill_request& r, word_ref& w, bool placed,
                                                  uint64_t want, uint64_t hand, uint32_t nslots,
                                                  unsigned long long* tags, deadline& dl) {
    const uint32_t s0 = placed ? static_cast<uint32_t>(want) : hand_slot(hand, nslots);
    unsigned long long group[4];
    load_group_tags(tags, nslots, s0, group);
    // One lap at most: a lane that finds no victim holds no slot while its
    // warp-mates read their lines (a lane that kept looking would keep them, and
    // the slots they locked, waiting at the read below).
    const int64_t slot = take_slot(c, r.v.clock, nslots, tags, dl, s0, group[s0 & 3u], group);
    if (slot == -1 || (slot == -2 && r.ahead)) {
        if (!r.ahead) log_cache_timeout(c, r.v, r.line, BAM_CACHE_ERR_NO_SLOT);
        // Release: waiters that see BUSY clear and the line invalid try again.
        w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
        if (r.ahead) readahead_done(c, r.id);
        r.pending = false;
    }
    return slot;
}

/// A fill whose read failed with `rc`: its slot freed or quarantined, the line left
/// invalid (see below). Both stores release: the tag for the slot's next taker, the
/// word's BUSY for the line's waiters.
__device__ __forceinline__ void fill_failed(const bam_cache_dev* c, word_ref& tag, word_ref& w, bool ahead,
                                            bool submitted, status_t rc) {
    // The I/O layer logged the failure with the LBA. The line stays invalid.
    // A request refused before it was submitted, or a completion with an
    // error status, leaves the slot free. When the wait timed out or the queue
    // failed meanwhile, the read may still land: the slot is quarantined for
    // good (its tag stays locked), so that a late write cannot overwrite
    // another line's data.
    const bool settled = !submitted || !io_unsettled(rc);
    if (!ahead || !settled) stat(c, ST_ERRORS, 1);
    tag.store(settled ? 0ull : BAM_TAG_LOCK | BAM_TAG_QUARANTINE, cuda::memory_order_release);
    w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
}

/// Publishes line `r.line` read into slot `slot`: the line word (`prev`: its value
/// loaded after the submission) and the slot's tag, which names the owner and unlocks it.
/// Ordering: see below (relaxed RMW and store after the wait's fence: a release).
__device__ __forceinline__ void publish_fill(const bam_cache_dev* c, const fill_request& r, word_ref& tag,
                                             word_ref& w, unsigned long long prev, int64_t slot) {
    const unsigned long long owner =
        BAM_TAG_USED | (static_cast<unsigned long long>(r.id) << 40) | (r.line & BAM_TAG_LINE_MASK);
    // Publish: slot field := `slot`, VALID on, BUSY off, generation + 1 (mod 512,
    // no carry into DIRTY), in one RMW. Only the reference count changes
    // concurrently (pins of waiting threads), so the delta from `prev` is
    // exact and no carry crosses the 32-bit boundary. Relaxed RMW, yet a
    // release of the line's data: wait_on ended with a fence after it
    // acquired the completion (bam/detail/queue.cuh, the wait contract), and fence +
    // strong write is a release pattern. The tag store that names the owner
    // and unlocks the slot rides the same fence (an evictor that sees it
    // before the line is valid finds the line busy and leaves it). Optimistic
    // readers that read the word before the line left this slot see the new
    // generation (array.cuh).
    const unsigned long long gen_step = (prev & GEN) == GEN ? 0ull - GEN : GEN_ONE;
    const unsigned long long delta =
        ((static_cast<unsigned long long>(slot) - (prev >> 32)) << 32) + VALID - BUSY + gen_step;
    w.fetch_add(delta, cuda::memory_order_relaxed);
    tag.store(owner, cuda::memory_order_relaxed);
    stat(c, r.ahead ? ST_READAHEADS : ST_MISSES, 1);
}

/// Reads the request's line into `slot` (LOCKED by this lane) through `target` and
/// publishes it (publish_fill), or settles the failure (fill_failed); the lanes with a
/// slot call together. `lone`: the warp took one request; `refill`: this lane takes the
/// warp's next spare (take_spare) while its read is in flight, into `spare_entry`
/// (relaxed store, see spare_word).
/// Ordering: the submission's fence orders the slot's earlier accesses before the
/// device's write; the wait acquires the completion and fences, which makes the
/// publish a release (publish_fill).
__device__ __forceinline__ void read_into_slot(const bam_cache_dev* c, fill_request& r, const io_target& target,
                                               word_ref& w, int64_t slot, unsigned long long* tags, bool lone,
                                               bool refill, uint32_t* const spare_entry, fill_queues& fq) {
    r.pending = false;
    char* p = slot_ptr(r.v, slot);
    word_ref tag(tags[slot]);
    // The lanes with a slot submit together (bam/io.cuh: any set of active lanes
    // may call; lanes on different queue pairs group by queue pair).
    stat(c, ST_READS, 1);
    // On the shared queues each lane then waits for its own completion in the
    // lone form, whose poll reads the completion word, the CQ head and the
    // entries at the head in one round trip (bam/detail/queue.cuh, wait_ticket).
    // A warp's lone request reads on the block's own queue pair for the SSD where
    // it has one (fill queues, bam/detail/fill_queue.cuh: the shortest path), the
    // requests of a batch on the shared queues, which spread them wider (with
    // every fill on the fill queues, the kernel suite's quarter-cache runs took
    // longer).
    const bool own = lone && fill_queue_usable(fq, target, r.v.line_lbas);
    io_handle h;
    status_t rc = own ? fill_submit(fq, c->io, target, r.lba, r.v.line_lbas, p)
                      : submit_to(c->io, target, nvme::OP_READ, r.lba, r.v.line_lbas, p, h);
    const bool submitted = rc == OK;  // else nothing reached the device
    // The line word for the publish, loaded in the command's shadow: its slot and
    // generation fields only change under BUSY, which the requester holds for us.
    // (Loaded before the submission, the submission's fence waited for it.)
    unsigned long long prev = 0;
    if (submitted) prev = w.load(cuda::memory_order_relaxed);
    // While the reads are in flight: the warp's next spare.
    if (refill) {
        const uint32_t next = take_spare(c);
        if (next != NO_SPARE) atomic_dev<uint32_t>(*spare_entry).store(next, cuda::memory_order_relaxed);
    }
    // A read-ahead's error status is not logged (see serve_fills); a timeout is.
    if (submitted)
        rc = own ? fill_wait(fq, c->io, target, r.lba, r.v.line_lbas, !r.ahead)
                 : wait_on<true>(c->io, target.q, h, !r.ahead);
    if (rc != OK) fill_failed(c, tag, w, r.ahead, submitted, rc);
    else publish_fill(c, r, tag, w, prev, slot);
    if (r.ahead) readahead_done(c, r.id);
}

/// Serves the requests the warp took (every lane of a full warp calls; `mine`: this lane
/// has the request `key`). The requester of each set line `line` of array `id` BUSY and
/// waits for BUSY to clear. In rounds: each lane with a request looks for a slot (one
/// lap of the clock), then the lanes that got one read their lines together (one ticket
/// atomic and one doorbell per queue for the warp) and publish them valid; lanes that
/// found no victim try again in the next round. On failure (no slot for the cache
/// timeout, an I/O error) a lane logs it and clears BUSY leaving the line invalid, which
/// the requester reports as an error.
///
/// A read-ahead request (BAM_FILL_PREFETCH, posted by detail::read_ahead) has nobody
/// waiting: it gives up when its first lap finds no victim, and a failure that leaves
/// the device out of it (no slot, an error status) only clears BUSY, unlogged; a reader
/// of the line then misses, reads it again and reports its own error. A read-ahead
/// whose command timed out quarantines its slot as a miss's does (the device may still
/// write it). Either way the array's `prefetching` count goes down when it is done.
/// `targets`: this warp's targets of SSDs 0 .. ntargets - 1 (SERVICE_TARGETS), read from
/// shared memory instead of the descriptors' two dependent L2 round trips.
///
/// The warp's spare slot (spare_word), if it has one, goes to its lowest lane whose
/// request has no placement, in the first round, instead of a slot from the clock; the
/// lowest such lane that submits in that round then takes the next spare (take_spare)
/// while the reads are in flight. A lone miss's read thus starts without a slot search;
/// the search that replaces the spare overlaps the command. (Placed lines never take or
/// replace a spare: a run of slots being filled for a resident array stays whole.)
/// The steps: offer_spare, find_target, take_fill_slot, read_into_slot.
__device__ inline void serve_fills(const bam_cache_dev* c, bool mine, uint64_t key, const io_target* targets,
                                   uint32_t ntargets, fill_queues& fq, uint32_t* const spare_entry) {
    // The warp's spare (`spare_entry`: its word in the spare table, the same for the
    // whole warp, computed once when the service starts): lane 0 takes it out of the
    // table first, so that the exchange's round trip is the view's (an exchange: the host
    // may recall it meanwhile, see spare_word).
    uint32_t spare = NO_SPARE;
    if (spare_entry != nullptr && lane_id() == 0)
        spare = atomic_dev<uint32_t>(*spare_entry).exchange(NO_SPARE, cuda::memory_order_relaxed);
    fill_request r;
    r.ahead = (key & BAM_FILL_PREFETCH) != 0;
    key &= ~BAM_FILL_PREFETCH;
    r.id = static_cast<uint32_t>(key >> 40);
    r.line = key & BAM_TAG_LINE_MASK;
    // The array's view as the host published it; the array lives while a request of it
    // is in flight (its teardown keeps busy lines' arrays, see Array::teardown).
    r.v = view_of(c, mine ? r.id : 0u);
    // Where the host would like the line (0: anywhere; see bam_array_view::place).
    r.place = mine ? place_of(c, r.id) : 0u;
    word_ref w = line_word(r.v, r.line);
    r.ssd = 0;
    r.lba = 0;
    io_target target{};
    const uint32_t nslots = __ldg(&c->nslots);
    unsigned long long* tags = reinterpret_cast<unsigned long long*>(__ldg(&c->tags));
    deadline dl(__ldg(&c->timeout_ns));
    r.placed_line = mine && r.place != 0 && r.place - 1ull + r.line < nslots;
    // The warp took one request: a lone miss, whose latency its waiter feels in full.
    const bool lone = __popc(__ballot_sync(0xffffffffu, mine)) == 1;
    r.pending = mine;
    bool replace_spare = false;  // the warp's spare is gone: take the next one this round
    for (bool first = true;; first = false) {
        int64_t s = -2;
        bool use_spare = false;
        if (first && spare_entry != nullptr) replace_spare = offer_spare(spare_entry, spare, r, s, use_spare);
        if (r.pending) {
            // Everything the fill reads about the cache and the SSD before its command,
            // issued together before the first acquire (the slot's CAS) empties L1 (see
            // io_target in bam/io.cuh): the hand position, the descriptors (from this
            // warp's copy in shared memory for SSDs below ntargets) and the drawn slot's
            // group of tags. A lane with the warp's spare needs none of the clock's. (The
            // line word waits until the command is out, below.)
            // The first try of a placed line takes its slot (take_slot evicts what is
            // there if it can, else goes on with the clock); every other draws the hand.
            const uint64_t want = r.place != 0 ? r.place - 1ull + r.line : ~0ull;
            const bool placed = first && want < nslots;
            const uint64_t hand = placed || use_spare ? 0ull : draw_hand(r.v.clock);
            if (first) find_target(c, r, target, targets, ntargets);
            if (!use_spare) s = take_fill_slot(c, r, w, placed, want, hand, nslots, tags, dl);
        }
        __syncwarp();
        // The lane that takes the warp's next spare (take_spare, right after its
        // submission): in the first round, when the warp's spare is gone (used above, or
        // none yet), the lowest lane without a placed line that submits now.
        bool refill = false;
        if (replace_spare) {
            const uint32_t subs = __ballot_sync(0xffffffffu, s >= 0 && !r.placed_line);
            refill = subs != 0 && lane_id() == static_cast<uint32_t>(__ffs(subs) - 1);
            replace_spare = false;
        }
        if (s >= 0) read_into_slot(c, r, target, w, s, tags, lone, refill, spare_entry, fq);
        if (!__any_sync(0xffffffffu, r.pending)) return;
        __nanosleep(256);
    }
}

}  // namespace detail

/// SSDs whose I/O targets each service warp keeps in shared memory (176 bytes each, 11 KiB
/// a block; fills for SSDs beyond read the descriptors as other I/O does).
constexpr uint32_t SERVICE_TARGETS = 4;

/// The fill service's loop (every thread of bam_cache_fill_service; blocks of whole
/// warps): each warp takes up to 32 requests at a time and serves them, until the host
/// asks to stop. Warps below the cache's spare_warps keep a spare slot (serve_fills,
/// take_spare) and give it back when they stop. Thread 0 of each block counts the block
/// as started, so that the host launches no kernel that misses before the service is
/// resident.
__device__ inline void fill_service_run(const bam_cache_dev* c) {
    using namespace detail;
    bam_fill_ctl* ctl = reinterpret_cast<bam_fill_ctl*>(__ldg(&c->fill_ctl));
    unsigned long long* ring = reinterpret_cast<unsigned long long*>(__ldg(&c->ring));
    const uint32_t shift = __ldg(&c->ring_shift);
    if (threadIdx.x == 0)
        cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(ctl->started).fetch_add(1u, cuda::memory_order_relaxed);
    // Each warp's I/O targets of the first SSDs, loaded once: the I/O layer's SSD and
    // queue-pair views are written before the cache exists and never change, and the
    // queue pair a thread uses for an SSD depends only on its warp (default_qp).
    __shared__ io_target targets[BAM_FILL_SERVICE_THREADS / 32][SERVICE_TARGETS];
    const uint32_t nssd = __ldg(&c->io.nssd);
    const uint32_t ntargets = nssd < SERVICE_TARGETS ? nssd : SERVICE_TARGETS;
    io_target* mine_targets = targets[threadIdx.x / 32];
    if (lane_id() < ntargets) mine_targets[lane_id()] = load_target(c->io, lane_id());
    __syncwarp();
    // The block's fill queues (bam/detail/fill_queue.cuh), if the cache has them.
    __shared__ fill_queues fq;
    fill_queues_init(fq, c->io, __ldg(&c->fill_qp0), __ldg(&c->fill_qps));
    // The warp's word in the spare table (spare_word), fixed for the service's life.
    unsigned long long* const tags = reinterpret_cast<unsigned long long*>(__ldg(&c->tags));
    const uint32_t nslots = __ldg(&c->nslots);
    uint32_t* const spare_entry = spare_word(c, tags, nslots);
    unsigned long long pos = 0;  // where this warp expects the ring's head (take_requests)
    for (;;) {
        bool mine = false;
        uint64_t key = 0;
        if (!take_requests(ctl, ring, shift, pos, &mine, &key)) break;
        serve_fills(c, mine, key, mine_targets, ntargets, fq, spare_entry);
        __syncwarp();
    }
    // The block's fill queues go back to the queue pairs' shared state.
    fill_queues_fini(fq);
    // The warp's spare, if it holds one, is an empty slot again.
    if (lane_id() == 0 && spare_entry != nullptr) drop_spare(tags, nslots, spare_entry);
}

/// Takes back every spare of the fill service (bam_cache_recall_spares; the host, before
/// it looks for a run of empty slots for a resident array): each word of the spare table
/// becomes NO_SPARE and its slot empty. Warps take new spares during their next fills.
/// A spare a warp has just taken out of its word, to read into or to put back, is not
/// seen here (it is in use, or stays held): recalling is best effort, like the placement
/// it serves.
__device__ inline void cache_recall_spares(const bam_cache_dev* c) {
    using namespace detail;
    unsigned long long* tags = reinterpret_cast<unsigned long long*>(__ldg(&c->tags));
    const uint32_t nslots = __ldg(&c->nslots), n = __ldg(&c->spare_warps);
    uint32_t* table = reinterpret_cast<uint32_t*>(tags + nslots);
    for (uint64_t w = gtid(); w < n; w += gthreads()) drop_spare(tags, nslots, table + w);
}

}  // namespace bam
