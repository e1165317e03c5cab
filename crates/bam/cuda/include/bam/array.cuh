// bam/array.cuh — storage as an array: bam::array<T>, bam::array_ref<T> and the
// cache-line-aware helpers (dissertation §5.3.3 and §6.2).
//
//   __global__ void k(bam::array<float> data, ...) {
//       float x = data[i];            // warp-coalesced read through the cache
//       data.store(j, x + 1.0f);      // write; marks the line dirty
//       data.fetch_add(k, 1.0f);      // atomic read-modify-write, written back the same way
//       bam::array_ref<float> ref(data);
//       x = ref[i] + ref[i + 1];      // keeps the line pinned while it stays there
//   }
//
// bam::array<T> is exactly a bam_array_view (112 bytes), so the host passes the view
// that `Array<T>::view()` returns as the kernel argument.
//
// Resident views (`Array::make_resident` on the host: every line of the array read in and
// pinned) take none of the paths below: a read is one plain load when the lines sit in one
// run of slots, two (the line's slot from a table, then the element) otherwise, and a
// store a plain store that marks its line dirty once. Same kernel code; the host chooses
// the view.
//
// Reads (`a[i]`, try_read) on a hit pin nothing: each lane reads its line's word, its
// element and the word again (cache_read_unpinned, a sequence lock in cache.cuh); the
// lanes of a warp that read one line load its word in one transaction, and readers of a
// line do not contend. When every calling lane hit, one vote ends the call (the hit
// path: no range vote, no line grouping). Only lanes whose line is missing or changing
// take the pinning path (access_lanes, in bam/detail/array_paths.cuh). Writes (`store`, the atomics `fetch_add` ...
// `compare_exchange`, all through `update`) pin: when the calling lanes (__activemask(),
// so partial warps and divergent code are fine) all work in one valid line, the lowest
// lane pins it once for the warp (update_coalesced, the write's hit path); otherwise each
// lane pins its own line (access_lanes). A
// miss is filled by the cache's fill service (bam/detail/cache_service.cuh); the waiting lanes
// keep their pins on the invalid line, which holds no slot. When every lane of a warp
// missed in one line, the warp reads ahead (detail::read_ahead: a scan's lines further on
// go to the fill service too). Nothing here calls a function on the way (read_pinned and
// the read-ahead, both off the hit path, excepted), so a kernel keeps its own register
// budget.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "cache.cuh"
#include "cache_abi.h"
#include "detail/array_paths.cuh"
#include "util.cuh"

namespace bam {

template <typename T>
struct array {
    static_assert(std::is_trivially_copyable<T>::value, "bam::array<T> needs a trivially copyable T");
    bam_array_view v;

    __host__ __device__ uint64_t size() const { return v.n; }
    __host__ __device__ uint32_t elems_per_line() const { return v.epl; }
    __host__ __device__ uint64_t lines() const { return detail::lines_of(v); }

    /// Whether the view counts accesses and hits (CacheConfig::count_hits; its `stats` is
    /// then set too). A 32-bit flag: the hot paths test it.
    __device__ __forceinline__ bool counts() const { return (v.flags & BAM_VIEW_F_COUNTING) != 0; }

    /// Line of element i and its index inside the line, for 2^shift elements a line
    /// (shift < 32: the elements per line are a uint32_t).
    __device__ __forceinline__ static uint64_t line_by_shift(uint64_t i, uint32_t shift, uint32_t& sub) {
        sub = static_cast<uint32_t>(i) & ((1u << shift) - 1u);
        return i >> shift;
    }

    /// Line of element i and its index inside the line.
    __device__ __forceinline__ uint64_t line_of(uint64_t i, uint32_t& sub) const {
        if (v.epl_shift != BAM_EPL_NO_SHIFT) return line_by_shift(i, v.epl_shift, sub);
        return div_u64_u32(i, v.epl, sub);  // not `/`: see div_u64_u32
    }

    /// Address of the element `sub` of a line whose data starts at `base`.
    __device__ __forceinline__ T* at(char* base, uint32_t sub) const { return reinterpret_cast<T*>(base) + sub; }

