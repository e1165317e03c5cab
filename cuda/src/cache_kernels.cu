// cache_kernels.cu — kernels of the cache module shipped with the crate:
//   service:   bam_cache_flush, bam_cache_store_bytes, bam_cache_load_bytes, bam_cache_fill_u64
//   tests:     bam_cache_torture, bam_cache_types_{write,check}_{1,4,8,16,24}, bam_cache_pin_hog,
//              bam_cache_check_u32
//   benchmark: bam_cb_{linear,random,cla,latency} through the cache and bam_cb_raw_* over a
//              plain array with the same pattern (the same process, the same data).
#include <bam/array.cuh>
#include <bam/cache.cuh>
#include <bam/pattern.cuh>

using namespace bam;

namespace {

__device__ __forceinline__ uint64_t rng_seed(uint64_t seed, uint64_t tid) {
    uint64_t s = (seed ^ (tid * 0x9e3779b97f4a7c15ull)) | 1ull;
    rng_next(s);
    return s;
}

__host__ __device__ __forceinline__ uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

__device__ __forceinline__ uint64_t gtid() { return blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ uint64_t gthreads() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

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

extern "C" __global__ void bam_cache_flush(const bam_cache_dev* c, uint32_t only_id, uint32_t invalidate,
                                           bam_flush_result* res) {
    const uint64_t warp = gtid() / 32;
    cache_flush_slots(c, warp, gthreads() / 32, only_id, invalidate != 0, res);
}

extern "C" __global__ void bam_cache_store_bytes(bam_array_view v, const char* src, uint64_t off, uint64_t len,
                                                 unsigned long long* failed) {
    bytes_xfer<true>(v, const_cast<char*>(src), off, len, failed);
}

extern "C" __global__ void bam_cache_load_bytes(bam_array_view v, char* dst, uint64_t off, uint64_t len,
                                                unsigned long long* failed) {
    bytes_xfer<false>(v, dst, off, len, failed);
}

/// p[i] = mix64((first + i) ^ seed) for i < n.
extern "C" __global__ void bam_cache_fill_u64(uint64_t* p, uint64_t n, uint64_t first, uint64_t seed) {
    for (uint64_t i = gtid(); i < n; i += gthreads()) p[i] = mix64((first + i) ^ seed);
}

// ---------------------------------------------------------------------------------------
// tests

/// Element value written by the torture test: the top 16 bits identify the element, the
/// low 16 bits the operation (0xffff: the initial value).
__device__ __forceinline__ uint32_t torture_value(uint64_t e, uint32_t op) {
    return (mix32(static_cast<uint32_t>(e) ^ 0x5bd1e995u) & 0xffff0000u) | (op & 0xffffu);
}

/// Torture: every thread does `ops` operations; op = r % 4: 0, 1 write one of the
/// thread's own elements (e = tid + j * T; one writer per element), 2, 3 read a random
/// element (through array_ref when use_ref, four consecutive elements) and check that
/// it belongs to that element. res[0] = bad reads, res[1] = failed operations.
extern "C" __global__ void bam_cache_torture(bam_array_view av, uint64_t ops, uint64_t seed, uint32_t use_ref,
                                             unsigned long long* res) {
    array<uint32_t> a{av};
    const uint64_t tid = gtid(), T = gthreads(), n = av.n;
    uint64_t rng = rng_seed(seed, tid);
    const uint64_t owned = tid < n ? (n - tid + T - 1) / T : 0;
    array_ref<uint32_t> ref(a);
    uint64_t bad = 0, failed = 0;
    for (uint64_t k = 0; k < ops; ++k) {
        const uint64_t r = rng_next(rng);
        if ((r & 3u) < 2u) {
            if (owned == 0) continue;
            const uint64_t e = tid + ((r >> 8) % owned) * T;
            ref.release();  // hold nothing while waiting for another line
            if (!a.store(e, torture_value(e, static_cast<uint32_t>(k)))) ++failed;
        } else {
            const uint64_t e0 = (r >> 8) % n;
            const uint32_t cnt = use_ref ? 4u : 1u;
            for (uint32_t d = 0; d < cnt; ++d) {
                const uint64_t e = (e0 + d) % n;
                uint32_t x = 0;
                const bool ok = use_ref ? ref.try_read(e, x) : a.try_read(e, x);
                if (!ok) {
                    ++failed;
                } else if ((x & 0xffff0000u) != (torture_value(e, 0) & 0xffff0000u)) {
                    ++bad;
                }
            }
        }
    }
    ref.release();
    if (bad) atomicAdd(&res[0], static_cast<unsigned long long>(bad));
    if (failed) atomicAdd(&res[1], static_cast<unsigned long long>(failed));
}

template <typename T>
__device__ __forceinline__ T make_elem(uint64_t i, uint32_t gen) {
    constexpr uint32_t W = (sizeof(T) + 3) / 4;
    uint32_t w[W];
#pragma unroll
    for (uint32_t k = 0; k < W; ++k) w[k] = mix32(static_cast<uint32_t>(i * 7 + k) ^ (gen * 0x9e3779b9u));
    T x;
    memcpy(&x, w, sizeof(T));
    return x;
}

template <typename T>
__device__ __forceinline__ bool same(const T& a, const T& b) {
    const unsigned char* x = reinterpret_cast<const unsigned char*>(&a);
    const unsigned char* y = reinterpret_cast<const unsigned char*>(&b);
    bool eq = true;
#pragma unroll
    for (uint32_t k = 0; k < sizeof(T); ++k) eq &= x[k] == y[k];
    return eq;
}

/// Writes make_elem(i, gen) to every element: divergent lanes, two write forms, then a
/// cache-line-aware pass (every warp rewrites whole lines it reads: TILE-lane groups).
template <typename T>
__device__ void types_write(bam_array_view av, uint32_t gen, unsigned long long* res) {
    array<T> a{av};
    uint64_t failed = 0;
    const uint32_t lane = lane_id();
    for (uint64_t i = gtid(); i < av.n; i += gthreads()) {
        if (lane % 3 == 0) {
            if (!a.store(i, make_elem<T>(i, gen ^ 1))) ++failed;  // overwritten below
            if (!a.store(i, make_elem<T>(i, gen))) ++failed;
        } else if (lane % 3 == 1) {
            if (!a.store(i, make_elem<T>(i, gen))) ++failed;
        } else {
            T old;
            if (!a.try_read(i, old)) ++failed;
            if (!a.store(i, make_elem<T>(i, gen))) ++failed;
        }
    }
    if (failed) atomicAdd(&res[1], static_cast<unsigned long long>(failed));
}

/// Counts a wrong value of pass `pass` (0: array_ref, 1: a[i]/try_read, 2, 3, 4:
/// for_each_element with groups of 4, 16, 32 lanes) and remembers the first one seen:
/// res[4] = index + 1, res[5] = pass, res[6] = its first 8 bytes as read, res[7] = 1 if
/// that value is the element's earlier (overwritten) value, 2 if it is another element's.
template <typename T>
__device__ __forceinline__ void note_bad(unsigned long long* res, uint64_t i, uint32_t pass, const T& got,
                                         uint32_t gen) {
    if (atomicCAS(&res[4], 0ull, static_cast<unsigned long long>(i + 1)) != 0ull) return;
    res[5] = pass;
    unsigned long long w = 0;
    memcpy(&w, &got, sizeof(T) < 8 ? sizeof(T) : 8);
    res[6] = w;
    uint32_t kind = 0;
    if (same(got, make_elem<T>(i, gen ^ 1))) kind = 1;
    for (int64_t d = -64; d <= 64 && kind == 0; ++d)
        if (d != 0 && static_cast<int64_t>(i) + d >= 0 && same(got, make_elem<T>(i + d, gen))) kind = 2;
    res[7] = kind;
}

/// The cache-line-aware check pass with groups of TILE lanes.
template <int TILE, typename T>
__device__ __forceinline__ void check_lines(const array<T>& a, uint32_t gen, uint32_t pass, uint32_t counter,
                                            unsigned long long* res) {
    unsigned long long bad = 0;
    for_each_element<TILE>(a, [&](uint64_t i, T& x) {
        const T got = x;
        if (!same(got, make_elem<T>(i, gen))) {
            ++bad;
            note_bad(res, i, pass, got, gen);
        }
        return false;
    });
    if (bad) atomicAdd(&res[counter], bad);
}

/// Checks every element up to five ways: array_ref over a contiguous chunk per warp
/// (lanes interleaved, so a warp pins at most two lines at once; skipped unless
/// `use_ref`), a[i] / try_read in divergent code, and (full warps only)
/// for_each_element with groups of 4, 16 and 32 lanes. Wrong values per pass: res[0]
/// array_ref, res[2] a[i]/try_read, res[3] / res[8] / res[9] lines with 4 / 16 / 32 lanes; res[1]:
/// failed accesses; res[4..7]: the first wrong value (note_bad).
template <typename T>
__device__ void types_check(bam_array_view av, uint32_t gen, uint32_t use_ref, unsigned long long* res) {
    array<T> a{av};
    uint64_t bad_ref = 0, bad_coal = 0, failed = 0;
    const uint64_t T_ = gthreads(), n = av.n;
    if (use_ref) {
        const uint32_t wpb = (blockDim.x + 31) / 32;
        const uint64_t nwarps = static_cast<uint64_t>(gridDim.x) * wpb;
        const uint64_t gw = blockIdx.x * static_cast<uint64_t>(wpb) + threadIdx.x / 32;
        const uint32_t wlanes = min(32u, blockDim.x - (threadIdx.x / 32) * 32);  // partial last warp
        const uint64_t per = (n + nwarps - 1) / nwarps;
        const uint64_t end = (gw + 1) * per < n ? (gw + 1) * per : n;
        array_ref<T> ref(a);
        for (uint64_t i = gw * per + lane_id(); i < end; i += wlanes) {
            T x;
            if (!ref.try_read(i, x)) {
                ++failed;
            } else if (!same(x, make_elem<T>(i, gen))) {
                ++bad_ref;
                note_bad(res, i, 0, x, gen);
            }
        }
    }
    atomicAdd(&res[10], 1ull);  // progress: threads past each pass, res[10..14]
    for (uint64_t i = gtid(); i < n; i += T_) {
        T x{};
        bool ok = true;
        if (lane_id() & 1) {
            if (!a.try_read(i, x)) {
                ++failed;
                continue;
            }
        } else {
            x = a[i];
        }
        ok = same(x, make_elem<T>(i, gen));
        if (!ok) {
            ++bad_coal;
            note_bad(res, i, 1, x, gen);
        }
    }
    atomicAdd(&res[11], 1ull);
    if (blockDim.x % 32 == 0) {
        check_lines<4>(a, gen, 2, 3, res);
        atomicAdd(&res[12], 1ull);
        check_lines<16>(a, gen, 3, 8, res);
        atomicAdd(&res[13], 1ull);
        check_lines<32>(a, gen, 4, 9, res);
        atomicAdd(&res[14], 1ull);
    }
    if (bad_ref) atomicAdd(&res[0], static_cast<unsigned long long>(bad_ref));
    if (bad_coal) atomicAdd(&res[2], static_cast<unsigned long long>(bad_coal));
    if (failed) atomicAdd(&res[1], static_cast<unsigned long long>(failed));
}

template <int N>
struct bytes_t {
    uint8_t b[N];
};
struct alignas(8) elem24 {
    uint64_t a, b, c;
};

#define BAM_TYPES_KERNELS(SUFFIX, TYPE)                                                                     \
    extern "C" __global__ void bam_cache_types_write_##SUFFIX(bam_array_view av, uint32_t gen,              \
                                                              unsigned long long* res) {                    \
        types_write<TYPE>(av, gen, res);                                                                    \
    }                                                                                                       \
    extern "C" __global__ void bam_cache_types_check_##SUFFIX(bam_array_view av, uint32_t gen,              \
                                                              uint32_t use_ref, unsigned long long* res) {  \
        types_check<TYPE>(av, gen, use_ref, res);                                                           \
    }
