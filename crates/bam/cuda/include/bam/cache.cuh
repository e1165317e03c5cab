// bam/cache.cuh — the software cache in GPU memory (dissertation §5.3.2).
//
// Data structures (cache_abi.h):
//  * one 64-bit line word per line of backing data of every array:
//      high 32 bits: the slot holding the line (meaningful while VALID)
//      low 32 bits:  the state word, VALID | BUSY | DIRTY | 9-bit generation |
//                    20-bit reference count.
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
//    not VALID, not BUSY      -> W.fetch_or(BUSY): the winner posts the line to the fill
//                                service (one request in flight per line) and waits, with
//                                the losers, for BUSY to clear (keeping its pins).
//    BUSY (fill or eviction)  -> wait (bounded) and look again.
//  fill (the fill service's kernel, bam/detail/cache_service.cuh): find a slot (clock, evicting
//    a victim), read the line into it, then one fetch_add that sets VALID, clears BUSY
//    and stores the slot index (a release). On failure it clears BUSY alone: the poster,
//    whose pins kept anyone else from touching the line, reports the error.
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
//    a refill into the same slot also advanced the generation), so w2 differs. The
//    generation has 9 bits, so the read is also dropped when w1 and w2 were loaded more
//    than UNPINNED_WINDOW_NS apart (512 refills take far longer).
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
#include "nvme.cuh"
#include "util.cuh"

namespace bam {

namespace detail {

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
/// The longest an unpinned read may take from its first load of the line word to its
/// second (globaltimer): past it the read is dropped (cache_read_unpinned). 512 refills
/// of one line, each an eviction and a fill's I/O after the one before, take far longer
/// (one miss on the simulated array alone takes microseconds).
constexpr uint64_t UNPINNED_WINDOW_NS = 50000;

/// What happens between an unpinned read's loads: nothing (a test passes a hook that
/// plays a warp descheduled there).
struct no_pause {
    __device__ __forceinline__ void operator()(int) const {}
};

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
    ST_READAHEADS,
};

/// The address of this SM's shard of the statistics at `stats`.
__device__ __forceinline__ uint64_t stat_shard(uint64_t stats) {
    return stats + (smid() % BAM_CACHE_STAT_SHARDS) * sizeof(bam_cache_stats);
}
/// A relaxed RED of `val` on counter `f` of the shard at `shard`, on the global address
/// (the statistics are cudaMalloc'd; converted with cvta, which is what the PTX model
/// requires of a generic address): atomicAdd on a generic pointer compiles to a test for
/// the shared window and a CAS loop besides.
__device__ __forceinline__ void stat_red(uint64_t shard, stat_field f, uint64_t val) {
    const uint64_t p = shard + f * sizeof(uint64_t);
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(__cvta_generic_to_global(reinterpret_cast<void*>(p))),
                 "l"(static_cast<unsigned long long>(val))
                 : "memory");
}
/// Adds `accesses` and `hits` to this SM's shard of the statistics at `stats` (non-zero):
/// both REDs unconditionally (a count of 0 adds nothing), the shard's address computed
/// once. The access counting of bam::array's read and store hit paths.
__device__ __forceinline__ void stat_accesses_hits(uint64_t stats, uint64_t accesses, uint64_t hits) {
    const uint64_t shard = stat_shard(stats);
    stat_red(shard, ST_ACCESSES, accesses);
    stat_red(shard, ST_HITS, hits);
}
/// Adds `val` to counter `f` of this SM's shard of the statistics at `stats` (a
/// fire-and-forget RED; nothing waits for it). Every lane of an SM adds to the same
/// shard, so paths that many lanes take at once (an access, a hit) add up their lanes'
/// counts first and make one RED per warp: with one RED per lane, random 8-byte hits
/// through bam::array ran markedly slower than with one per warp.
__device__ __forceinline__ void stat_at(uint64_t stats, stat_field f, uint64_t val) {
    if (stats == 0 || val == 0) return;
    stat_red(stat_shard(stats), f, val);
}
/// The access and hit counters (ST_ACCESSES, ST_HITS) of an array: counted through the
/// view, whose `stats` is 0 unless the cache was made with CacheConfig::count_hits (they
/// are on every access's path; the other counters, counted on the miss, fill and
/// eviction paths through the cache descriptor, are always on). No global read.
__device__ __forceinline__ void stat(const bam_array_view& v, stat_field f, uint64_t val) { stat_at(v.stats, f, val); }
/// The other counters (misses, evictions, I/O, waits, errors), and the paths that work by
/// slot (eviction, flush).
__device__ __forceinline__ void stat(const bam_cache_dev* c, stat_field f, uint64_t val) {
    stat_at(__ldg(&c->stats), f, val);
}