    /// Counts the reads of the lanes of `set` (every one of them calls, each with the line it
    /// read; `ok`: it hit): the accesses, and one hit per run of consecutive lanes that read
    /// the same line and hit, so a warp reading one line counts one lookup, as a pinned
    /// access would. One statistics shard, two REDs, by the lowest lane. Each lane compares
    /// its line with the lane below it (one shuffle up): fewer SASS instructions for a
    /// whole warp, both atomics included, than finding each lane's next lower lane of
    /// `set` and shuffling from it.
    /// (Counting one per line with __match_any_sync is shorter still, but MATCH takes longer
    /// the more lines the warp reads, and random 8-byte hits got markedly slower.)
    __device__ __forceinline__ void count_reads(uint32_t set, uint64_t line, bool ok) const {
        using namespace detail;
        const uint32_t lane = lane_id();
        uint32_t hits;
        if (set == 0xffffffffu) {
            // A whole warp (the common case): constant masks, no convergence checks.
            const uint64_t below = shfl_up_u64(0xffffffffu, line);
            hits = __ballot_sync(0xffffffffu, ok && (lane == 0 || below != line));
        } else {
            // The line of lane - 1 (meaningless where that lane is not in `set`: unused then).
            const uint64_t below = shfl_up_u64(set, line);
            hits = __ballot_sync(set, ok && (lane == 0 || (set & (1u << (lane - 1))) == 0 || below != line));
        }
        if (lane == static_cast<uint32_t>(__ffs(set) - 1)) stat_accesses_hits(v.stats, __popc(set), __popc(hits));
    }

    /// Warp-coalesced read into `*val`. Returns false (the error is in the device log,
    /// `*val` untouched) when the line could not be acquired or `i` is out of range.
    /// `PIN`: the read pins the line too (the hit path before unpinned reads; kept for
    /// comparisons, see read_pinned). Stores and atomics take update() instead.
    template <bool PIN = false>
    __device__ __forceinline__ bool access(uint64_t i, T* val) const {
        using namespace detail;
        const uint32_t flags = v.flags;
        const uint32_t active = __activemask();  // the calling lanes
        // The lanes that go on past the hit path: every calling lane, but without counting
        // only those that did not read their element.
        uint32_t here = active;
        bool tried = false;  // this lane's read failed on the lean path
        if (!PIN && (flags & BAM_VIEW_F_GENERAL) == 0) {
            // The lean read: an ordinary view that counts nothing and finds a line by a
            // shift, after one flag test (the paths below test three things first).
            uint32_t lean_sub = 0;
            const uint64_t lean_line = line_by_shift(i, v.epl_shift, lean_sub);
            const bool hit =
                i < v.n && cache_read_unpinned(v, lean_line, lean_sub * static_cast<uint32_t>(sizeof(T)), *val);
            here = __ballot_sync(active, !hit);  // see the general path's vote below
            if (hit) return true;
            tried = true;
        }
        // A resident view has its own path, tested before the general paths (woven into
        // them, the test cost the ordinary hit path measurably on streaming kernels:
        // docs/cache.md, "Resident arrays").
        if (flags & BAM_VIEW_F_RESIDENT) return read_resident(i, val);
        const bool in_range = i < v.n;
        uint32_t sub = 0;
        const uint64_t line = line_of(i, sub);
        bool ok = false;  // this lane's element is read
        const bool counting = counts();
        if (!PIN && !tried) {
            // The hit path: the lane is in range and its line valid. Everything else
            // (ranges, misses) is below, off this path.
            ok = in_range && cache_read_unpinned(v, line, sub * static_cast<uint32_t>(sizeof(T)), *val);
            if (!counting) {
                // One vote of the calling lanes says which go on; a lane that hit is done.
                // Not __activemask() below the return: with the lean read above in front
                // of it, sets formed that way did not match and left lines pinned for good
                // (the type matrix's tests; docs/cache.md, "Warp coalescing").
                here = __ballot_sync(active, !ok);
                if (ok) return true;
            } else if (__ballot_sync(active, ok) == active) {
                // Counting: one vote, and when every lane hit, one count for the warp.
                count_reads(active, line, true);
                return true;
            }
        }
        const uint32_t set = __ballot_sync(here, in_range);  // the lanes that go on
        if (set != here) {
            // One log entry per call, by the lowest lane out of range.
            if (!in_range && static_cast<int>(lane_id()) == __ffs(here & ~set) - 1) {
                record_error(cache_of(v)->io, BAM_ERR_INVALID, 0, static_cast<uint16_t>(v.id), 0xffff,
                             nvme::OP_READ, i, 0, BAM_CACHE_ERR_RANGE);
            }
            if (!in_range) return false;
        }
        const int first = __ffs(set) - 1;
        // The call's accesses, one statistics atomic (detail::stat_at); unpinned reads
        // count them with their hits, below. A view without access counting skips it altogether.
        if (PIN && counting && static_cast<int>(lane_id()) == first) stat(v, ST_ACCESSES, __popc(set));
        if (!PIN) {
            if (counting) count_reads(set, line, ok);
            // A miss, or the line changing under us: the lanes concerned pin it (filled by
            // the fill service if it is missing).
            const uint32_t slow = __ballot_sync(set, !ok);
            if (ok) return true;
            // Every lane missed in one line of a cache that reads ahead (its view says so:
            // with read-ahead off the look is not made at all): a scan may be going on;
            // read ahead (detail::read_ahead looks whether it is one). Before the miss's own wait, so
            // that the read-ahead is in flight while it is served. (After it, the suite's
            // streaming kernels were slower with a quarter-size cache; with the look
            // loaded before and decided inside access_lanes, the ported kernels spilled and
            // their all-hits runs were measurably slower: docs/cache.md, "Read-ahead".)
            if ((flags & BAM_VIEW_F_READAHEAD) && here == active && slow == set &&
                __all_sync(set, line == shfl_u64(set, line, first)))
                read_ahead<T>(v, line, set);
            return access_lanes<T, false>(v, line, sub, slow, [val](T* p) { *val = *p; });
        }
        const pinned_result<T> r = pinned_read<T>(v.cache, v.id, line, sub, set);
        if (r.ok) *val = r.val;
        return r.ok;
    }