BAM_TYPES_KERNELS(1, uint8_t)
BAM_TYPES_KERNELS(4, uint32_t)
BAM_TYPES_KERNELS(8, uint64_t)
BAM_TYPES_KERNELS(16, uint4)
BAM_TYPES_KERNELS(24, elem24)

/// Every warp pins line 2w with one array_ref and, still holding it, reads line 2w + 1
/// with another: with fewer slots than twice the warps the second acquisitions must
/// time out (bounded) and fail. res[0] = warps that got both, res[1] = warps that failed.
extern "C" __global__ void bam_cache_pin_hog(bam_array_view av, unsigned long long* res) {
    array<uint32_t> a{av};
    const uint64_t w = gtid() / 32;
    bool ok = false;
    {
        array_ref<uint32_t> r1(a), r2(a);
        uint32_t x;
        const bool ok1 = r1.try_read((2 * w) * av.epl % av.n, x);
        const bool ok2 = r2.try_read((2 * w + 1) * av.epl % av.n, x);
        ok = ok1 && ok2;
    }
    if (lane_id() == 0) atomicAdd(&res[ok ? 0 : 1], 1ull);
}

/// Reads every element with try_read; res[0] += failed reads, res[1] += wrong values
/// (element e of a medium filled with the pattern of SSD `ssd`, single-SSD layout).
extern "C" __global__ void bam_cache_check_u32(bam_array_view av, uint32_t ssd, uint64_t word0,
                                               unsigned long long* res) {
    array<uint32_t> a{av};
    uint64_t failed = 0, bad = 0;
    for (uint64_t i = gtid(); i < av.n; i += gthreads()) {
        uint32_t x;
        if (!a.try_read(i, x)) ++failed;
        else if (x != pattern_word(ssd, word0 + i, 0)) ++bad;
    }
    if (failed) atomicAdd(&res[0], static_cast<unsigned long long>(failed));
    if (bad) atomicAdd(&res[1], static_cast<unsigned long long>(bad));
}