/// The key of line `line` of array `id`: a fill request, and the lanes that group by line.
__device__ __forceinline__ uint64_t line_key(uint32_t id, uint64_t line) {
    return (static_cast<uint64_t>(id) << 40) | line;
}

__device__ __forceinline__ const bam_cache_dev* cache_of(const bam_array_view& v) {
    return reinterpret_cast<const bam_cache_dev*>(v.cache);
}

/// The view of array `id` as the host made it (the cache's table of views in global
/// memory): the out-of-line paths take (cache, id) instead of a 96-byte view, which a
/// caller would otherwise keep as an addressable copy in local memory, and read from it
/// on its hit path too.
/// The cache's table of array views: at a fixed offset from the descriptor
/// (BAM_CACHE_VIEWS_OFFSET), so one round trip (a pointer to the table in the descriptor
/// made it two, on every miss).
__device__ __forceinline__ const bam_array_view* views_of(const bam_cache_dev* c) {
    return reinterpret_cast<const bam_array_view*>(reinterpret_cast<const char*>(c) + BAM_CACHE_VIEWS_OFFSET);
}

__device__ __forceinline__ bam_array_view view_of(const bam_cache_dev* c, uint32_t id) { return views_of(c)[id]; }

/// Array `id`'s placement hint in the table of views (bam_array_view::place), read
/// relaxed: the host changes it while the fill service runs (Array::make_resident).
__device__ __forceinline__ uint32_t place_of(const bam_cache_dev* c, uint32_t id) {
    return cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(const_cast<uint32_t&>(views_of(c)[id].place))
        .load(cuda::memory_order_relaxed);
}

__device__ __forceinline__ const bam_cache_arr& arr_desc(const bam_cache_dev* c, uint32_t id) {
    return reinterpret_cast<const bam_cache_arr*>(__ldg(&c->arrays))[id];
}

/// The count of read-aheads of array `id` in flight (bam_cache_arr.prefetching).
__device__ __forceinline__ word_ref prefetching_of(const bam_cache_dev* c, uint32_t id) {
    return word_ref(*reinterpret_cast<unsigned long long*>(const_cast<uint64_t*>(&arr_desc(c, id).prefetching)));
}

/// The number of lines of `n` elements, `elems_per_line` to a line (a division:
/// out-of-line paths that get the array as scalars call this; views have lines_of).
__host__ __device__ __forceinline__ uint64_t lines_for(uint64_t n, uint32_t elems_per_line) {
    return (n + elems_per_line - 1) / elems_per_line;
}

/// The number of lines of the array a view describes (a shift when the elements per line
/// are a power of two).
__host__ __device__ __forceinline__ uint64_t lines_of(const bam_array_view& v) {
    return v.epl_shift != BAM_EPL_NO_SHIFT ? (v.n + v.epl - 1) >> v.epl_shift : lines_for(v.n, v.epl);
}

/// The line word of `line` of the array a view describes.
__device__ __forceinline__ word_ref line_word(const bam_array_view& v, uint64_t line) {
    return word_ref(reinterpret_cast<unsigned long long*>(v.words)[line]);
}

/// The line word of `line` of the array a view describes, as a global-space address (the
/// words are cuMemAlloc'd) for the hit path's atomics below: an atomic on a generic
/// address compiles to a test for the shared window and a CAS loop besides.
__device__ __forceinline__ uint64_t line_word_global(const bam_array_view& v, uint64_t line) {
    return __cvta_generic_to_global(reinterpret_cast<unsigned long long*>(v.words) + line);
}