    /// Where element `i` (`sub` of `line`) lives in a resident view: in a contiguous one
    /// (BAM_VIEW_F_CONTIGUOUS) at ((T*)v.slots)[i], else in the slot the view's table
    /// names. The table is written before the view is handed out and does not change while
    /// the view may be used (every line stays pinned until the host's guard goes), so it
    /// is read through the read-only data cache. Memory ordering: the lines were filled
    /// and pinned by kernels that finished before the host handed out the view
    /// (Array::make_resident synchronises), so their data is visible to every kernel
    /// launched with it; the element is then read and written as through a plain T*.
    __device__ __forceinline__ T* resident_at(uint64_t i, uint64_t line, uint32_t sub) const {
        T* p;
        if (v.flags & BAM_VIEW_F_CONTIGUOUS) {
            p = reinterpret_cast<T*>(v.slots) + i;
        } else {
            const uint32_t s = __ldg(reinterpret_cast<const uint32_t*>(v.slots) + line);
            p = at(reinterpret_cast<char*>(v.data + (static_cast<uint64_t>(s) << v.slot_shift)), sub);
        }
        // Slots are cuMemAlloc'd: global loads and stores, not generic ones.
        __builtin_assume(__isGlobal(p));
        return p;
    }

    /// An update through a resident view: every lane of `active` (the calling lanes) calls
    /// `use` on its element in place, and the lowest lane of each run of lanes in one line
    /// marks the line dirty if its word says clean (one relaxed load, and a RED the first
    /// time). No pin: the line cannot leave its slot while the view is in use. Ordering:
    /// the data and the DIRTY bit are read by a flush or, after the guard is released, by
    /// an evictor; both come after the kernel has finished (Cache::flush wants no kernel
    /// running; the guard is dropped after the kernels that use its view, and its unpin is
    /// a release that an evictor's acquiring CAS reads). Returns false having done nothing
    /// when a lane is out of range (update_resident takes those calls).
    template <typename F>
    __device__ __forceinline__ bool update_resident_warp(uint32_t active, bool in_range, uint64_t i, uint64_t line,
                                                         uint32_t sub, F&& use) const {
        using namespace detail;
        if (!__all_sync(active, in_range)) return false;
        use(resident_at(i, line, sub));
        const uint32_t lane = lane_id();
        const uint64_t below = shfl_up_u64(active, line);
        const bool lead = lane == 0 || (active & (1u << (lane - 1))) == 0 || below != line;
        if (lead) mark_resident_dirty(line);
        if (counts()) {
            const uint32_t leads = __ballot_sync(active, lead);
            if (lane == static_cast<uint32_t>(__ffs(active) - 1)) stat_accesses_hits(v.stats, __popc(active), __popc(leads));
        }
        return true;
    }

    /// A read through a resident view: every line valid and fixed in its slot, so reads
    /// never miss. Out-of-range lanes fail with the error logged (one entry per call where
    /// the lanes stay together), as in access().
    __device__ __forceinline__ bool read_resident(uint64_t i, T* val) const {
        using namespace detail;
        const uint32_t active = __activemask();
        const bool in_range = i < v.n;
        uint32_t sub = 0;
        const uint64_t line = line_of(i, sub);
        if (in_range) *val = *resident_at(i, line, sub);
        if (counts()) count_reads(active, line, in_range);
        if (in_range) return true;
        log_resident_range(i, nvme::OP_READ);
        return false;
    }