// ---------------------------------------------------------------------------------------
// benchmark (element i holds mix64(i ^ seed); every read is checked)
//
// res: [0] elements read, [1] wrong values, [2] min start (globaltimer), [3] max end.

__device__ __forceinline__ void bench_done(unsigned long long* res, uint64_t elems, uint64_t bad, uint64_t t0) {
    const uint64_t t1 = globaltimer();
    __shared__ unsigned long long s_e, s_b, s_t0, s_t1;
    if (threadIdx.x == 0) {
        s_e = s_b = s_t1 = 0;
        s_t0 = ~0ull;
    }
    __syncthreads();
    atomicAdd(&s_e, static_cast<unsigned long long>(elems));
    if (bad) atomicAdd(&s_b, static_cast<unsigned long long>(bad));
    atomicMin(&s_t0, static_cast<unsigned long long>(t0));
    atomicMax(&s_t1, static_cast<unsigned long long>(t1));
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(&res[0], s_e);
        if (s_b) atomicAdd(&res[1], s_b);
        atomicMin(&res[2], s_t0);
        atomicMax(&res[3], s_t1);
    }
}

/// Linear: thread t reads elements t, t + T, ... (consecutive threads, consecutive
/// elements), `reps` passes.
extern "C" __global__ void __launch_bounds__(256, 6) bam_cb_linear(bam_array_view av, uint32_t reps, uint64_t seed, unsigned long long* res) {
    array<uint64_t> a{av};
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0, cnt = 0;
    for (uint32_t r = 0; r < reps; ++r)
        for (uint64_t i = gtid(); i < av.n; i += gthreads()) {
            bad += a[i] != mix64(i ^ seed);
            ++cnt;
        }
    bench_done(res, cnt, bad, t0);
}