/// Pins the line word at global address `g` with `n` references; returns its old value.
/// Acquire (device scope): a VALID it reads makes the fill's data, and the stores of
/// earlier holders (through the release sequence), visible.
__device__ __forceinline__ unsigned long long word_pin(uint64_t g, uint32_t n) {
    unsigned long long old;
    asm volatile("atom.acquire.gpu.global.add.u64 %0, [%1], %2;"
                 : "=l"(old)
                 : "l"(g), "l"(static_cast<unsigned long long>(n))
                 : "memory");
    return old;
}

/// Drops `n` references from the line word at global address `g` (a RED: nothing waits
/// for it). Release: the caller's accesses to the line happen-before whoever acquires the
/// word later (an evictor's CAS before it writes the line back).
__device__ __forceinline__ void word_unpin_release(uint64_t g, uint32_t n) {
    asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(g), "l"(0ull - n) : "memory");
}

/// Drops `n` references from the line word at global address `g`, relaxed: for a pin that
/// touched nothing of the line (it was not valid).
__device__ __forceinline__ void word_unpin_relaxed(uint64_t g, uint32_t n) {
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(g), "l"(0ull - n) : "memory");
}

/// Marks the line word at global address `g` dirty (relaxed: the release that unpins
/// after it orders it with the caller's stores).
__device__ __forceinline__ void word_mark_dirty(uint64_t g) {
    asm volatile("red.relaxed.gpu.global.or.b64 [%0], %1;" ::"l"(g), "l"(static_cast<unsigned long long>(DIRTY))
                 : "memory");
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
    const uint64_t line_lbas = a.line_lbas;
    if (nssd == 1) {  // no division on the common path
        ssd = a.first_ssd;
        lba = a.start_lba + line * line_lbas;
        return;
    }
    if (a.layout == BAM_LAYOUT_STRIPE) {
        uint32_t r;
        const uint64_t q = div_u64_u32(line, nssd, r);  // not `/` and `%`: see div_u64_u32
        ssd = a.first_ssd + r;
        lba = a.start_lba + q * line_lbas;
    } else {
        ssd = a.first_ssd + replica % nssd;
        lba = a.start_lba + line * line_lbas;
    }
}

template <typename A>
__device__ __forceinline__ void log_cache_timeout(const bam_cache_dev* c, const A& a, uint64_t line,
                                                  uint32_t detail) {
    uint32_t ssd;
    uint64_t lba;
    locate(a, line, 0, ssd, lba);
    record_error(c->io, BAM_ERR_TIMEOUT, static_cast<uint16_t>(ssd), 0, 0xffff, nvme::OP_READ, lba, a.line_lbas,
                 detail);
    stat(c, ST_ERRORS, 1);
}

/// Results of cache_try_acquire / cache_acquire_slow other than a line address or
/// nullptr (error): nothing is held, try again. RETRY_BUSY: the line stayed busy (being
/// filled or evicted) for busy_retry_ns; RETRY_READY: the line is valid now (filled or
/// found so), but the caller asked not to keep it (`keep` false): pin it again, it is
/// most likely a hit.
constexpr uintptr_t RETRY_BUSY = 2;
constexpr uintptr_t RETRY_READY = 3;
__device__ __forceinline__ bool is_retry(const char* p) {
    const uintptr_t v = reinterpret_cast<uintptr_t>(p);
    return v >= RETRY_BUSY && v <= RETRY_READY;
}
/// How long cache_try_acquire waits for a busy line before it gives up its pin: long
/// enough for a fill or a write-back in flight (tens of microseconds), short enough that
/// a warp never keeps slots pinned for long while one of its lanes waits.
constexpr uint64_t busy_retry_ns = 200000;

}  // namespace detail