    /// update() through a resident view (stores need no pin there). Out-of-range lanes
    /// fail with the error logged, as in read_resident.
    template <typename F>
    __device__ __forceinline__ bool update_resident(uint64_t i, F&& use) const {
        using namespace detail;
        const uint32_t active = __activemask();
        const bool in_range = i < v.n;
        uint32_t sub = 0;
        const uint64_t line = line_of(i, sub);
        if (update_resident_warp(active, in_range, i, line, sub, use)) return true;
        if (in_range) {  // lanes of a call that has some out of range: each on its own
            use(resident_at(i, line, sub));
            mark_resident_dirty(line);
            if (counts()) stat_accesses_hits(v.stats, 1, 1);
            return true;
        }
        log_resident_range(i, nvme::OP_WRITE);
        return false;
    }

    /// Logs an index out of range of a resident view, once per call (the lowest calling
    /// lane that is still here: the out-of-range ones).
    __device__ __forceinline__ void log_resident_range(uint64_t i, uint8_t opcode) const {
        using namespace detail;
        if (static_cast<int>(lane_id()) == __ffs(__activemask()) - 1) {
            record_error(cache_of(v)->io, BAM_ERR_INVALID, 0, static_cast<uint16_t>(v.id), 0xffff, opcode, i, 0,
                         BAM_CACHE_ERR_RANGE);
        }
    }

    /// Marks a line of a resident view dirty unless its word already says so (a relaxed
    /// load, and a RED the first time; see update_resident_warp for the ordering).
    __device__ __forceinline__ void mark_resident_dirty(uint64_t line) const {
        using namespace detail;
        const uint64_t g = line_word_global(v, line);
        unsigned long long w;
        asm volatile("ld.global.relaxed.gpu.b64 %0, [%1];" : "=l"(w) : "l"(g) : "memory");
        if ((w & DIRTY) == 0) word_mark_dirty(g);
    }

    /// The hit path of an update (a store, an atomic): when every lane of `active` (the
    /// calling lanes; each with its element in range, line `line`, index `sub`) works in
    /// the line of the lowest one and that line is valid, the lowest lane pins it once for
    /// all, every lane calls `use` on its element, and the lowest lane releases it, marked
    /// dirty, and counts the access and the hit. Returns false having done nothing
    /// otherwise (a lane out of range, lanes in several lines, a miss): the general path
    /// takes over.
    template <typename F>
    __device__ __forceinline__ bool update_coalesced(uint32_t active, bool in_range, uint64_t line, uint32_t sub,
                                                     F&& use) const {
        using namespace detail;
        const int first = __ffs(active) - 1;
        const bool is_first = static_cast<int>(lane_id()) == first;
        const uint64_t first_line = shfl_u64(active, line, first);
        if (!__all_sync(active, in_range && line == first_line)) return false;
        const uint64_t g = line_word_global(v, line);
        uint64_t addr = 0;
        unsigned long long old = 0;
        if (is_first) {
            old = word_pin(g, 1);
            if ((static_cast<uint32_t>(old) & static_cast<uint32_t>(VALID | BUSY)) == static_cast<uint32_t>(VALID)) {
                addr = reinterpret_cast<uint64_t>(slot_ptr(v, old >> 32));
            } else {
                word_unpin_relaxed(g, 1);  // not valid: the pin touched nothing
            }
        }
        addr = shfl_u64(active, addr, first);
        if (addr == 0) return false;
        // The first lane's acquire happens-before every lane's access.
        __syncwarp(active);
        use(at(reinterpret_cast<char*>(addr), sub));
        // Every lane's access happens-before the release (and a write-back).
        __syncwarp(active);
        if (is_first) {
            // A line that was dirty when pinned stays dirty while pinned (flush and
            // eviction need it unpinned): no need to mark it again.
            cache_release(v, line, 1, (old & DIRTY) == 0);
            if (counts()) stat_accesses_hits(v.stats, __popc(active), 1);
        }
        return true;
    }

    /// Reads element i (a value-initialised T on error; the error is in the log).
    __device__ __forceinline__ T operator[](uint64_t i) const {
        T x{};
        access(i, &x);
        return x;
    }
    __device__ __forceinline__ T read(uint64_t i) const { return (*this)[i]; }
    /// Reads element i pinning its line, as every read did before unpinned hits (for
    /// comparisons; `a[i]` is never slower).
    __device__ __forceinline__ T read_pinned(uint64_t i) const {
        T x{};
        access<true>(i, &x);
        return x;
    }
    /// Reads element i into `out`; false on error.
    __device__ __forceinline__ bool try_read(uint64_t i, T& out) const { return access(i, &out); }
    /// Writes element i and marks its line dirty; false on error.
    __device__ __forceinline__ bool store(uint64_t i, const T& x) const {
        return update(i, [&x](T* p) { *p = x; });
    }

