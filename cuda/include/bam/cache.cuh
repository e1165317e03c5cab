// bam/cache.cuh — the software cache in GPU memory (dissertation §5.3.2).
//
// Data structures (cache_abi.h):
//  * one 64-bit line word per line of backing data of every array:
//      high 32 bits: the slot holding the line (meaningful while VALID)
//      low 32 bits:  the state word, VALID | BUSY | DIRTY | 29-bit reference count.
//    A single fetch_add(n) pins the line n times, reads its state and its slot: a hit
//    costs one atomic to pin and one to unpin.
//  * one 64-bit tag per slot: empty, or (array id, line) of the owner, plus a LOCK bit
//    that an evictor (or the flush kernel) holds while it works on the slot.
//  * a clock hand: evictors take slots round-robin with fetch_add; concurrent evictors
//    work on different slots.
//
// Protocol for line L of array A (line word W):
//  acquire: old = W.fetch_add(n, acquire)
//    VALID, not BUSY          -> hit; data of slot (old >> 32) is ready.
//    not VALID, not BUSY      -> W.fetch_or(BUSY): the winner fills the line (one I/O in
//                                flight per line), the losers wait for BUSY to clear.
//    BUSY (fill or eviction)  -> wait (bounded) and look again.
//  fill: find a slot (clock, evicting a victim), read the line into it, then one
//    fetch_add that sets VALID, clears BUSY and stores the slot index (a release).
//  evict slot s (tag lock held; tag names line V of array B):
//    CAS W_V from exactly (VALID [| DIRTY], refs 0, slot s) to the same | BUSY: nobody
//    holds or can take a reference (a new pin sees BUSY and waits). Write back if dirty,
//    then fetch_and(~(VALID | BUSY | DIRTY)) (release); pins that arrived meanwhile
//    refill it. Only unreferenced, non-busy lines are evicted.
//  release: [W.fetch_or(DIRTY)] then W.fetch_sub(n, release).
//  unpinned read (cache_read_unpinned, a sequence lock on W): w1 = W.load(acquire);
//    VALID, not BUSY -> read the element from slot (w1 >> 32) with acquire loads;
//    w2 = W.load(relaxed);
//    the data is good if w2 has w1's slot, flags and generation (SEQ_BITS). Anything that
//    could have changed the slot's data meanwhile set BUSY first (eviction, invalidation;
//    a refill into the same slot also advanced the generation), so w2 differs.
//
// Memory ordering (libcu++ atomic_ref, device scope; the data never leaves the GPU's
// coherence domain except through NVMe I/O, which the queue layer orders):
//  * fill: the controller's data writes are acquired by bam::wait (CQE acquire, or
//    cpl release/acquire), which returns after a fence. The VALID-setting fetch_add
//    follows that fence, so it is a release (fence + relaxed RMW), and a hitting
//    thread's acquire fetch_add that reads it (or a later RMW in its release sequence —
//    every RMW on W continues the sequence) sees the data.
//  * write: the element stores precede the writer's release fetch_sub; the evictor's
//    or flusher's acquire CAS reads from that release sequence, so the write-back
//    (submitted after it) carries the new data.
//  * eviction: the tag lock is taken with an acquire CAS and dropped with a release
//    store; the tag of a slot is only changed under its lock.
//
// Every wait is bounded by cache->timeout_ns (globaltimer). On expiry the requester
// logs BAM_ERR_TIMEOUT (detail BAM_CACHE_ERR_*) with the line's LBA in the device error
// log, drops what it holds and fails; it never hangs.
#pragma once

#include <stdint.h>

#include "abi.h"
#include "cache_abi.h"
#include "error.cuh"
#include "io.cuh"
#include "nvme.cuh"
#include "util.cuh"