/// The miss path of cache_acquire / cache_try_acquire, out of line so that the hit path
/// stays small (few registers, high occupancy). The caller holds `n` pins on the line and
/// `old` is the word value its pin returned. `once`: give up (RETRY_*, nothing held,
/// nothing logged) instead of waiting for a slot or, longer than busy_retry_ns, for a
/// busy line. `keep` false: once the line is valid, drop the pins and return RETRY_READY
/// instead of the data (for callers that must not hold a line while others wait for
/// them; see bam::detail::with_line).
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
    using namespace detail;
    // Acquire: on a hit this reads from the filler's release (or a later RMW), so the
    // line's data is visible.
    old = word_pin(line_word_global(v, line), n);
    if ((old & (VALID | BUSY)) == VALID) {
        if (count_hit) stat(v, ST_HITS, 1);
        return slot_ptr(v, old >> 32);
    }
    return nullptr;
}

namespace detail {
/// Loads a T from `p` with acquire semantics (device scope), as acquire loads of the
/// largest power-of-two chunk (up to 8 bytes) that divides sizeof(T): `p` is aligned to
/// it (elements sit at multiples of sizeof(T) from a slot, which is 512-byte aligned).
/// Every chunk is an acquire, so no memory access after the call is performed before any
/// of them. `p` is in global memory (a cache slot: cuMemAlloc'd), so the loads name the
/// global state space (LDG; a generic load first tests for the shared window).
template <typename T>
__device__ __forceinline__ T load_acquire(const T* p) {
    constexpr size_t C = sizeof(T) % 8 == 0 ? 8 : sizeof(T) % 4 == 0 ? 4 : sizeof(T) % 2 == 0 ? 2 : 1;
    struct {
        alignas(T) unsigned char b[sizeof(T)];
    } u;
    const uint64_t g = __cvta_generic_to_global(p);
#pragma unroll
    for (size_t k = 0; k < sizeof(T); k += C) {
        if constexpr (C == 8) {
            unsigned long long x;
            asm volatile("ld.global.acquire.gpu.b64 %0, [%1];" : "=l"(x) : "l"(g + k) : "memory");
            memcpy(u.b + k, &x, 8);
        } else if constexpr (C == 4) {
            unsigned int x;
            asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(x) : "l"(g + k) : "memory");
            memcpy(u.b + k, &x, 4);
        } else if constexpr (C == 2) {
            unsigned short x;
            asm volatile("ld.global.acquire.gpu.b16 %0, [%1];" : "=h"(x) : "l"(g + k) : "memory");
            memcpy(u.b + k, &x, 2);
        } else {
            unsigned int x;
            asm volatile("ld.global.acquire.gpu.u8 %0, [%1];" : "=r"(x) : "l"(g + k) : "memory");
            u.b[k] = static_cast<unsigned char>(x);
        }
    }
    T t;
    memcpy(&t, u.b, sizeof(T));
    return t;
}
}  // namespace detail

/// Reads the element of type T at byte `off` of line `line` without pinning it (one
/// thread; no atomic RMW): returns true with the value in `out` if the line was valid and
/// stayed in its slot while it was read, false otherwise (nothing held, `out` unchanged;
/// use a pinning path then). Cheaper than a pin and release on a hit (three loads instead
/// of two atomics on the line word; the probe benches/probe/ hit_path_probe.cu compares
/// them), and many readers of one line do not contend. Stores must pin (cache_acquire):
/// an eviction waits only for pins.
///
/// Memory ordering: the first load of the word is an acquire, so a VALID it reads makes
/// the filler's data visible (the fill publishes VALID with a release, see
/// cache_acquire_slow). The element is read with acquire loads, so the second load of
/// the word is performed after them. Anything that changes a slot's data is preceded by
/// a BUSY (eviction, invalidation) and, for a refill into the same slot, a new
/// generation; so if the element read saw such a change, the second load sees the word
/// changed and the read is dropped. (A fence between the element and the second load
/// orders the same, but waits for every store and RED the thread has in flight:
/// measurably slower on the probe.) The generation has 9 bits: the line refilled into the
/// same slot 512 times between the two loads would leave the word as it was, with
/// another line's data read in between (a warp descheduled for milliseconds: another
/// context, MPS, a debugger). So the read is also dropped when the loads lie more than
/// UNPINNED_WINDOW_NS apart on the global timer, far less than 512 refills take. `pause`
/// (tests only) runs between the first load and the element's (0) and between the
/// element's and the second load (1).
template <typename T, typename Pause = detail::no_pause>
__device__ __forceinline__ bool cache_read_unpinned(const bam_array_view& v, uint64_t line, uint32_t off, T& out,
                                                    Pause pause = {}) {
    using namespace detail;
    // The line words are cuMemAlloc'd: global-space loads (as word_ref's acquire and
    // relaxed loads, without a generic address's shared-window test).
    const uint64_t word_addr = __cvta_generic_to_global(reinterpret_cast<const unsigned long long*>(v.words) + line);
    unsigned long long w1, w2;
    const uint64_t t0 = globaltimer();  // before the first load is issued (both asm volatile)
    asm volatile("ld.global.acquire.gpu.b64 %0, [%1];" : "=l"(w1) : "l"(word_addr) : "memory");
    if ((w1 & (VALID | BUSY)) != VALID) return false;
    pause(0);
    const T x = load_acquire(reinterpret_cast<const T*>(slot_ptr(v, w1 >> 32) + off));
    pause(1);
    asm volatile("ld.global.relaxed.gpu.b64 %0, [%1];" : "=l"(w2) : "l"(word_addr) : "memory");
    // Read while the second load is in flight (after it was issued: asm volatile), so
    // that the timer adds no latency; the window it measures misses at most the loads'
    // own latencies, microseconds.
    const uint64_t t1 = globaltimer();
    if (((w1 ^ w2) & SEQ_BITS) != 0 || t1 - t0 > UNPINNED_WINDOW_NS) return false;
    out = x;
    return true;
}