    /// Calls `use(T* element)` on element i while its line is held in the cache, and marks
    /// the line dirty; false on error (out of range or the line failed: the error is in
    /// the log, `use` was not called). What store and the atomics below are made of. The
    /// line stays in its slot while `use` runs, but other lanes may work on the same
    /// element at the same time: `use` must be an atomic operation (cuda::atomic_ref, the
    /// atomic* intrinsics) wherever lanes can share an element. Lanes are grouped by line
    /// (divergent lanes and partial warps are fine); `use` must not wait for other lanes.
    template <typename F>
    __device__ __forceinline__ bool update(uint64_t i, F&& use) const {
        using namespace detail;
        if (v.flags & BAM_VIEW_F_RESIDENT) return update_resident(i, use);
        const uint32_t active = __activemask();  // the calling lanes
        const bool in_range = i < v.n;
        uint32_t sub = 0;
        const uint64_t line = line_of(i, sub);
        if (update_coalesced(active, in_range, line, sub, use)) return true;
        const uint32_t set = __ballot_sync(active, in_range);  // the lanes that go on
        if (set != active) {
            // One log entry per call, by the lowest lane out of range.
            if (!in_range && static_cast<int>(lane_id()) == __ffs(active & ~set) - 1) {
                record_error(cache_of(v)->io, BAM_ERR_INVALID, 0, static_cast<uint16_t>(v.id), 0xffff,
                             nvme::OP_WRITE, i, 0, BAM_CACHE_ERR_RANGE);
            }
            if (!in_range) return false;
        }
        // The call's accesses, one statistics atomic (detail::stat_at).
        if (counts() && static_cast<int>(lane_id()) == __ffs(set) - 1) stat(v, ST_ACCESSES, __popc(set));
        return access_lanes<T, true>(v, line, sub, set, use);
    }

    // Atomics on one element: read-modify-write operations that are atomic with respect to
    // every other atomic on the element, from any lane, warp or block of the GPU (device
    // scope), through the cache with write-back like a store. Each returns the value the
    // element held before (a value-initialised T when it failed: then `*ok`, if given, is
    // set false and the error is in the log; on success it is set true). Memory ordering:
    // relaxed, as CUDA's atomicAdd: the operation itself is atomic, it orders no other
    // access (use __threadfence() or a cuda::atomic_thread_fence for that). Plain stores
    // to an element that atomics also update race with them (the atomic may be lost).
    //
    // T: 4 or 8 bytes. fetch_add and fetch_sub take integers and floating point;
    // fetch_min and fetch_max integers (signed compared as signed), the bit operations
    // unsigned or signed integers.

    /// element += x; returns the old value.
    __device__ __forceinline__ T fetch_add(uint64_t i, T x, bool* ok = nullptr) const {
        static_assert(std::is_arithmetic<T>::value, "fetch_add needs an integer or floating-point T");
        return atomic(i, ok, [x](atomic_of& a) { return a.fetch_add(x, cuda::memory_order_relaxed); });
    }
    /// element -= x; returns the old value.
    __device__ __forceinline__ T fetch_sub(uint64_t i, T x, bool* ok = nullptr) const {
        static_assert(std::is_arithmetic<T>::value, "fetch_sub needs an integer or floating-point T");
        return atomic(i, ok, [x](atomic_of& a) { return a.fetch_sub(x, cuda::memory_order_relaxed); });
    }
    /// element = min(element, x); returns the old value.
    __device__ __forceinline__ T fetch_min(uint64_t i, T x, bool* ok = nullptr) const {
        static_assert(std::is_integral<T>::value, "fetch_min needs an integer T");
        return atomic(i, ok, [x](atomic_of& a) { return a.fetch_min(x, cuda::memory_order_relaxed); });
    }
    /// element = max(element, x); returns the old value.
    __device__ __forceinline__ T fetch_max(uint64_t i, T x, bool* ok = nullptr) const {
        static_assert(std::is_integral<T>::value, "fetch_max needs an integer T");
        return atomic(i, ok, [x](atomic_of& a) { return a.fetch_max(x, cuda::memory_order_relaxed); });
    }
    /// element &= x; returns the old value.
    __device__ __forceinline__ T fetch_and(uint64_t i, T x, bool* ok = nullptr) const {
        static_assert(std::is_integral<T>::value, "fetch_and needs an integer T");
        return atomic(i, ok, [x](atomic_of& a) { return a.fetch_and(x, cuda::memory_order_relaxed); });
    }
    /// element |= x; returns the old value.
    __device__ __forceinline__ T fetch_or(uint64_t i, T x, bool* ok = nullptr) const {
        static_assert(std::is_integral<T>::value, "fetch_or needs an integer T");
        return atomic(i, ok, [x](atomic_of& a) { return a.fetch_or(x, cuda::memory_order_relaxed); });
    }
    /// element ^= x; returns the old value.
    __device__ __forceinline__ T fetch_xor(uint64_t i, T x, bool* ok = nullptr) const {
        static_assert(std::is_integral<T>::value, "fetch_xor needs an integer T");
        return atomic(i, ok, [x](atomic_of& a) { return a.fetch_xor(x, cuda::memory_order_relaxed); });
    }
    /// If the element equals `expected` (bitwise), sets it to `desired` and returns true;
    /// otherwise loads the element into `expected` and returns false. When the access
    /// fails, returns false with `expected` unchanged and `*ok` false: a retry loop must
    /// test `ok` (or `bam::array<T>` logs the same error on every try until the cache's
    /// timeout ends each one):
    ///
    ///     T e = a[i];
    ///     bool ok = true;
    ///     while (!a.compare_exchange(i, e, f(e), &ok) && ok) {}
    __device__ __forceinline__ bool compare_exchange(uint64_t i, T& expected, T desired, bool* ok = nullptr) const {
        bool swapped = false;
        T seen = expected;
        const bool done = update(i, [&](T* p) {
            atomic_of a(*p);
            swapped = a.compare_exchange_strong(seen, desired, cuda::memory_order_relaxed);
        });
        if (ok != nullptr) *ok = done;
        if (done) expected = seen;
        return done && swapped;
    }

