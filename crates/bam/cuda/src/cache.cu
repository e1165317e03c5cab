// cache.cu — the cache kernels the runtime needs (shipped in the crate's fatbin):
//   bam_cache_fill_service the persistent kernel that fills the lines threads miss on
//   bam_cache_flush        write dirty lines back (and drop them on array teardown)
//   bam_cache_store_bytes  host data into an array through the cache (Array::load)
//   bam_cache_load_bytes   an array's bytes out through the cache (Array::read)
//   bam_cache_pin_lines    every line of an array in and pinned, its slots in a table
//   bam_cache_unpin_lines  drops those pins (Array::make_resident and its guard)
#include <bam/array.cuh>
#include <bam/cache.cuh>
#include <bam/detail/cache_flush.cuh>
#include <bam/detail/cache_service.cuh>
#include <bam/util.cuh>

using namespace bam;

namespace {

/// Copies bytes between a line and a linear buffer, lanes of a warp striding.
__device__ __forceinline__ void warp_bytes(char* dst, const char* src, uint64_t len, uint32_t lane) {
    if (((reinterpret_cast<uint64_t>(dst) | reinterpret_cast<uint64_t>(src) | len) & 15u) == 0) {
        for (uint64_t o = lane * 16ull; o < len; o += 512)
            *reinterpret_cast<uint4*>(dst + o) = *reinterpret_cast<const uint4*>(src + o);
    } else {
        for (uint64_t o = lane; o < len; o += 32) dst[o] = src[o];
    }
}

/// Warp-per-line transfer between an array's bytes [off, off + len) and `buf`.
template <bool STORE>
__device__ void bytes_xfer(const bam_array_view& v, char* buf, uint64_t off, uint64_t len,
                           unsigned long long* failed) {
    const uint32_t lane = lane_id();
    const uint64_t lb = v.line_bytes;
    const uint64_t first = off / lb, last = (off + len + lb - 1) / lb;
    const uint64_t warps = gthreads() / 32;
    for (uint64_t line = first + gtid() / 32; line < last; line += warps) {
        uint64_t addr = 0;
        if (lane == 0) addr = reinterpret_cast<uint64_t>(cache_acquire(v, line, 1));
        addr = shfl_u64(0xffffffffu, addr, 0);
        if (addr == 0) {
            if (lane == 0) atomicAdd(failed, 1ull);
            continue;
        }
        const uint64_t lo = line * lb > off ? line * lb : off;
        const uint64_t hi = (line + 1) * lb < off + len ? (line + 1) * lb : off + len;
        char* l = reinterpret_cast<char*>(addr) + (lo - line * lb);
        if (STORE) {
            warp_bytes(l, buf + (lo - off), hi - lo, lane);
        } else {
            warp_bytes(buf + (lo - off), l, hi - lo, lane);
        }
        __syncwarp();
        if (lane == 0) cache_release(v, line, 1, STORE);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// service kernels

/// One block per SM (the host launches it before any kernel that uses the cache and waits
/// until every block runs); each thread serves fills on its own (bam/detail/cache_service.cuh).
extern "C" __global__ void __launch_bounds__(BAM_FILL_SERVICE_THREADS, 1) bam_cache_fill_service(const bam_cache_dev* c) {
    fill_service_run(c);
}

/// Takes the fill service's spares back (bam/detail/cache_service.cuh, cache_recall_spares).
extern "C" __global__ void bam_cache_recall_spares(const bam_cache_dev* c) { cache_recall_spares(c); }

extern "C" __global__ void bam_cache_flush(const bam_cache_dev* c, uint32_t only_id, uint32_t invalidate,
                                           bam_flush_result* res) {
    const uint64_t warp = gtid() / 32;
    cache_flush_slots(c, warp, gthreads() / 32, only_id, invalidate != 0, res);
}

/// An NVMe Flush to every SSD of the cache's I/O layer (thread s flushes SSD s), after
/// the write-backs of a flush: written lines leave the SSDs' volatile write caches.
/// Failures (status, timeout) are in the I/O layer's error log, which the host reads.
extern "C" __global__ void bam_cache_flush_ssds(const bam_cache_dev* c) {
    const uint32_t s = static_cast<uint32_t>(gtid());
    if (s >= c->io.nssd) return;
    io_handle h;
    if (submit_on<true>(c->io, default_qp(c->io, s), nvme::OP_FLUSH, s, 0, 0, nullptr, h) == OK)
        (void)wait<true>(c->io, h);
}

extern "C" __global__ void bam_cache_store_bytes(bam_array_view v, const char* src, uint64_t off, uint64_t len,
                                                 unsigned long long* failed) {
    bytes_xfer<true>(v, const_cast<char*>(src), off, len, failed);
}

extern "C" __global__ void bam_cache_load_bytes(bam_array_view v, char* dst, uint64_t off, uint64_t len,
                                                unsigned long long* failed) {
    bytes_xfer<false>(v, dst, off, len, failed);
}

/// Reads every line of `v`'s array into the cache and keeps one reference on each, for a
/// resident view (Array::make_resident): thread t takes lines t, t + T, ... and writes
/// each line's slot into slots[line]; a line it could not acquire (the error is in the
/// device log) keeps BAM_RESIDENT_NO_SLOT there and counts in failed[0]. The host has
/// checked that the cache has a slot for every line beside the other resident arrays', so
/// the references this kernel holds while it acquires more lines cannot take every slot.
extern "C" __global__ void bam_cache_pin_lines(bam_array_view v, uint32_t* slots, unsigned long long* failed) {
    const uint64_t lines = detail::lines_of(v);
    uint64_t bad = 0;
    for (uint64_t line = gtid(); line < lines; line += gthreads()) {
        const char* p = cache_acquire(v, line, 1);
        if (p == nullptr) {
            ++bad;
            continue;
        }
        slots[line] = static_cast<uint32_t>((reinterpret_cast<uint64_t>(p) - v.data) >> v.slot_shift);
    }
    if (bad) atomicAdd(failed, static_cast<unsigned long long>(bad));
}

/// Drops the reference bam_cache_pin_lines took on each line whose slot the table holds
/// (a release: the stores kernels made through the resident view happen-before an
/// evictor's acquiring CAS on the word, and so before its write-back). The table is
/// reset to BAM_RESIDENT_NO_SLOT as it goes, so a second call drops nothing twice.
extern "C" __global__ void bam_cache_unpin_lines(bam_array_view v, uint32_t* slots) {
    const uint64_t lines = detail::lines_of(v);
    for (uint64_t line = gtid(); line < lines; line += gthreads()) {
        if (slots[line] == BAM_RESIDENT_NO_SLOT) continue;
        slots[line] = BAM_RESIDENT_NO_SLOT;
        cache_release(v, line, 1, false);
    }
}