namespace detail {
/// The fill ring's marks of given-up tickets (post_fill): one u32 per entry, right after
/// the ring's last entry (the host allocates them with the ring).
__device__ __forceinline__ uint32_t* fill_ring_given_up(unsigned long long* ring, uint32_t shift) {
    return reinterpret_cast<uint32_t*>(ring + (1ull << shift));
}

/// Hands line `line` of array `id` to the fill service (bam/detail/cache_service.cuh): takes a
/// ticket of the fill ring and writes the request into its entry. The caller holds the
/// line's BUSY bit, so at most one request per line is in flight, and the ring has more
/// entries than a GPU has threads (the host sizes it), so the entry is free at once unless
/// the service stopped taking requests. Returns false if it did not come free before `dl`
/// expired: the ticket is then given up with a mark behind the ring (its lap + 1 in the
/// u32 after the ring's last entry, at the same index), and the service skips it when
/// it gets there (take_requests), so a lost ticket cannot stall the ring (only a service
/// that stopped taking requests gets there).
///
/// Memory ordering: the release store that posts ours orders the BUSY we set on the line
/// before it (the service's acquire load of the entry reads it). The load that finds the
/// entry free is relaxed: the service read the previous request before it freed the
/// entry, both on this one location, so coherence alone keeps that read from seeing our
/// post (take_requests in bam/detail/cache_service.cuh).
__device__ inline bool post_fill(const bam_cache_dev* c, uint64_t key, deadline& dl) {
    bam_fill_ctl* ctl = reinterpret_cast<bam_fill_ctl*>(__ldg(&c->fill_ctl));
    unsigned long long* ring = reinterpret_cast<unsigned long long*>(__ldg(&c->ring));
    const uint32_t shift = __ldg(&c->ring_shift);
    const uint64_t t = word_ref(*reinterpret_cast<unsigned long long*>(&ctl->tail)).fetch_add(1ull, cuda::memory_order_relaxed);
    word_ref e(ring[t & ((1ull << shift) - 1)]);
    const unsigned long long free_state = ((t >> shift) & 7ull) << BAM_FILL_LAP_SHIFT;
    uint32_t spins = 0;
    while (e.load(cuda::memory_order_relaxed) != free_state) {
        if (dl.expired()) {
            // Never posted: the service skips the ticket when it sees this mark.
            atomic_dev<uint32_t>(fill_ring_given_up(ring, shift)[t & ((1ull << shift) - 1)])
                .store(static_cast<uint32_t>(t >> shift) + 1u, cuda::memory_order_relaxed);
            return false;
        }
        backoff(spins);
    }
    e.store(free_state | BAM_FILL_POSTED | key, cuda::memory_order_release);
    return true;
}

/// What claim_fill found.
enum class claim { waiting, valid, failed };

/// The step of a miss for a thread that holds `n` pins on line `line` and last saw its
/// word neither valid nor busy: the one miss protocol of cache_acquire_slow and
/// bam::array's access_lanes. `requested`: this thread posted the line's fill before
/// (set here when it posts). Returns
///  * waiting: the line is busy (our fill, or someone else's fill or eviction): wait;
///  * valid: it was filled between the caller's look and our claim; `prev` holds the word
///    (with its slot), and the undo of our claim was an acquire, so the data is visible;
///  * failed: our fill failed (the service logged why), or it could not be posted (logged
///    here); our pins are dropped.
/// Gives `dl` the cache's timeout if it has none, after the claim's atomic is issued.
__device__ __forceinline__ claim claim_fill(const bam_array_view& v, uint64_t line, uint32_t n, deadline& dl,
                                            bool& requested, unsigned long long& prev) {
    const bam_cache_dev* c = cache_of(v);
    word_ref w = line_word(v, line);
    if (requested) {
        // The service cleared BUSY without VALID: the fill failed, and the service logged
        // why (I/O error, or no slot for the cache timeout). While we hold our pins
        // nothing else clears BUSY or VALID of this line: an eviction or a flush needs it
        // unreferenced.
        word_unpin_release(line_word_global(v, line), n);
        return claim::failed;
    }
    // Relaxed: the caller's look was an acquire, and while we hold a pin no eviction can
    // start, so there is nothing newer to synchronize with.
    prev = w.fetch_or(BUSY, cuda::memory_order_relaxed);
    if (dl.timeout_ns == 0) dl.timeout_ns = __ldg(&c->timeout_ns);  // in the atomic's shadow
    if (prev & BUSY) return claim::waiting;
    if (prev & VALID) {
        // Filled by someone else between the look and our fetch_or: undo. Acquire (our
        // fetch_or was relaxed): the filler's data is visible.
        w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_acq_rel);
        return claim::valid;
    }
    // We own the fill: exactly one request in flight for this line. The service clears
    // BUSY when it is done, with VALID on success.
    if (!post_fill(c, line_key(v.id, line), dl)) {
        log_cache_timeout(c, v, line, BAM_CACHE_ERR_NO_SLOT);
        // Release: pins that waited for BUSY see the line invalid and retry.
        w.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
        word_unpin_release(line_word_global(v, line), n);
        return claim::failed;
    }
    requested = true;
    return claim::waiting;
}