   private:
    using atomic_of = cuda::atomic_ref<T, cuda::thread_scope_device>;

    /// Runs `op(atomic_of&)` on element i through update(); returns what op returned, or
    /// a value-initialised T on error (`*ok` says which).
    template <typename Op>
    __device__ __forceinline__ T atomic(uint64_t i, bool* ok, Op&& op) const {
        static_assert(sizeof(T) == 4 || sizeof(T) == 8, "bam::array atomics need a 4- or 8-byte T");
        T old{};
        const bool done = update(i, [&](T* p) {
            atomic_of a(*p);
            old = op(a);
        });
        if (ok != nullptr) *ok = done;
        return old;
    }
};

/// A per-thread reference into an array that keeps its current line pinned while the
/// thread stays inside it (temporal reuse, §5.3.3). Leaving the line or going out of
/// scope releases it.
///
/// Each lane owns one reference to the line it holds. A lane that stays in its line
/// touches nothing shared. A lane that moves first drops its own reference (one atomic,
/// no warp collective: a lane never waits while it holds a line of its own), then the
/// lanes that move at the same time group by their new line and the group leader takes
/// the group's references with one atomic (detail::with_line, which never waits
/// for a slot while holding one). Other lanes of the warp may still hold their lines
/// meanwhile, so size the cache for one line per thread that holds an array_ref, plus
/// one per acquiring group (docs/cache.md).
template <typename T>
struct array_ref {
    bam_array_view v;
    uint64_t line = ~0ull;  // line held
    char* base = nullptr;   // its data, nullptr when none is held
    bool dirty = false;     // this lane wrote the line it holds
    bool failed = false;    // sticky: an access failed (the error is in the log)

    __device__ explicit array_ref(const array<T>& a) : v(a.v) {}
    __device__ explicit array_ref(const array<T>* a) : v(a->v) {}
    array_ref(const array_ref&) = delete;
    array_ref& operator=(const array_ref&) = delete;
    __device__ ~array_ref() { release(); }

    __device__ __forceinline__ const array<T>& arr() const { return *reinterpret_cast<const array<T>*>(&v); }

    /// Drops this lane's reference (if it holds a line). Per lane; no warp collective.
    __device__ __forceinline__ void release() {
        if (base == nullptr) return;
        // Release (in cache_release): this lane's stores to the line happen-before the
        // write-back of an evictor that acquires the line word later.
        cache_release(v, line, 1, dirty);
        base = nullptr;
        line = ~0ull;
        dirty = false;
    }

    /// Makes `l` the line held; returns its data or nullptr on error (nothing held then).
    __device__ __forceinline__ char* ensure(uint64_t l) {
        using namespace detail;
        // The lanes that move to another line are told by a vote of the calling lanes
        // (bam::array<T>::access says why not by __activemask() after the others left).
        const bool stay = base != nullptr && line == l;
        const uint32_t active = __ballot_sync(__activemask(), !stay);
        if (stay) return base;  // still inside: no shared access
        release();
        // Group by (array, line): lanes may reach this code with refs to different arrays.
        const uint32_t peers = __match_any_sync(active, line_key(v.id, l));
        const int leader = __ffs(peers) - 1;
        // Each lane of the group owns one of the group's references.
        if (!with_line(v, l, active, peers, leader, __popc(peers), [&](char* b) {
                base = b;
                line = l;
            })) {
            failed = true;
        }
        return base;
    }