extern "C" __global__ void bam_cb_raw_linear(const uint64_t* p, uint64_t n, uint32_t reps, uint64_t seed,
                                             unsigned long long* res) {
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0, cnt = 0;
    for (uint32_t r = 0; r < reps; ++r)
        for (uint64_t i = gtid(); i < n; i += gthreads()) {
            bad += p[i] != mix64(i ^ seed);
            ++cnt;
        }
    bench_done(res, cnt, bad, t0);
}

/// Random: every thread reads `per_thread` uniformly random elements.
extern "C" __global__ void __launch_bounds__(256, 6) bam_cb_random(bam_array_view av, uint64_t per_thread, uint64_t seed, uint64_t rseed,
                                         unsigned long long* res) {
    array<uint64_t> a{av};
    uint64_t rng = rng_seed(rseed, gtid());
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0;
    for (uint64_t k = 0; k < per_thread; ++k) {
        const uint64_t i = (rng_next(rng) >> 11) % av.n;
        bad += a[i] != mix64(i ^ seed);
    }
    bench_done(res, per_thread, bad, t0);
}

extern "C" __global__ void bam_cb_raw_random(const uint64_t* p, uint64_t n, uint64_t per_thread, uint64_t seed,
                                             uint64_t rseed, unsigned long long* res) {
    uint64_t rng = rng_seed(rseed, gtid());
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0;
    for (uint64_t k = 0; k < per_thread; ++k) {
        const uint64_t i = (rng_next(rng) >> 11) % n;
        bad += p[i] != mix64(i ^ seed);
    }
    bench_done(res, per_thread, bad, t0);
}