/// read_ahead's work (below), out of line and from scalars (a view by reference would
/// make every kernel keep an addressable copy of its view; inlined, the read-ahead cost
/// the suite's ported kernels 16 to 32 bytes of stack each under a 40-register budget).
/// `words`: the array's line words; `n`, `elems_per_line`, `line_bytes`: its elements,
/// elements per line and line size; `elem`: sizeof(T). The divisions that turn these into
/// the line count and the grid stride in lines are done here: inlined, each is a call of
/// the 64-bit division helper in the caller's loop, and every call site there costs the
/// kernel registers.
__device__ inline __noinline__ void read_ahead_lines(const bam_cache_dev* c, unsigned long long* words, uint64_t n,
                                              uint32_t elems_per_line, uint32_t line_bytes, uint32_t elem,
                                              uint32_t id, uint64_t line, uint32_t set) {
    const uint64_t lines = lines_for(n, elems_per_line);
    // Lines per grid stride (at least 1).
    const uint64_t stride_bytes = static_cast<uint64_t>(gridDim.x) * blockDim.x * elem;
    const uint64_t step = stride_bytes >= line_bytes ? stride_bytes / line_bytes : 1;
    const uint32_t r = __popc(set & lanemask_lt());
    // Lane 0 looks at line - 1, lane 1 at line + 1, lanes 2 .. 1 + MAX at the targets; the
    // depth is read beside them (a target beyond it is looked at, not taken).
    constexpr uint32_t MAX = BAM_CACHE_MAX_READAHEAD;
    uint64_t target = ~0ull;
    if (r == 0) {
        if (line > 0) target = line - 1;
    } else if (r == 1) {
        target = line + 1;
    } else if (r <= MAX + 1) {
        target = line + (r - 1) * step;
    }
    const bool have = target < lines;
    unsigned long long w = 0;
    if (have) w = word_ref(words[target]).load(cuda::memory_order_relaxed);
    const uint32_t depth = __ldg(&c->readahead);
    // (Requiring one of them busy as well, i.e. a scan front going by, spared bfs some
    // useless read-ahead but took most of it from histogram and rmw: docs/cache.md,
    // "Read-ahead".)
    const bool neighbour_ok = r > 1 || (have && (w & (VALID | BUSY)) != 0);
    if (depth == 0 || !__all_sync(set, neighbour_ok)) return;
    if (r < 2 || r - 1 > depth || !have || (w & (VALID | BUSY)) != 0) return;
    word_ref target_word(words[target]);
    // Relaxed: a line neither valid nor busy has no data to synchronize with, and the
    // post below is a release (the service sees our BUSY).
    const unsigned long long prev = target_word.fetch_or(BUSY, cuda::memory_order_relaxed);
    if (prev & BUSY) return;  // someone's fill or eviction: theirs
    if (prev & VALID) {
        // Filled since our look: undo (it was not busy, so nobody else set BUSY meanwhile).
        target_word.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_relaxed);
        return;
    }
    word_ref pending = prefetching_of(c, id);
    pending.fetch_add(1ull, cuda::memory_order_relaxed);  // before the post: the service subtracts
    // The ring has twice as many entries as the GPU has threads, so the entry is free
    // unless the service is far behind; then the post waits for it as a miss's does, with
    // the same bound (a ticket taken is never abandoned: the service would stall on it).
    deadline dl(__ldg(&c->timeout_ns));
    if (!post_fill(c, line_key(id, target) | BAM_FILL_PREFETCH, dl)) {
        // Only a dead service gets here. Release: waiters that saw BUSY look again.
        target_word.fetch_and(~static_cast<unsigned long long>(BUSY), cuda::memory_order_release);
        pending.fetch_sub(1ull, cuda::memory_order_release);
    }
}