    __device__ __forceinline__ T operator[](uint64_t i) {
        T x{};
        try_read(i, x);
        return x;
    }
    /// Reads element i into `out`; false on error (out of range or the line failed).
    __device__ __forceinline__ bool try_read(uint64_t i, T& out) {
        T* p = elem(i, nvme::OP_READ);
        if (p == nullptr) return false;
        out = *p;
        return true;
    }
    /// Writes element i; the line is marked dirty when this lane releases it.
    __device__ __forceinline__ bool store(uint64_t i, const T& x) {
        T* p = elem(i, nvme::OP_WRITE);
        if (p == nullptr) return false;
        *p = x;
        dirty = true;
        return true;
    }

   private:
    __device__ __forceinline__ T* elem(uint64_t i, uint8_t opcode) {
        if (i >= v.n) {
            failed = true;
            log_error(detail::cache_of(v)->io, BAM_ERR_INVALID, 0, static_cast<uint16_t>(v.id), 0xffff, opcode, i, 0,
                      BAM_CACHE_ERR_RANGE);
            return nullptr;
        }
        uint32_t sub = 0;
        const uint64_t l = arr().line_of(i, sub);
        char* b = ensure(l);
        if (b == nullptr) return nullptr;
        detail::stat(v, detail::ST_ACCESSES, 1);
        return arr().at(b, sub);
    }
};

/// One line acquired by a group of lanes that work on it together (cache-line-aware
/// access, §6.2): `first` is the array index of the line's element 0, `count` the
/// number of elements of the array in it, `rank`/`width` the lane's position in the
/// group. Lanes stride over the line: for (j = rank; j < count; j += width).
template <typename T>
struct line_span {
    T* data = nullptr;
    uint64_t line = 0;
    uint64_t first = 0;
    uint32_t count = 0;
    uint32_t rank = 0;
    uint32_t width = 0;
    uint32_t group = 0;
    __device__ __forceinline__ bool ok() const { return data != nullptr; }
    __device__ __forceinline__ T& operator[](uint32_t j) const { return data[j]; }
};

/// The span of `line` for the lanes of `group` (a lane mask), not yet acquired (data null).
template <typename T>
__device__ __forceinline__ line_span<T> span_of(const array<T>& a, uint64_t line, uint32_t group) {
    line_span<T> s;
    s.group = group;
    s.rank = __popc(group & lanemask_lt());
    s.width = __popc(group);
    s.line = line;
    s.first = line * a.v.epl;
    // A line past 2^64 / epl wraps the product: nothing of it is in the array.
    const uint64_t left = __umul64hi(line, a.v.epl) == 0 && a.v.n > s.first ? a.v.n - s.first : 0;
    s.count = static_cast<uint32_t>(left < a.v.epl ? left : a.v.epl);
    return s;
}

/// Acquires `line` for the lanes of `group` (a lane mask: a warp or a sub-warp; every
/// lane of it calls). Lanes are grouped by the line they pass, so a lane that is (by
/// divergence) at another line than its group forms its own group. Release the span
/// with release_line. The span's line stays pinned until then, also while the lanes
/// wait for other lanes of their warp: keep at most one span per group.
template <typename T>
__device__ __forceinline__ line_span<T> acquire_line(const array<T>& a, uint64_t line, uint32_t group) {
    const uint32_t peers = __match_any_sync(group, line);
    const int leader = __ffs(peers) - 1;
    line_span<T> s = span_of(a, line, peers);
    const uint32_t set = __ballot_sync(group, s.count != 0);  // the lanes that go on to with_line
    // The call's accesses (its groups' elements), one statistics atomic.
    const uint32_t accesses = __reduce_add_sync(group, static_cast<int>(lane_id()) == leader ? s.count : 0u);
    if (accesses != 0 && static_cast<int>(lane_id()) == __ffs(group) - 1)
        detail::stat(a.v, detail::ST_ACCESSES, accesses);
    if (s.count == 0) return s;  // past the end: nothing to hold
    detail::with_line(a.v, line, set, peers, leader, 1,
                            [&](char* b) { s.data = reinterpret_cast<T*>(b); });
    return s;
}

/// acquire_line for all calling lanes (__activemask()).
template <typename T>
__device__ __forceinline__ line_span<T> acquire_line(const array<T>& a, uint64_t line) {
    return acquire_line(a, line, __activemask());
}

/// Releases a line acquired with acquire_line; `dirty` if any lane wrote it. Every lane
/// of the group calls.
template <typename T>
__device__ __forceinline__ void release_line(const array<T>& a, const line_span<T>& s, bool dirty = false) {
    const bool any_dirty = __any_sync(s.group, dirty);
    __syncwarp(s.group);
    if (s.rank == 0 && s.data != nullptr) {
        cache_release(a.v, s.line, 1, any_dirty);
    }
}

/// Lane groups of TILE consecutive lanes (16, 8, 4, 2: sub-warps; 32: warps) of the whole
/// grid walk the array line by line: group g takes lines g, g + G, ... For each line,
/// `f(span)` is called by every lane of the group with the pinned line; return true from
/// f if the group wrote the line. Returns false if a line failed (the error is in the
/// log; the walk goes on). Every lane of the grid must call (a kernel launched with a
/// block size that is a multiple of 32, no lane returning early).
///
/// The whole warp steps through the walk together: each step gives every tile of the
/// warp its next line (or none, past the end). Each lane pins the line itself and calls
/// `f` on its own (span.group is the lane alone; rank/width are its place in the tile):
/// lane `rank` handles elements rank, rank + width, ... No lane keeps a line pinned while
/// another lane of the warp waits for a slot (see with_line), and f must not use warp
/// collectives over other lanes.
///
/// TILE = 32 (a warp per line) suits lines of 4 KiB and more; smaller tiles give each
/// group fewer elements of a small line to share and let a warp work on several lines.
template <int TILE = 16, typename T, typename F>
__device__ inline bool for_each_line(const array<T>& a, F&& f) {
    static_assert(TILE >= 2 && TILE <= 32 && (TILE & (TILE - 1)) == 0, "TILE: 2, 4, 8, 16 or 32");
    const uint64_t warp = (blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x) / 32;
    const uint64_t warps = (static_cast<uint64_t>(gridDim.x) * blockDim.x) / 32;
    constexpr uint32_t TPW = 32 / TILE;  // tiles per warp
    const uint64_t lines = a.lines();
    const uint32_t lane = lane_id();
    const uint32_t tile = (TILE == 32 ? 0xffffffffu : ((1u << TILE) - 1u) << (lane & ~(TILE - 1u)));
    const int leader = __ffs(tile) - 1;
    const uint64_t my_tile = warp * TPW + lane / TILE;  // global tile index
    const uint64_t tiles = warps * TPW;
    bool ok = true;
    // Steps: enough for the warp's first tile, which has the most lines.
    const uint64_t first = warp * TPW;
    const uint64_t steps = first < lines ? (lines - first + tiles - 1) / tiles : 0;
    const uint32_t lane_bit = 1u << lane;
    for (uint64_t k = 0; k < steps; ++k) {
        __syncwarp();
        const uint64_t line = my_tile + k * tiles;
        const bool has = line < lines;
        line_span<T> s = span_of(a, has ? line : 0, tile);
        s.group = lane_bit;  // f runs per lane (see below)
        // The step's accesses (its tiles' elements), one statistics atomic for the warp.
        const uint32_t step_accesses =
            __reduce_add_sync(0xffffffffu, has && static_cast<int>(lane) == leader ? s.count : 0u);
        if (lane == 0 && step_accesses != 0) detail::stat(a.v, detail::ST_ACCESSES, step_accesses);
        // Every lane pins the line for itself (no shuffle inside a tile: sub-warp groups
        // exchanging the address while their leaders took misses read other groups'
        // values) and works on its share (rank, rank + width, ...) inside with_line's
        // round; the tile then joins to tell f's result.
        bool wrote = false;
        ok &= detail::with_line(
            a.v, line, 0xffffffffu, lane_bit, static_cast<int>(lane), 1,
            [&](char* b) {
                s.data = reinterpret_cast<T*>(b);
                wrote = f(s);
                cache_release(a.v, line, 1, wrote);
            },
            has);
    }
    return ok;
}

/// Per-element form of for_each_line: `f(index, T& element)` for every element, lanes
/// of a group striding over each line. Return true from f when it modified the element.
template <int TILE = 16, typename T, typename F>
__device__ inline bool for_each_element(const array<T>& a, F&& f) {
    return for_each_line<TILE>(a, [&](const line_span<T>& s) {
        bool wrote = false;
        for (uint32_t j = s.rank; j < s.count; j += s.width) wrote |= f(s.first + j, s.data[j]);
        return wrote;
    });
}

}  // namespace bam