/// Reads a whole line of `epl` u64 with the lanes of a warp, unrolled by 8.
__device__ __forceinline__ uint64_t read_line_u64(const uint64_t* d, uint64_t first, uint32_t count, uint64_t seed) {
    const uint32_t lane = lane_id();
    uint64_t bad = 0;
    uint32_t j = lane;
    for (; j + 7 * 32 < count; j += 8 * 32) {
        uint64_t x[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) x[u] = d[j + u * 32];
#pragma unroll
        for (int u = 0; u < 8; ++u) bad += x[u] != mix64((first + j + u * 32) ^ seed);
    }
    for (; j < count; j += 32) bad += d[j] != mix64((first + j) ^ seed);
    return bad;
}

/// Cache-line-aware: warp w reads lines w, w + W, ... whole (one acquisition per line
/// per warp), `reps` passes. Launch with blocks of a multiple of 32 threads.
extern "C" __global__ void __launch_bounds__(256, 6) bam_cb_cla(bam_array_view av, uint32_t reps, uint64_t seed, unsigned long long* res) {
    array<uint64_t> a{av};
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0, cnt = 0;
    const uint64_t warps = gthreads() / 32, lines = a.lines();
    for (uint32_t r = 0; r < reps; ++r)
        for (uint64_t line = gtid() / 32; line < lines; line += warps) {
            line_span<uint64_t> s = acquire_line(a, line, 0xffffffffu);
            if (!s.ok()) {
                bad += s.count;
                continue;
            }
            bad += read_line_u64(s.data, s.first, s.count, seed);
            release_line(a, s);
            cnt += (s.count + 31 - lane_id()) / 32;
        }
    bench_done(res, cnt, bad, t0);
}

extern "C" __global__ void bam_cb_raw_cla(const uint64_t* p, uint64_t n, uint32_t epl, uint32_t reps, uint64_t seed,
                                          unsigned long long* res) {
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0, cnt = 0;
    const uint64_t warps = gthreads() / 32, lines = (n + epl - 1) / epl;
    for (uint32_t r = 0; r < reps; ++r)
        for (uint64_t line = gtid() / 32; line < lines; line += warps) {
            const uint64_t first = line * epl;
            const uint32_t count = static_cast<uint32_t>(n - first < epl ? n - first : epl);
            bad += read_line_u64(p + first, first, count, seed);
            cnt += (count + 31 - lane_id()) / 32;
        }
    bench_done(res, cnt, bad, t0);
}