/// Read-ahead of a streaming miss. Called by the lanes of `set` (a warp or part of one)
/// when every one of them missed in `line`: if the line's neighbours, line - 1 and
/// line + 1, are both cached or being filled (a scan goes over them), the lanes ask the
/// fill service for the lines 1 .. cache->readahead grid strides ahead (a grid stride: the
/// bytes one step of a grid-stride loop reads, in lines: where this warp goes next in
/// such a loop, and a line every scan reads sooner or later), each lane one line, with
/// one round trip for all the looks. Nobody waits for these fills: a lane that takes a
/// line (sets its BUSY while it is neither valid nor busy) posts it with
/// BAM_FILL_PREFETCH, and the array's `prefetching` count keeps the flush that drops the
/// array waiting until the service is done with it. No pin is taken: a line that is
/// not valid holds no slot, and the service publishes it valid (or clears BUSY on a
/// failure) as for a miss, so every reader of it waits for BUSY as for any fill. The look
/// costs the miss one round trip (the single-miss latency bench, which reads one line with
/// a whole warp, pays it). A random access whose neighbours happen to be cached reads
/// ahead for nothing (a BFS level with a quarter-size cache runs measurably slower with
/// it: docs/cache.md, "Read-ahead").
template <typename T>
__device__ __forceinline__ void read_ahead(const bam_array_view& v, uint64_t line, uint32_t set) {
    read_ahead_lines(cache_of(v), reinterpret_cast<unsigned long long*>(v.words), v.n, v.epl, v.line_bytes,
                     static_cast<uint32_t>(sizeof(T)), v.id, line, set);
}
}  // namespace detail

/// Pins line `line` of the array `v` describes with `n` references (one thread; n >= 1)
/// and returns the address of its data; on a miss the fill service reads it from the
/// SSDs. Waits (bounded by the cache timeout) for the fill or a busy line. Returns nullptr after
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