namespace bam {

namespace cache_detail {

using word_ref = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;

constexpr uint64_t VALID = BAM_LINE_VALID;
constexpr uint64_t BUSY = BAM_LINE_BUSY;
constexpr uint64_t DIRTY = BAM_LINE_DIRTY;
constexpr uint64_t REFS = BAM_LINE_REFS;
constexpr uint64_t GEN = BAM_LINE_GEN;
constexpr uint64_t GEN_ONE = BAM_LINE_GEN_ONE;
/// The bits an optimistic reader compares before and after reading a line's data: slot,
/// VALID, BUSY and generation (not the references or DIRTY, which change under it
/// without touching the slot's data).
constexpr uint64_t SEQ_BITS = ~(REFS | DIRTY);
constexpr uint64_t FLAGS = VALID | BUSY | DIRTY;

__device__ __forceinline__ uint32_t smid() {
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

enum stat_field : uint32_t {
    ST_ACCESSES = 0,
    ST_HITS,
    ST_MISSES,
    ST_EVICTIONS,
    ST_WRITEBACKS,
    ST_READS,
    ST_WRITES,
    ST_ERRORS,
    ST_WAITS,
};

/// Adds `val` to counter `f` of this SM's shard of the statistics at `stats` (a
/// fire-and-forget RED; nothing waits for it). Every lane of an SM adds to the same
/// shard, so paths that many lanes take at once (an access, a hit) add up their lanes'
/// counts first and make one RED per warp: with one RED per lane, random 8-byte hits
/// through bam::array reached 0.17 of raw reads, against 0.22 to 0.24 with one per warp
/// (H100, 64 MiB of data, 262,144 threads, same-process A/B).
__device__ __forceinline__ void stat_at(uint64_t stats, stat_field f, uint64_t val) {
    if (stats == 0 || val == 0) return;
    const uint32_t shard = smid() % BAM_CACHE_STAT_SHARDS;
    const uint64_t p = stats + shard * sizeof(bam_cache_stats) + f * sizeof(uint64_t);
    // A relaxed RED on the global address (the statistics are cudaMalloc'd; converted
    // with cvta, which is what the PTX model requires of a generic address): atomicAdd on
    // a generic pointer compiles to a test for the shared window and a CAS loop besides.
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(__cvta_generic_to_global(reinterpret_cast<void*>(p))),
                 "l"(static_cast<unsigned long long>(val))
                 : "memory");
}
/// stat_at for an array: the statistics pointer comes from the view (no global read).
__device__ __forceinline__ void stat(const bam_array_view& v, stat_field f, uint64_t val) { stat_at(v.stats, f, val); }
/// stat_at for the paths that work by slot (eviction, flush).
__device__ __forceinline__ void stat(const bam_cache_dev* c, stat_field f, uint64_t val) {
    stat_at(__ldg(&c->stats), f, val);
}

__device__ __forceinline__ const bam_cache_dev* cache_of(const bam_array_view& v) {
    return reinterpret_cast<const bam_cache_dev*>(v.cache);
}

/// The view of array `id` as the host made it (the cache's table of views in global
/// memory): the out-of-line paths take (cache, id) instead of a 96-byte view, which a
/// caller would otherwise keep as an addressable copy in local memory, and read from it
/// on its hit path too.
__device__ __forceinline__ bam_array_view view_of(const bam_cache_dev* c, uint32_t id) {
    // At a fixed offset from the descriptor (BAM_CACHE_VIEWS_OFFSET), so one round trip
    // (a pointer to the table in the descriptor made it two, on every miss).
    return reinterpret_cast<const bam_array_view*>(reinterpret_cast<const char*>(c) + BAM_CACHE_VIEWS_OFFSET)[id];
}

__device__ __forceinline__ const bam_cache_arr& arr_desc(const bam_cache_dev* c, uint32_t id) {
    return reinterpret_cast<const bam_cache_arr*>(__ldg(&c->arrays))[id];
}

/// The line word of `line` of the array a view describes.
__device__ __forceinline__ word_ref line_word(const bam_array_view& v, uint64_t line) {
    return word_ref(reinterpret_cast<unsigned long long*>(v.words)[line]);
}

/// The line word of `line` of the array a descriptor (in global memory) describes.
__device__ __forceinline__ word_ref desc_word(const bam_cache_arr& a, uint64_t line) {
    return word_ref(reinterpret_cast<unsigned long long*>(__ldg(&a.words))[line]);
}

__device__ __forceinline__ char* slot_ptr(const bam_array_view& v, uint64_t slot) {
    return reinterpret_cast<char*>(v.data + (slot << v.slot_shift));
}

__device__ __forceinline__ char* slot_ptr(const bam_cache_dev* c, uint64_t slot) {
    return reinterpret_cast<char*>(__ldg(&c->data) + (slot << __ldg(&c->slot_shift)));
}

/// SSD and LBA of `line` for a read (`replica` ignored for striping) or of one replica.
/// `A`: an array view or descriptor (both have layout, first_ssd, nssd, start_lba,
/// line_lbas).
template <typename A>
__device__ __forceinline__ void locate(const A& a, uint64_t line, uint32_t replica, uint32_t& ssd, uint64_t& lba) {
    const uint32_t nssd = a.nssd;
    const uint64_t ll = a.line_lbas;
    if (nssd == 1) {  // no 64-bit division (a call of ~100 instructions) on the common path
        ssd = a.first_ssd;
        lba = a.start_lba + line * ll;
        return;
    }
    if (a.layout == BAM_LAYOUT_STRIPE) {
        ssd = a.first_ssd + static_cast<uint32_t>(line % nssd);
        lba = a.start_lba + (line / nssd) * ll;
    } else {
        ssd = a.first_ssd + replica % nssd;
        lba = a.start_lba + line * ll;
    }
}

/// SSD and LBA a fill of `line` reads: replicated arrays read the replica line % nssd,
/// so that reads spread over the SSDs.
__device__ __forceinline__ void fill_source(const bam_array_view& v, uint64_t line, uint32_t& ssd, uint64_t& lba) {
    locate(v, line, v.nssd == 1 ? 0u : static_cast<uint32_t>(line % v.nssd), ssd, lba);
}

/// Reads `line` into `dst` (one thread) through `tg`, the fill source's target loaded
/// beforehand (load_target(c->io, ssd)).
__device__ inline status_t fill_io(const bam_array_view& v, const io_target& tg, uint64_t lba, char* dst) {
    stat(v, ST_READS, 1);
    // Lone: the group of lanes this fill is for may wait in a warp collective meanwhile.
    return rw_sync_to<true>(cache_of(v)->io, tg, nvme::OP_READ, lba, v.line_lbas, dst);
}

/// Writes `line` from `src` to its SSD (or every replica). One thread. Out of line: only
/// dirty evictions call it, and inlined it was a second copy of the whole I/O path inside
/// the miss path (3,694 instead of 5,965 SASS lines for cache_acquire_slow).
__device__ inline __noinline__ status_t writeback_io(const bam_cache_dev* c, const bam_cache_arr& a, uint64_t line,
                                        char* src) {
    const uint32_t copies = a.layout == BAM_LAYOUT_STRIPE ? 1u : a.nssd;
    status_t rc = OK;
    for (uint32_t r = 0; r < copies; ++r) {
        uint32_t ssd;
        uint64_t lba;
        locate(a, line, r, ssd, lba);
        stat(c, ST_WRITES, 1);
        const status_t x = rw_sync<true>(c->io, nvme::OP_WRITE, ssd, lba, a.line_lbas, src);
        if (rc == OK) rc = x;
    }
    stat(c, ST_WRITEBACKS, 1);
    return rc;
}

template <typename A>
__device__ __forceinline__ void log_cache_timeout(const bam_cache_dev* c, const A& a, uint64_t line,
                                                  uint32_t detail) {
    uint32_t ssd;
    uint64_t lba;
    locate(a, line, 0, ssd, lba);
    log_error(c->io, BAM_ERR_TIMEOUT, static_cast<uint16_t>(ssd), 0, 0xffff, nvme::OP_READ, lba, a.line_lbas,
              detail);
    stat(c, ST_ERRORS, 1);
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

/// Takes a slot for a new line: the clock hand visits slots; an empty slot is taken,
/// an occupied one is evicted if its line is valid, unreferenced and not busy.
/// Returns the slot with its tag LOCKED; -1 when `dl` expired; with `once`, -2 after one
/// lap over all slots without a victim (the caller gives up what it holds and retries).
/// `nslots` and `tags`: the cache's; `first` and `first_tag`: the slot of a hand position
/// the caller drew (draw_hand, hand_slot) and that slot's tag as it read it (relaxed),
/// all read ahead, while its other round trips were in flight. `group_tags`: the tags of
/// the aligned group of four slots that holds `first`, read in the same round trip; when
/// `first` is occupied and a slot of its group is empty, the empty one is taken instead:
/// misses that race for one line each draw a hand position and only the winner uses its
/// own, so the hand skips slots, and without this a cache as large as its data evicted
/// valid lines on its second lap while skipped slots were still empty.
__device__ inline int64_t take_slot(const bam_cache_dev* c, uint64_t clock, uint32_t nslots, unsigned long long* tags,
                                    deadline& dl, bool once, uint32_t first, unsigned long long first_tag,
                                    const unsigned long long (&group_tags)[4]) {
    uint32_t spins = 0, visited = 0;
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
            const uint32_t id = static_cast<uint32_t>((t & ~(BAM_TAG_LOCK | BAM_TAG_USED)) >> 40);
            const uint64_t line = t & BAM_TAG_LINE_MASK;
            const bam_cache_arr& a = arr_desc(c, id);
            word_ref w = desc_word(a, line);
            unsigned long long cur = w.load(cuda::memory_order_relaxed);
            const bool evictable = (cur & (VALID | BUSY | REFS)) == VALID && (cur >> 32) == s;
            // Acquire: reads from the release sequence of the last writer's fetch_sub, so
            // the slot's data (written before it) is what we write back.
            if (evictable && w.compare_exchange_strong(cur, cur | BUSY, cuda::memory_order_acquire,
                                                       cuda::memory_order_relaxed)) {
                if ((cur & DIRTY) && writeback_io(c, a, line, slot_ptr(c, s)) != OK) {
                    // The I/O layer logged the failure. The dirty data must not be lost:
                    // the line stays valid and dirty in its slot (a flush retries it), and
                    // we look for another victim.
                    stat(c, ST_ERRORS, 1);
                    w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
                    tag.store(t, cuda::memory_order_release);
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
        if (++visited >= nslots) {
            // A whole lap without a victim: every slot is pinned, busy or locked.
            visited = 0;
            if (dl.expired()) return -1;
            if (once) return -2;
            backoff(spins);
        } else if ((visited & 63u) == 0 && dl.expired()) {
            return -1;
        }
    }
}

/// Results of cache_try_acquire / cache_acquire_slow other than a line address or
/// nullptr (error): nothing is held, try again. RETRY_SLOT: one lap over the slots found
/// no victim; RETRY_BUSY: the line stayed busy (being filled or evicted) for
/// busy_retry_ns; RETRY_READY: the line is valid now (filled or found so), but the
/// caller asked not to keep it (`keep` false): pin it again, it is most likely a hit.
constexpr uintptr_t RETRY_SLOT = 1;
constexpr uintptr_t RETRY_BUSY = 2;
constexpr uintptr_t RETRY_READY = 3;
__device__ __forceinline__ bool is_retry(const char* p) {
    const uintptr_t v = reinterpret_cast<uintptr_t>(p);
    return v >= RETRY_SLOT && v <= RETRY_READY;
}
/// How long cache_try_acquire waits for a busy line before it gives up its pin: long
/// enough for a fill or a write-back in flight (tens of microseconds), short enough that
/// a warp never keeps slots pinned for long while one of its lanes waits.
constexpr uint64_t busy_retry_ns = 200000;

}  // namespace cache_detail

/// The miss path of cache_acquire / cache_try_acquire, out of line so that the hit path
/// stays small (few registers, high occupancy). The caller holds `n` pins on the line and
/// `old` is the word value its pin returned. `once`: give up (RETRY_*, nothing held,
/// nothing logged) instead of waiting for a slot or, longer than busy_retry_ns, for a
/// busy line. `keep` false: once the line is valid, drop the pins and return RETRY_READY
/// instead of the data (for callers that must not hold a line while others wait for
/// them; see bam::array_detail::with_line).
__device__ inline __noinline__ char* cache_acquire_slow(bam_array_view v, uint64_t line, uint32_t n,
                                                        unsigned long long old, deadline& dl, bool once,
                                                        bool keep = true);

/// The hit half of cache_acquire / cache_try_acquire: pins `line` of the array `v`
/// describes with `n` references and returns its data if it is valid and not busy.
/// Otherwise returns nullptr and *keeps the pins* (a pin on a line that is not valid
/// occupies no slot), with the word value in `old`: finish with cache_acquire_slow(v,
/// line, n, old, ...), which takes over the pins. Reads nothing but the line word: the
/// rest comes from the view. `count_hit` false: the caller counts the hit in the
/// statistics itself (bam::array adds up its lanes' hits: one atomic per warp).
__device__ __forceinline__ char* cache_try_hit(const bam_array_view& v, uint64_t line, uint32_t n,
                                               unsigned long long& old, bool count_hit = true) {
    using namespace cache_detail;
    // Acquire: on a hit this reads from the filler's release (or a later RMW), so the
    // line's data is visible.
    old = line_word(v, line).fetch_add(n, cuda::memory_order_acquire);
    if ((old & (VALID | BUSY)) == VALID) {
        if (count_hit) stat(v, ST_HITS, 1);
        return slot_ptr(v, old >> 32);
    }
    return nullptr;
}

namespace cache_detail {
/// Loads a T from `p` with acquire semantics (device scope), as acquire loads of the
/// largest power-of-two chunk (up to 8 bytes) that divides sizeof(T): `p` is aligned to
/// it (elements sit at multiples of sizeof(T) from a slot, which is 512-byte aligned).
/// Every chunk is an acquire, so no memory access after the call is performed before any
/// of them.
template <typename T>
__device__ __forceinline__ T load_acquire(const T* p) {
    constexpr size_t C = sizeof(T) % 8 == 0 ? 8 : sizeof(T) % 4 == 0 ? 4 : sizeof(T) % 2 == 0 ? 2 : 1;
    struct {
        alignas(T) unsigned char b[sizeof(T)];
    } u;
    const unsigned char* src = reinterpret_cast<const unsigned char*>(p);
#pragma unroll
    for (size_t k = 0; k < sizeof(T); k += C) {
        if constexpr (C == 8) {
            unsigned long long x;
            asm volatile("ld.acquire.gpu.b64 %0, [%1];" : "=l"(x) : "l"(src + k) : "memory");
            memcpy(u.b + k, &x, 8);
        } else if constexpr (C == 4) {
            unsigned int x;
            asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(x) : "l"(src + k) : "memory");
            memcpy(u.b + k, &x, 4);
        } else if constexpr (C == 2) {
            unsigned short x;
            asm volatile("ld.acquire.gpu.b16 %0, [%1];" : "=h"(x) : "l"(src + k) : "memory");
            memcpy(u.b + k, &x, 2);
        } else {
            unsigned int x;
            asm volatile("ld.acquire.gpu.u8 %0, [%1];" : "=r"(x) : "l"(src + k) : "memory");
            u.b[k] = static_cast<unsigned char>(x);
        }
    }
    T t;
    memcpy(&t, u.b, sizeof(T));
    return t;
}
}  // namespace cache_detail

/// Reads the element of type T at byte `off` of line `line` without pinning it (one
/// thread; no atomic RMW): returns true with the value in `out` if the line was valid
/// and stayed in its slot while it was read, false otherwise (nothing held, `out`
/// unchanged; use a pinning path then). Cheaper than a pin and release on a hit (three
/// loads instead of two atomics on the line word; H100 probe, benches/probe/
/// hit_path_probe.cu), and many readers of one line do not contend. Stores must pin
/// (cache_acquire): an eviction waits only for pins.
///
/// Memory ordering: the first load of the word is an acquire, so a VALID it reads makes
/// the filler's data visible (the fill publishes VALID with a release, see
/// cache_acquire_slow). The element is read with acquire loads, so the second load of
/// the word is performed after them. Anything that changes a slot's data is preceded by
/// a BUSY (eviction, invalidation) and, for a refill into the same slot, a new
/// generation; so if the element read saw such a change, the second load sees the word
/// changed and the read is dropped. (A fence between the element and the second load
/// orders the same, but waits for every store and RED the thread has in flight: 1.2x
/// to 1.6x slower on the probe.) A false success needs the line refilled into the same slot 512
/// times between the two loads of the word (the generation has 9 bits), each refill a
/// full eviction and an I/O.
template <typename T>
__device__ __forceinline__ bool cache_read_unpinned(const bam_array_view& v, uint64_t line, uint32_t off, T& out) {
    using namespace cache_detail;
    word_ref w = line_word(v, line);
    const unsigned long long w1 = w.load(cuda::memory_order_acquire);
    if ((w1 & (VALID | BUSY)) != VALID) return false;
    const T x = load_acquire(reinterpret_cast<const T*>(slot_ptr(v, w1 >> 32) + off));
    const unsigned long long w2 = w.load(cuda::memory_order_relaxed);
    if (((w1 ^ w2) & SEQ_BITS) != 0) return false;
    out = x;
    return true;
}

/// Pins line `line` of the array `v` describes with `n` references (one thread; n >= 1)
/// and returns the address of its data, filling it from the SSDs on a miss. Waits
/// (bounded by the cache timeout) for a slot or a busy line. Returns nullptr after
/// logging an error (I/O failure or timeout); then nothing is pinned.
///
/// Hold-and-wait: the caller may hold other pins while it waits here (array_ref, or lanes
/// of its warp that already got their lines and wait for it at the reconvergence point).
/// Waiting callers must then never hold more lines together than the cache has slots
/// (see docs/cache.md, "Why it cannot deadlock"); cache_try_acquire has no such limit.
__device__ __forceinline__ char* cache_acquire(const bam_array_view& v, uint64_t line, uint32_t n) {
    unsigned long long old;
    if (char* p = cache_try_hit(v, line, n, old)) return p;
    deadline dl(0);  // the cache's timeout (set by cache_acquire_slow)
    return cache_acquire_slow(v, line, n, old, dl, false);
}

/// One attempt to pin `line` (n references) that never waits for a slot: returns the
/// line's data, nullptr (error logged, e.g. `dl` expired), or a RETRY_* sentinel (nothing
/// held; call again after a back-off with the same `dl`). A `dl` made with timeout 0
/// takes the cache's timeout. (bam::array's coalesced accesses use its two halves,
/// cache_try_hit and cache_acquire_slow, separately: see array_detail::with_line.)
__device__ __forceinline__ char* cache_try_acquire(const bam_array_view& v, uint64_t line, uint32_t n,
                                                   deadline& dl) {
    unsigned long long old;
    if (char* p = cache_try_hit(v, line, n, old)) return p;
    return cache_acquire_slow(v, line, n, old, dl, true);  // sets dl's timeout if 0
}

// The view by value: a reference would make callers keep an addressable copy in local
// memory and read their hit path's fields from it (after every acquire, from L2).
__device__ inline __noinline__ char* cache_acquire_slow(bam_array_view v, uint64_t line, uint32_t n,
                                                        unsigned long long old, deadline& dl, bool once,
                                                        bool keep) {
    using namespace cache_detail;
    const bam_cache_dev* c = cache_of(v);
    word_ref w = line_word(v, line);
    // Gives `dl` the cache's timeout if it has none. Called where its loads (the caller's
    // deadline, then the cache descriptor) wait in the shadow of round trips already in
    // flight, or on the way out: at the top, the miss waited for them (~0.3 us) before
    // issuing its first atomic.
    auto arm = [&] {
        if (dl.timeout_ns == 0) dl.timeout_ns = __ldg(&c->timeout_ns);
    };
    uint32_t spins = 0;
    uint64_t busy_since = 0;
    bool waited = false;
    // The line is valid and we hold n pins on it: hand it out, or drop the pins.
    auto ready = [&](uint64_t slot) -> char* {
        arm();  // the caller may retry with `dl`
        if (keep) {
            stat(v, ST_HITS, 1);
            return slot_ptr(v, slot);
        }
        w.fetch_sub(n, cuda::memory_order_relaxed);  // nothing of the line was touched
        return reinterpret_cast<char*>(RETRY_READY);
    };
    for (;;) {
        if ((old & BUSY) == 0) {
            if (old & VALID) return ready(old >> 32);
            // Relaxed: `old` came from an acquire (our pin, or the wait loop's load), and
            // while we hold a pin no eviction can start, so there is nothing newer to
            // synchronize with. The hand position is drawn in the same round trip (a
            // loser wastes one step of the clock).
            const unsigned long long prev = w.fetch_or(BUSY, cuda::memory_order_relaxed);
            const uint64_t hand = draw_hand(v.clock);
            // Everything the fill reads about the cache and the SSD, issued while the two
            // atomics are in flight and before the first acquire (the slot's CAS) empties
            // L1 (see io_target in bam/io.cuh): two dependent rounds of descriptor
            // loads, and the first candidate slot's tag as soon as the hand is known. In
            // this order the warp stalls on each round only while the others are in
            // flight (claim, descriptors and slot lookup took 1.9 us one after another).
            const uint32_t nslots = __ldg(&c->nslots);
            unsigned long long* tags = reinterpret_cast<unsigned long long*>(__ldg(&c->tags));
            uint32_t ssd;
            uint64_t lba;
            fill_source(v, line, ssd, lba);
            const io_target tg = load_target(c->io, ssd);
            const uint32_t s0 = hand_slot(hand, nslots);
            // The drawn slot's tag and its group's (one 32-byte sector; see take_slot).
            unsigned long long group[4];
#pragma unroll
            for (uint32_t k = 0; k < 4; ++k) {
                const uint32_t sk = (s0 & ~3u) + k;
                group[k] = sk < nslots ? cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(tags[sk]).load(
                                             cuda::memory_order_relaxed)
                                       : ~0ull;
            }
            const unsigned long long tag0 = group[s0 & 3u];
            arm();
            if ((prev & BUSY) == 0) {
                if (prev & VALID) {
                    // Filled by someone else between our load and fetch_or: undo. Acquire
                    // (our fetch_or was relaxed): the filler's data is visible.
                    w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_acq_rel);
                    return ready(prev >> 32);
                }
                // We own the fill: exactly one I/O in flight for this line.
                const int64_t s = take_slot(c, v.clock, nslots, tags, dl, once, s0, tag0, group);
                if (s < 0) {
                    if (s == -1) log_cache_timeout(c, v, line, BAM_CACHE_ERR_NO_SLOT);
                    // Release: pins that waited for BUSY see the line invalid and fill it.
                    w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
                    w.fetch_sub(n, cuda::memory_order_release);
                    return s == -1 ? nullptr : reinterpret_cast<char*>(RETRY_SLOT);
                }
                char* p = slot_ptr(v, s);
                cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> tag(tags[s]);
                const status_t rc = fill_io(v, tg, lba, p);
                if (rc != OK) {
                    // The I/O layer logged the failure with the LBA. The line stays invalid.
                    stat(v, ST_ERRORS, 1);
                    tag.store(0ull, cuda::memory_order_release);
                    w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
                    w.fetch_sub(n, cuda::memory_order_release);
                    return nullptr;
                }
                const unsigned long long owner =
                    BAM_TAG_USED | (static_cast<unsigned long long>(v.id) << 40) | (line & BAM_TAG_LINE_MASK);
                // Publish: slot field := s, VALID on, BUSY off, in one RMW (we hold BUSY,
                // so only the reference count changes concurrently, the slot field is
                // still the one `prev` showed, and no carry crosses the 32-bit boundary).
                // Without `keep`, the same RMW also drops our pins (refs >= n, no borrow).
                // Relaxed RMW, yet a release of the line's data: fill_io's wait ended with
                // a fence after it acquired the completion (bam/queue.cuh, the wait
                // contract), and fence + strong write is a release pattern. The tag
                // store that names the owner and unlocks the slot rides the same fence (an
                // evictor that sees it before the line is valid finds the line busy and
                // leaves it).
                // The same RMW advances the generation (mod 512, no carry into DIRTY),
                // which only the holder of BUSY changes: optimistic readers that read the
                // word before the line left this slot see it changed (array.cuh).
                const unsigned long long gen_step = (prev & GEN) == GEN ? 0ull - GEN : GEN_ONE;
                const unsigned long long delta = ((static_cast<unsigned long long>(s) - (prev >> 32)) << 32) +
                                                 VALID - BUSY + gen_step - (keep ? 0ull : n);
                w.fetch_add(delta, cuda::memory_order_relaxed);
                tag.store(owner, cuda::memory_order_relaxed);
                stat(v, ST_MISSES, 1);
                return keep ? p : reinterpret_cast<char*>(RETRY_READY);
            }
            old = prev;
        }
        // BUSY: someone fills or evicts the line; wait for it (our pin keeps it from
        // being evicted once it is valid).
        arm();
        if (!waited) {
            waited = true;
            stat(v, ST_WAITS, 1);
        }
        if (dl.expired()) {
            log_cache_timeout(c, v, line, BAM_CACHE_ERR_LINE_BUSY);
            w.fetch_sub(n, cuda::memory_order_release);
            return nullptr;
        }
        if (once && spins >= 8) {
            const uint64_t now = globaltimer();
            if (busy_since == 0) {
                busy_since = now;
            } else if (now - busy_since > busy_retry_ns) {
                w.fetch_sub(n, cuda::memory_order_release);
                return reinterpret_cast<char*>(RETRY_BUSY);
            }
        }
        backoff(spins);
        old = w.load(cuda::memory_order_acquire);
    }
}

/// Drops `n` references to a line of the array `v` describes, acquired with
/// cache_acquire; `dirty` marks it modified (the caller's stores to the line precede
/// this call).
__device__ __forceinline__ void cache_release(const bam_array_view& v, uint64_t line, uint32_t n, bool dirty) {
    using namespace cache_detail;
    word_ref w = line_word(v, line);
    if (dirty) w.fetch_or(DIRTY, cuda::memory_order_relaxed);
    // Release: the caller's stores to the line happen-before whoever acquires the word
    // later (an evictor's CAS before it writes the line back).
    w.fetch_sub(n, cuda::memory_order_release);
}

/// Flush (or invalidate) the slots this warp is given: slot = first, first + stride...
/// Every lane of a full warp calls. Lines still pinned are counted and skipped.
/// `only_id` restricts the work to one array (0xffffffff: all); `invalidate` also drops
/// the lines from the cache (used when an array goes away), except a line whose
/// write-back failed: it is the only copy of its data, so it stays in its slot, valid and
/// dirty, in both modes (counted in `failed`, not in `dropped`), and a later flush
/// retries it. The host keeps the array's descriptor and line words while slots may
/// still name its lines (`Array::teardown`).
__device__ inline void cache_flush_slots(const bam_cache_dev* c, uint64_t first, uint64_t stride, uint32_t only_id,
                                         bool invalidate, bam_flush_result* res) {
    using namespace cache_detail;
    const uint32_t lane = lane_id();
    const uint32_t nslots = __ldg(&c->nslots);
    unsigned long long* tags = reinterpret_cast<unsigned long long*>(__ldg(&c->tags));
    for (uint64_t s = first; s < nslots; s += stride) {
        // Lane 0 locks the slot and claims the line; the warp writes it back.
        unsigned long long t = 0;
        int action = 0;  // 0 skip, 1 write back, 2 drop only
        uint64_t line = 0;
        uint32_t id = 0;
        if (lane == 0) {
            cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> tag(tags[s]);
            deadline dl(__ldg(&c->timeout_ns));
            uint32_t spins = 0;
            for (;;) {
                t = tag.load(cuda::memory_order_relaxed);
                if ((t & BAM_TAG_LOCK) == 0 &&
                    tag.compare_exchange_strong(t, t | BAM_TAG_LOCK, cuda::memory_order_acquire,
                                                cuda::memory_order_relaxed))
                    break;
                if (dl.expired()) {
                    t = ~0ull;
                    break;
                }
                backoff(spins);
            }
            if (t == ~0ull) {
                atomicAdd(reinterpret_cast<unsigned long long*>(&res->pinned), 1ull);
            } else if (t != 0) {
                id = static_cast<uint32_t>((t & ~(BAM_TAG_LOCK | BAM_TAG_USED)) >> 40);
                line = t & BAM_TAG_LINE_MASK;
                if (only_id == 0xffffffffu || id == only_id) {
                    word_ref w = desc_word(arr_desc(c, id), line);
                    unsigned long long cur = w.load(cuda::memory_order_relaxed);
                    const bool idle = (cur & (VALID | BUSY | REFS)) == VALID && (cur >> 32) == s;
                    if (idle && (invalidate || (cur & DIRTY)) && w.compare_exchange_strong(cur, cur | BUSY, cuda::memory_order_acquire,
                                                          cuda::memory_order_relaxed)) {
                        action = (cur & DIRTY) ? 1 : 2;
                    } else if (cur & (REFS | BUSY)) {
                        atomicAdd(reinterpret_cast<unsigned long long*>(&res->pinned), 1ull);
                    }
                }
            }
        }
        action = __shfl_sync(0xffffffffu, action, 0);
        if (action == 0) {
            if (lane == 0 && t != ~0ull)
                cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(tags[s]).store(
                    t, cuda::memory_order_release);
            continue;
        }
        line = shfl_u64(0xffffffffu, line, 0);
        id = __shfl_sync(0xffffffffu, id, 0);
        const bam_cache_arr& a = arr_desc(c, id);
        status_t rc = OK;
        if (action == 1) {
            const uint32_t copies = __ldg(&a.layout) == BAM_LAYOUT_STRIPE ? 1u : __ldg(&a.nssd);
            for (uint32_t r = 0; r < copies; ++r) {
                uint32_t ssd;
                uint64_t lba;
                locate(a, line, r, ssd, lba);
                const status_t x = warp_write(c->io, ssd, lba, __ldg(&a.line_lbas), slot_ptr(c, s));
                if (rc == OK) rc = x;
            }
        }
        if (lane == 0) {
            word_ref w = desc_word(a, line);
            if (action == 1) {
                stat(c, ST_WRITES, __ldg(&a.layout) == BAM_LAYOUT_STRIPE ? 1u : __ldg(&a.nssd));
                stat(c, ST_WRITEBACKS, 1);
                if (rc == OK) {
                    atomicAdd(reinterpret_cast<unsigned long long*>(&res->written), 1ull);
                } else {
                    atomicAdd(reinterpret_cast<unsigned long long*>(&res->failed), 1ull);
                    stat(c, ST_ERRORS, 1);
                }
            }
            // Every outcome clears BUSY with a release. A write-back that completed, with
            // success or an error status, read the slot before its completion was posted,
            // and warp_write acquired that completion and then fenced (the wait contract,
            // queue.cuh): the reads happen-before whatever a pin that sees BUSY clear
            // does to the line. (A timed-out command may still be in flight: that is the
            // I/O layer's timeout contract, the same for evictions.) A later flusher's
            // or evictor's acquiring CAS on the word reads from this release sequence.
            if (rc != OK) {
                // The write-back failed (the I/O layer logged it): the slot holds the only
                // copy of the data. Keep the line valid and dirty in its slot, in
                // invalidate mode too (tag unchanged, not dropped), so that a later flush
                // retries it.
                w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
            } else if (invalidate) {
                // Clean or written back: the line leaves the cache; a later pin finds it
                // invalid and reads it from the SSD, after our write.
                w.fetch_and(~static_cast<unsigned long long>(FLAGS), cuda::memory_order_release);
                atomicAdd(reinterpret_cast<unsigned long long*>(&res->dropped), 1ull);
                t = 0;  // slot becomes empty
            } else {
                w.fetch_and(~static_cast<unsigned long long>(BUSY | DIRTY), cuda::memory_order_release);
            }
            // Unlock the slot (release: a slot left empty is filled by a taker that
            // locked it with an acquiring CAS, so only after the write-back's reads of it).
            cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(tags[s]).store(
                t, cuda::memory_order_release);
        }
        __syncwarp();
    }
}

}  // namespace bam