/// One warp: for k < nlines, every lane reads element `lane` of line first + k * stride
/// (a miss on a cold cache); out[k] = ns from before the access to after the warp has
/// its data. out[nlines] = wrong values.
extern "C" __global__ void bam_cb_latency(bam_array_view av, uint64_t first, uint64_t stride, uint32_t nlines,
                                          uint64_t seed, uint64_t* out) {
    array<uint64_t> a{av};
    uint64_t bad = 0;
    for (uint32_t k = 0; k < nlines; ++k) {
        const uint64_t i = (first + k * stride) * av.epl + lane_id();
        __syncwarp();
        const uint64_t t0 = globaltimer();
        const uint64_t x = a[i];
        __syncwarp();
        const uint64_t t1 = globaltimer();
        bad += x != mix64(i ^ seed);
        if (lane_id() == 0) out[k] = t1 - t0;
    }
    bad = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(bad));
    if (lane_id() == 0) out[nlines] = bad;
}

/// Where a miss's time goes (bench diagnostics), one thread, lines first, first + stride,
/// ... (`nlines` of them): the steps of a lone read (the cache's fill path:
/// bam::rw_sync_to<true>) taken one by one, with the global timer read between them.
/// out[8k + i], ns:
///   0 load_target (descriptor reads: I/O view, SSD view, queue pair view)
///   1 reserve_tickets (the ticket atomic)
///   2 wait_slot (the slot-release loads)
///   3 write_sqe + publish_marks (SQE stores, fence, mark)
///   4 push_tail (announce, doorbell, closing RMW)
///   5 from the start of push_tail until the CQE is visible here (polled, not consumed)
///   6 wait_on after that (reap: lock, fence, hand-over, slot release)
///   7 one pin of a line word (the hit path's atomic; the unpin is not waited for)
/// Reads go to the cache's slot 0, which the caller guarantees is unused (empty cache).
extern "C" __global__ void bam_cb_miss_phases(bam_array_view av, uint64_t first, uint64_t stride, uint32_t nlines,
                                               uint64_t* out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const bam_cache_dev* c = reinterpret_cast<const bam_cache_dev*>(av.cache);
    const uint32_t nlb = av.line_lbas;
    char* buf = reinterpret_cast<char*>(av.data);
    for (uint32_t k = 0; k < nlines; ++k) {
        uint64_t* o = out + 8 * k;
        const uint64_t line = first + k * stride;
        const uint64_t lba = line * nlb;
        const uint64_t t0 = globaltimer();
        const io_target tg = load_target(c->io, 0);
        const qp_ref& q = tg.q;
        // A store of loaded values (ordered before the timer read: both are volatile asm)
        // cannot issue before the loads have returned.
        atomic_dev<uint64_t>(o[7]).store(q.mask + tg.nsid + tg.buf.len + q.flags, cuda::memory_order_relaxed);
        const uint64_t t1 = globaltimer();
        const uint64_t t = reserve_tickets<true>(q, tg.qpi, 1);
        atomic_dev<uint64_t>(o[7]).store(t, cuda::memory_order_relaxed);
        const uint64_t t2 = globaltimer();
        status_t rc = wait_slot(c->io, q, t, nvme::OP_READ, lba);
        const uint64_t t3 = globaltimer();
        uint64_t prp1 = 0, prp2 = 0;
        const bool prp_ok = build_prps(tg.buf, reinterpret_cast<uint64_t>(buf), uint64_t(nlb) << tg.lba_shift, prp1, prp2);
        bam_sqe e;
        nvme::make_rw(e, nvme::OP_READ, static_cast<uint16_t>(t & q.mask), tg.nsid, lba, nlb, prp1, prp2);
        write_sqe(q, t, e);
        publish_marks(q, t, 1);
        const uint64_t t4 = globaltimer();
        if (rc == OK) rc = push_tail<true>(c->io, q, tg.qpi, t, 1);
        const uint64_t t5 = globaltimer();
        // Poll the CQ head entry until a CQE is posted there (ours: nothing else runs).
        const uint64_t head = atomic_dev<unsigned long long>(*reinterpret_cast<unsigned long long*>(&q.st->cq_head))
                                  .load(cuda::memory_order_relaxed) >> 1;
        deadline dl(c->io.timeout_ns);
        while (!cqe_posted(q, head, load_cqe_dw3(q, head & q.mask, cuda::memory_order_relaxed)) && !dl.expired()) {
        }
        const uint64_t t6 = globaltimer();
        io_handle h;
        h.ticket = t;
        h.qp = tg.qpi;
        h.ncmds = 1;
        h.ssd = 0;
        h.lba = lba;
        h.nlb = nlb;
        h.buf = buf;
        h.opcode = nvme::OP_READ;
        h.submitted = 1;
        if (rc == OK && prp_ok) rc = wait_on<true>(c->io, q, h);
        const uint64_t t7 = globaltimer();
        cache_detail::word_ref w = cache_detail::line_word(av, line);
        const unsigned long long old = w.fetch_add(1ull, cuda::memory_order_acquire);
        w.fetch_sub(1ull, cuda::memory_order_release);
        const uint64_t t8 = globaltimer();
        const bool good = rc == OK && prp_ok;
        o[0] = good ? t1 - t0 : ~0ull;
        o[1] = t2 - t1;
        o[2] = t3 - t2;
        o[3] = t4 - t3;
        o[4] = t5 - t4;
        o[5] = t6 - t4;
        o[6] = t7 - t6;
        o[7] = (t8 - t7) + (old & 0);  // `old` keeps the fetch_add's result used
    }
}