/// One attempt to pin `line` (n references) that waits for a fill or a busy line no longer
/// than busy_retry_ns: returns the
/// line's data, nullptr (error logged, e.g. `dl` expired), or a RETRY_* sentinel (nothing
/// held; call again after a back-off with the same `dl`). A `dl` made with timeout 0
/// takes the cache's timeout. (bam::array's coalesced accesses use its two halves,
/// cache_try_hit and cache_acquire_slow, separately: see detail::with_line.)
__device__ __forceinline__ char* cache_try_acquire(const bam_array_view& v, uint64_t line, uint32_t n,
                                                   deadline& dl) {
    unsigned long long old;
    if (char* p = cache_try_hit(v, line, n, old)) return p;
    return cache_acquire_slow(v, line, n, old, dl, true);  // sets dl's timeout if 0
}

// The view by value: a reference would make callers keep an addressable copy in local
// memory and read their hit path's fields from it (after every acquire, from L2).
//
// A miss does no I/O here: the thread that sets the line's BUSY bit posts the line to the
// fill service (detail::post_fill), and every thread waits for BUSY to clear. The
// service (its own kernel, bam/detail/cache_service.cuh) takes a slot, evicting a victim, reads
// the line into it and publishes it valid. So this path, inlined into or called from
// every kernel that uses bam::array, holds no I/O code: a kernel gets as many registers as
// its own work needs (with the fill inlined here it got the I/O path's register count,
// whatever it did).
__device__ inline __noinline__ char* cache_acquire_slow(bam_array_view v, uint64_t line, uint32_t n,
                                                        unsigned long long old, deadline& dl, bool once,
                                                        bool keep) {
    using namespace detail;
    const bam_cache_dev* c = cache_of(v);
    word_ref w = line_word(v, line);
    // Gives `dl` the cache's timeout if it has none (its load waits in the shadow of the
    // round trips already in flight).
    auto arm = [&] {
        if (dl.timeout_ns == 0) dl.timeout_ns = __ldg(&c->timeout_ns);
    };
    uint32_t spins = 0;
    uint64_t busy_since = 0;
    bool waited = false;
    bool requested = false;  // we posted this line's fill and wait for it
    // The line is valid and we hold n pins on it: hand it out, or drop the pins.
    auto ready = [&](uint64_t slot) -> char* {
        arm();  // the caller may retry with `dl`
        if (keep) {
            if (!requested) stat(v, ST_HITS, 1);
            return slot_ptr(v, slot);
        }
        word_unpin_relaxed(line_word_global(v, line), n);  // nothing of the line was touched
        return reinterpret_cast<char*>(RETRY_READY);
    };
    for (;;) {
        if ((old & BUSY) == 0) {
            // Acquire (the initial pin, or the loads below): a VALID read here makes the
            // fill's data visible (the service publishes it with a release).
            if (old & VALID) return ready(old >> 32);
            unsigned long long prev = 0;
            const claim r = claim_fill(v, line, n, dl, requested, prev);
            if (r == claim::failed) return nullptr;
            if (r == claim::valid) return ready(prev >> 32);
        }
        // BUSY: our fill, or someone's fill or eviction; wait for it (our pin keeps the
        // line from being evicted once it is valid).
        arm();
        if (!waited && !requested) {
            waited = true;
            stat(c, ST_WAITS, 1);
        }
        if (dl.expired()) {
            // The fill may still complete later: BUSY stays with the service.
            log_cache_timeout(c, v, line, BAM_CACHE_ERR_LINE_BUSY);
            word_unpin_release(line_word_global(v, line), n);
            return nullptr;
        }
        if (once && spins >= 8) {
            const uint64_t now = globaltimer();
            if (busy_since == 0) {
                busy_since = now;
            } else if (now - busy_since > busy_retry_ns) {
                // Our own request stays posted: the service fills the line meanwhile.
                word_unpin_release(line_word_global(v, line), n);
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
    using namespace detail;
    const uint64_t g = line_word_global(v, line);
    if (dirty) word_mark_dirty(g);
    // Release: the caller's stores to the line happen-before whoever acquires the word
    // later (an evictor's CAS before it writes the line back).
    word_unpin_release(g, n);
}


}  // namespace bam