/// The cache layer's share of a miss (bench diagnostics), one thread, `nlines` cold lines
/// first, first + stride, ... (and, for step 4, first + stride / 4, ...): out[5k + i], ns:
///   0 cache_try_hit (the pin that finds the line invalid)
///   1 cache_acquire_slow (claim, slot, fill through the I/O layer, publish)
///   2 reading the element from the line
///   3 cache_release (a release: one fence)
///   4 one lane's whole bam::array read of an element of another cold line (the
///     latency kernel's access with one lane instead of 32)
extern "C" __global__ void bam_cb_miss_anatomy(bam_array_view av, uint64_t first, uint64_t stride, uint32_t nlines,
                                               uint64_t* out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const array<uint64_t> a{av};
    for (uint32_t k = 0; k < nlines; ++k) {
        uint64_t* o = out + 5 * k;
        const uint64_t line = first + k * stride;
        const uint64_t t0 = globaltimer();
        unsigned long long old = 0;
        char* p = cache_try_hit(av, line, 1, old);
        const uint64_t t1 = globaltimer() + (p != nullptr ? 0 : 0);
        if (p == nullptr) {
            deadline dl(0);
            p = cache_acquire_slow(av, line, 1, old, dl, false, true);
        }
        const uint64_t t2 = globaltimer();
        if (p == nullptr) {
            o[0] = ~0ull;
            continue;
        }
        const uint64_t x = atomic_dev<uint64_t>(*reinterpret_cast<uint64_t*>(p)).load(cuda::memory_order_relaxed);
        atomic_dev<uint64_t>(o[3]).store(x, cuda::memory_order_relaxed);  // waits for the load
        const uint64_t t3 = globaltimer();
        cache_release(av, line, 1, false);
        const uint64_t t4 = globaltimer();
        const uint64_t x1 = a[(line + stride / 4) * av.epl];
        atomic_dev<uint64_t>(o[4]).store(x1, cuda::memory_order_relaxed);  // waits for the read
        const uint64_t t5 = globaltimer();
        o[0] = t1 - t0;
        o[1] = t2 - t1;
        o[2] = t3 - t2;
        o[3] = t4 - t3;
        o[4] = t5 - t4;
    }
}
