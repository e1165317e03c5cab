// suite.cu — the kernel suite of `bam bench kernels` (crates/bam-bench/src/suite/): nine
// kernels, each written ONCE as a template over its array types and instantiated five ways:
//
//   suite_<k>_plain  plain pointers (T* / const T*): the kernel as it runs over GPU memory,
//                    zero-copy host memory or managed (UVM) memory
//   suite_<k>_bam    bam::array<T>: the same template, ported by swapping the arrays only
//   suite_<k>_pin    pin_port<T> (below): bam::array<T> read through read_pinned, the
//                    pin-per-access hit path, kept for an A/B against operator[]
//   suite_<k>_bamu   bam::array<T> like _bam, but the kernel without __launch_bounds__
//                    (see SUITE_BOUNDS below)
//   suite_<k>_bam8   bam::array<T> like _bam, under __launch_bounds__(256, 8)
//
// Reads are `a[i]` everywhere; writes go through put(a, i, x), a three-line overload set
// (a[i] = x for pointers, a.store(i, x) for bam::array and pin_port), and atomic adds
// through add(a, i, x) (atomicAdd for pointers, a.fetch_add(i, x) for the others), and
// compare-and-swaps through cas(a, i, e, d) (atomicCAS, a.compare_exchange). Nothing else
// differs between the forms: the wrappers at the end only forward their parameters.
//
// Kernels (the arrays that are ported — "storage arrays" — in brackets; everything else
// stays in GPU memory in every form):
//   spmv       CSR SpMV, one warp per row, warp-shuffle reduction  [col u32, val f32]
//   bfs        one level of a top-down BFS, one warp per frontier vertex  [rowptr u64, col u32]
//   gather     sum of random elements, every value checked  [a u64]
//   hist       256-bin histogram of one byte of each element  [a u32]
//   ahist      histogram with its bins in storage too, one atomic add per element  [a u32,
//              bins u64]; ahist_sum checks that the bins grew by the elements counted
//   rmw        a[i] = a[i] * 3 + 1 over the array  [a u64]; rmw_check verifies it
//   pagerank   one PageRank pull iteration, a thread per vertex  [rowptr u64, col u32]
//   hcount     group-by count into a linear-probing hash table: compare-and-swap claims,
//              atomic adds  [keys u32, table u64]; hcount_sum fingerprints the table
//   embag      embedding bags: sums of random 512-byte rows, a warp per bag  [table f32]
// plus the generators of their inputs (deterministic from a seed), a striping copy that
// places data on the simulated SSDs' media, a cache warm-up (suite_touch_*), suite_info and
// the gauge that tells when the GPU's memory is quiet (suite_settle_read).
#include <bam/array.cuh>
#include <bam/pattern.cuh>
#include <bam/util.cuh>

#include <type_traits>
#include <utility>

namespace {

using bam::gthreads;
using bam::gtid;
using bam::lane_id;
using bam::mix64;

// ---- read_pinned, where bam::array<T> has it ---------------------------------------------
//
// pin_port reads through bam::array<T>::read_pinned(i) (the pin-per-access hit path). Until
// that method exists in array.cuh, pin_port falls back to operator[] (then bam-pin-hit
// measures the same path as bam-hit); suite_info tells the host which one was compiled.
template <typename A, typename = void>
struct has_read_pinned : std::false_type {};
template <typename A>
struct has_read_pinned<A, std::void_t<decltype(std::declval<const A&>().read_pinned(uint64_t{}))>>
    : std::true_type {};

template <typename T>
__device__ __forceinline__ T read_pinned_or_index(const bam::array<T>& a, uint64_t i) {
    if constexpr (has_read_pinned<bam::array<T>>::value) {
        return a.read_pinned(i);
    } else {
        return a[i];  // fallback: bam::array<T> has no read_pinned (yet)
    }
}

}  // namespace

/// bam::array<T> read through its pin-per-access path. Same layout as bam::array<T> (and
/// so as bam_array_view): the host passes Array::view() for it.
template <typename T>
struct pin_port {
    bam::array<T> a;
    __device__ __forceinline__ T operator[](uint64_t i) const { return read_pinned_or_index(a, i); }
    __host__ __device__ uint64_t size() const { return a.size(); }
};
static_assert(sizeof(pin_port<uint64_t>) == sizeof(bam_array_view), "pin_port is passed as a bam_array_view");

namespace {

// ---- writes: the one place where the forms differ ----------------------------------------
template <typename T>
struct same { using type = T; };  // keeps x out of template argument deduction

template <typename T>
__device__ __forceinline__ void put(T* a, uint64_t i, typename same<T>::type x) {
    a[i] = x;
}
template <typename T>
__device__ __forceinline__ void put(const bam::array<T>& a, uint64_t i, typename same<T>::type x) {
    a.store(i, x);
}
template <typename T>
__device__ __forceinline__ void put(const pin_port<T>& a, uint64_t i, typename same<T>::type x) {
    a.a.store(i, x);
}
__device__ __forceinline__ void add(uint64_t* a, uint64_t i, uint64_t x) {
    atomicAdd(reinterpret_cast<unsigned long long*>(a + i), static_cast<unsigned long long>(x));
}
__device__ __forceinline__ void add(const bam::array<uint64_t>& a, uint64_t i, uint64_t x) { a.fetch_add(i, x); }
__device__ __forceinline__ void add(const pin_port<uint64_t>& a, uint64_t i, uint64_t x) { a.a.fetch_add(i, x); }
// Compare-and-swap of element i: true when it held `e` and now holds `d`; otherwise `e`
// becomes what it holds (atomicCAS for pointers, compare_exchange for the others).
__device__ __forceinline__ bool cas(uint64_t* a, uint64_t i, uint64_t& e, uint64_t d) {
    const unsigned long long old = atomicCAS(reinterpret_cast<unsigned long long*>(a + i),
                                             static_cast<unsigned long long>(e), static_cast<unsigned long long>(d));
    const bool swapped = old == e;
    e = old;
    return swapped;
}
__device__ __forceinline__ bool cas(const bam::array<uint64_t>& a, uint64_t i, uint64_t& e, uint64_t d) {
    return a.compare_exchange(i, e, d);
}
__device__ __forceinline__ bool cas(const pin_port<uint64_t>& a, uint64_t i, uint64_t& e, uint64_t d) {
    return a.a.compare_exchange(i, e, d);
}

constexpr uint32_t FULL = 0xffffffffu;
constexpr uint32_t UNSEEN = 0xffffffffu;  // bfs: distance of a vertex not reached yet

__device__ __forceinline__ uint64_t warp_sum_u64(uint64_t v) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(FULL, v, off);
    return v;
}

// ---- the kernels, once each ---------------------------------------------------------------

/// y[r] = sum_j val[j] * x[col[j]] for rows r0 <= r < r1. One warp per row; lane l takes
/// nonzeros begin + l, begin + l + 32, ... with fused multiply-adds in that order, then a
/// fixed shuffle tree adds the lanes' sums: the result is bitwise deterministic (the host
/// replays it for sampled rows). Blocks of a multiple of 32 threads.
template <typename Col, typename Val>
__device__ __forceinline__ void spmv(const uint64_t* rowptr, Col col, Val val, const float* x, float* y, uint64_t r0,
                                     uint64_t r1) {
    const uint64_t warp = gtid() / 32, nwarps = gthreads() / 32;
    const uint32_t lane = lane_id();
    for (uint64_t r = r0 + warp; r < r1; r += nwarps) {
        const uint64_t begin = rowptr[r], end = rowptr[r + 1];
        float s = 0.0f;
        for (uint64_t j = begin + lane; j < end; j += 32) s = __fmaf_rn(val[j], x[col[j]], s);
        for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(FULL, s, off);
        if (lane == 0) y[r] = s;
    }
}

/// Expands frontier[k0..k1) of BFS level `level`: each unseen neighbour u of a frontier
/// vertex gets dist[u] = level + 1 (an atomic claim) and is appended to `next`;
/// counts[level + 1] counts them. One warp per frontier vertex, lanes over its neighbours.
template <typename Row, typename Col>
__device__ __forceinline__ void bfs(Row rowptr, Col col, uint32_t* dist, const uint32_t* frontier, uint64_t k0,
                                    uint64_t k1, uint32_t* next, uint32_t* counts, uint32_t level) {
    const uint64_t warp = gtid() / 32, nwarps = gthreads() / 32;
    const uint32_t lane = lane_id();
    for (uint64_t k = k0 + warp; k < k1; k += nwarps) {
        const uint32_t v = frontier[k];
        const uint64_t begin = rowptr[v], end = rowptr[v + 1];
        for (uint64_t j0 = begin; j0 < end; j0 += 32) {  // warp-uniform: the ballot below is full
            const uint64_t j = j0 + lane;
            uint32_t u = 0;
            bool found = false;
            if (j < end) {
                u = col[j];
                found = dist[u] == UNSEEN && atomicCAS(&dist[u], UNSEEN, level + 1) == UNSEEN;
            }
            const uint32_t m = __ballot_sync(FULL, found);
            if (m != 0) {
                uint32_t base = 0;
                if (lane == 0) base = atomicAdd(&counts[level + 1], static_cast<uint32_t>(__popc(m)));
                base = __shfl_sync(FULL, base, 0);
                if (found) next[base + __popc(m & bam::lanemask_lt())] = u;
            }
        }
    }
}

/// Reads k = first .. first + count - 1 read a[mix64(k ^ rseed) % n]; element i must hold
/// mix64(i ^ seed). out[0] += the sum of the values read, out[1] += the wrong ones.
template <typename A>
__device__ __forceinline__ void gather(A a, uint64_t n, uint64_t first, uint64_t count, uint64_t seed, uint64_t rseed,
                                       unsigned long long* out) {
    uint64_t sum = 0, bad = 0;
    for (uint64_t k = gtid(); k < count; k += gthreads()) {
        const uint64_t i = mix64((first + k) ^ rseed) % n;
        const uint64_t v = a[i];
        sum += v;
        bad += v != mix64(i ^ seed);
    }
    sum = warp_sum_u64(sum);
    bad = warp_sum_u64(bad);
    if (lane_id() == 0) {
        atomicAdd(&out[0], static_cast<unsigned long long>(sum));
        if (bad != 0) atomicAdd(&out[1], static_cast<unsigned long long>(bad));
    }
}

/// hist[b] += elements i in [first, end) whose byte (a[i] >> shift) & 255 is b; counted in
/// shared memory per block, then merged.
template <typename A>
__device__ __forceinline__ void hist(A a, uint64_t first, uint64_t end, uint32_t shift, unsigned long long* out) {
    __shared__ uint32_t h[256];
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    for (uint64_t i = first + gtid(); i < end; i += gthreads()) atomicAdd(&h[(a[i] >> shift) & 255u], 1u);
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(h[b]));
}

/// bins[a[i] % nbins] += 1 for i in [first, end): a histogram whose bins are too many
/// for shared memory, one atomic add per element on a bin anywhere in the array.
template <typename A, typename B>
__device__ __forceinline__ void ahist(A a, B bins, uint64_t nbins, uint64_t first, uint64_t end) {
    for (uint64_t i = first + gtid(); i < end; i += gthreads()) add(bins, a[i] % nbins, 1);
}

/// out[0] += the sum over bins of bins[b] - mix64(b ^ seed) (what suite_fill_u64 put
/// there): the elements counted since, unless an add was lost or made twice.
template <typename B>
__device__ __forceinline__ void ahist_sum(B bins, uint64_t nbins, uint64_t seed, unsigned long long* out) {
    uint64_t sum = 0;
    for (uint64_t b = gtid(); b < nbins; b += gthreads()) sum += bins[b] - mix64(b ^ seed);
    sum = warp_sum_u64(sum);
    if (lane_id() == 0 && sum != 0) atomicAdd(out, static_cast<unsigned long long>(sum));
}

/// a[i] = a[i] * 3 + 1 for first <= i < end.
template <typename A>
__device__ __forceinline__ void rmw(A a, uint64_t first, uint64_t end) {
    for (uint64_t i = first + gtid(); i < end; i += gthreads()) put(a, i, a[i] * 3 + 1);
}

/// Counts the elements of an rmw'd array that differ from mix64(i ^ seed) with x -> 3x + 1
/// applied `times` times (times + 1 for i < split: a last pass that stopped there).
template <typename A>
__device__ __forceinline__ void rmw_check(A a, uint64_t n, uint64_t seed, uint32_t times, uint64_t split,
                                          unsigned long long* wrong) {
    uint64_t bad = 0;
    for (uint64_t i = gtid(); i < n; i += gthreads()) {
        uint64_t e = mix64(i ^ seed);
        const uint32_t t = times + (i < split ? 1u : 0u);
        for (uint32_t k = 0; k < t; ++k) e = e * 3 + 1;
        bad += a[i] != e;
    }
    bad = warp_sum_u64(bad);
    if (lane_id() == 0 && bad != 0) atomicAdd(wrong, static_cast<unsigned long long>(bad));
}

/// One pull iteration of PageRank over the in-edge CSR (rowptr, col), one thread per
/// vertex as a first port writes it: next[v] = base + damp * sum of contrib[u] over the
/// in-neighbours u of v (contrib[u] = rank[u] / outdeg[u]), the neighbours added in order
/// and the last step one fused multiply-add (the host replays it bit for bit). Rows of
/// very different lengths share a warp.
template <typename Row, typename Col>
__device__ __forceinline__ void pagerank(Row rowptr, Col col, const float* contrib, float* next, float base,
                                         float damp, uint64_t v0, uint64_t v1) {
    for (uint64_t v = v0 + gtid(); v < v1; v += gthreads()) {
        const uint64_t begin = rowptr[v], end = rowptr[v + 1];
        float s = 0.0f;
        for (uint64_t j = begin; j < end; ++j) s += contrib[col[j]];
        next[v] = __fmaf_rn(damp, s, base);
    }
}

/// Group-by count into an open-addressing hash table (linear probing, mask + 1 slots of
/// u64: key << 32 | count, 0 = empty; keys are nonzero u32) for keys[first..end): a free
/// slot is claimed with a compare-and-swap, a slot that holds the key gets an atomic add:
/// stores whose address depends on what was read.
template <typename K, typename T>
__device__ __forceinline__ void hcount(K keys, T table, uint64_t mask, uint64_t first, uint64_t end) {
    for (uint64_t i = first + gtid(); i < end; i += gthreads()) {
        const uint64_t k = keys[i];
        uint64_t h = mix64(k) & mask;
        for (uint64_t probe = 0; probe <= mask; ++probe, h = (h + 1) & mask) {
            uint64_t v = table[h];
            if (v == 0) {
                uint64_t e = 0;
                if (cas(table, h, e, (k << 32) | 1)) break;
                v = e;  // taken meanwhile: by this key or another
            }
            if ((v >> 32) == k) {
                add(table, h, 1);
                break;
            }
        }
    }
}

/// out[0] += the counts of the table's slots, out[1] += the occupied slots, out[2] += the
/// sum over slots of mix64(key) * count (wrapping): what suite_hcount_expect predicts.
template <typename T>
__device__ __forceinline__ void hcount_sum(T table, uint64_t slots, unsigned long long* out) {
    uint64_t count = 0, used = 0, print = 0;
    for (uint64_t h = gtid(); h < slots; h += gthreads()) {
        const uint64_t v = table[h];
        const uint64_t c = v & 0xffffffffull;
        count += c;
        used += v != 0;
        print += mix64(v >> 32) * c;
    }
    count = warp_sum_u64(count);
    used = warp_sum_u64(used);
    print = warp_sum_u64(print);
    if (lane_id() == 0) {
        atomicAdd(&out[0], static_cast<unsigned long long>(count));
        atomicAdd(&out[1], static_cast<unsigned long long>(used));
        atomicAdd(&out[2], static_cast<unsigned long long>(print));
    }
}

/// Columns of an embedding row (the rows are EMB_DIM f32, 512 bytes).
constexpr uint32_t EMB_DIM = 128;

/// Embedding bags b0 <= b < b1: out[b] = the sum of rows idx[b * per_bag + j] of the
/// table, j = 0 .. per_bag - 1 in order (the host replays it bit for bit). One warp per
/// bag, lane l adds columns l, l + 32, l + 64, l + 96: each read of a row is 128
/// consecutive bytes across the warp. Blocks of a multiple of 32 threads.
template <typename A>
__device__ __forceinline__ void embag(A table, const uint32_t* idx, uint32_t per_bag, float* out, uint64_t b0,
                                      uint64_t b1) {
    const uint64_t warp = gtid() / 32, nwarps = gthreads() / 32;
    const uint32_t lane = lane_id();
    for (uint64_t b = b0 + warp; b < b1; b += nwarps) {
        float acc[EMB_DIM / 32] = {};
        for (uint32_t j = 0; j < per_bag; ++j) {
            const uint64_t row = idx[b * per_bag + j];
#pragma unroll
            for (uint32_t k = 0; k < EMB_DIM / 32; ++k) acc[k] += table[row * EMB_DIM + k * 32 + lane];
        }
#pragma unroll
        for (uint32_t k = 0; k < EMB_DIM / 32; ++k) out[b * EMB_DIM + k * 32 + lane] = acc[k];
    }
}

}  // namespace

// ---- instantiations: plain pointers, bam::array<T>, pin_port<T> ---------------------------
// Each macro use is one extern "C" kernel; the bodies only forward to the templates above.
// Every one has the launch bounds of the cache benchmark's kernels (bench.cu): blocks of
// 256 threads, 6 per SM. Without them the bam::array forms take about 250 registers (the
// miss path inlined) and one block fills an SM; the plain forms need fewer than 40
// registers, so the bound changes nothing for them. The host launches 256 threads per
// block.
// Every form gets the cache bench's register budget, 40 registers at 256 threads x 6 blocks
// (plain forms need fewer anyway); the `bamu` form is the bam::array port without it, as a
// porter who only swaps the arrays writes it. A kernel gets the most registers any function
// it may call wants, and the cache's miss path wants about 200: without a budget such a
// kernel runs 8 warps per SM (docs/porting-guide.md).
#define SUITE_BOUNDS __launch_bounds__(256, 6)
#define SUITE_UNBOUNDED
// The `bam8` form: the port under the plain kernels' occupancy, 8 blocks of 256 threads
// per SM (32 registers). Streaming ports gain from the warps; ports whose loops then
// spill can lose (docs/porting-guide.md, "Register budget").
#define SUITE_BOUNDS8 __launch_bounds__(256, 8)

#define SUITE_SPMV(BOUNDS, FORM, COL, VAL)                                                                            \
    extern "C" __global__ void BOUNDS suite_spmv_##FORM(const uint64_t* rowptr, COL col, VAL val, const float* x,   \
                                                 float* y, uint64_t r0, uint64_t r1) {                       \
        spmv(rowptr, col, val, x, y, r0, r1);                                                                \
    }
SUITE_SPMV(SUITE_BOUNDS, plain, const uint32_t*, const float*)
SUITE_SPMV(SUITE_BOUNDS, bam, bam::array<uint32_t>, bam::array<float>)
SUITE_SPMV(SUITE_BOUNDS, pin, pin_port<uint32_t>, pin_port<float>)
SUITE_SPMV(SUITE_UNBOUNDED, bamu, bam::array<uint32_t>, bam::array<float>)
SUITE_SPMV(SUITE_BOUNDS8, bam8, bam::array<uint32_t>, bam::array<float>)

#define SUITE_BFS(BOUNDS, FORM, ROW, COL)                                                                              \
    extern "C" __global__ void BOUNDS suite_bfs_##FORM(ROW rowptr, COL col, uint32_t* dist, const uint32_t* frontier, \
                                                uint64_t k0, uint64_t k1, uint32_t* next, uint32_t* counts,   \
                                                uint32_t level) {                                             \
        bfs(rowptr, col, dist, frontier, k0, k1, next, counts, level);                                        \
    }
SUITE_BFS(SUITE_BOUNDS, plain, const uint64_t*, const uint32_t*)
SUITE_BFS(SUITE_BOUNDS, bam, bam::array<uint64_t>, bam::array<uint32_t>)
SUITE_BFS(SUITE_BOUNDS, pin, pin_port<uint64_t>, pin_port<uint32_t>)
SUITE_BFS(SUITE_UNBOUNDED, bamu, bam::array<uint64_t>, bam::array<uint32_t>)
SUITE_BFS(SUITE_BOUNDS8, bam8, bam::array<uint64_t>, bam::array<uint32_t>)

#define SUITE_GATHER(BOUNDS, FORM, A)                                                                                   \
    extern "C" __global__ void BOUNDS suite_gather_##FORM(A a, uint64_t n, uint64_t first, uint64_t count, uint64_t seed, \
                                                   uint64_t rseed, unsigned long long* out) {                   \
        gather(a, n, first, count, seed, rseed, out);                                                           \
    }
SUITE_GATHER(SUITE_BOUNDS, plain, const uint64_t*)
SUITE_GATHER(SUITE_BOUNDS, bam, bam::array<uint64_t>)
SUITE_GATHER(SUITE_BOUNDS, pin, pin_port<uint64_t>)
SUITE_GATHER(SUITE_UNBOUNDED, bamu, bam::array<uint64_t>)
SUITE_GATHER(SUITE_BOUNDS8, bam8, bam::array<uint64_t>)

#define SUITE_HIST(BOUNDS, FORM, A)                                                                              \
    extern "C" __global__ void BOUNDS suite_hist_##FORM(A a, uint64_t first, uint64_t end, uint32_t shift,    \
                                                 unsigned long long* out) {                            \
        hist(a, first, end, shift, out);                                                               \
    }
SUITE_HIST(SUITE_BOUNDS, plain, const uint32_t*)
SUITE_HIST(SUITE_BOUNDS, bam, bam::array<uint32_t>)
SUITE_HIST(SUITE_BOUNDS, pin, pin_port<uint32_t>)
SUITE_HIST(SUITE_UNBOUNDED, bamu, bam::array<uint32_t>)
SUITE_HIST(SUITE_BOUNDS8, bam8, bam::array<uint32_t>)

#define SUITE_AHIST(BOUNDS, FORM, A, B)                                                                       \
    extern "C" __global__ void BOUNDS suite_ahist_##FORM(A a, B bins, uint64_t nbins, uint64_t first,          \
                                                         uint64_t end) {                                      \
        ahist(a, bins, nbins, first, end);                                                                     \
    }                                                                                                          \
    extern "C" __global__ void BOUNDS suite_ahist_sum_##FORM(B bins, uint64_t nbins, uint64_t seed,            \
                                                             unsigned long long* out) {                       \
        ahist_sum(bins, nbins, seed, out);                                                                     \
    }
SUITE_AHIST(SUITE_BOUNDS, plain, const uint32_t*, uint64_t*)
SUITE_AHIST(SUITE_BOUNDS, bam, bam::array<uint32_t>, bam::array<uint64_t>)
SUITE_AHIST(SUITE_BOUNDS, pin, pin_port<uint32_t>, pin_port<uint64_t>)
SUITE_AHIST(SUITE_UNBOUNDED, bamu, bam::array<uint32_t>, bam::array<uint64_t>)
SUITE_AHIST(SUITE_BOUNDS8, bam8, bam::array<uint32_t>, bam::array<uint64_t>)

#define SUITE_RMW(BOUNDS, FORM, A)                                                                                       \
    extern "C" __global__ void BOUNDS suite_rmw_##FORM(A a, uint64_t first, uint64_t end) { rmw(a, first, end); }      \
    extern "C" __global__ void BOUNDS suite_rmw_check_##FORM(A a, uint64_t n, uint64_t seed, uint32_t times,           \
                                                      uint64_t split, unsigned long long* wrong) {              \
        rmw_check(a, n, seed, times, split, wrong);                                                              \
    }
SUITE_RMW(SUITE_BOUNDS, plain, uint64_t*)
SUITE_RMW(SUITE_BOUNDS, bam, bam::array<uint64_t>)
SUITE_RMW(SUITE_BOUNDS, pin, pin_port<uint64_t>)
SUITE_RMW(SUITE_UNBOUNDED, bamu, bam::array<uint64_t>)
SUITE_RMW(SUITE_BOUNDS8, bam8, bam::array<uint64_t>)

#define SUITE_PAGERANK(BOUNDS, FORM, ROW, COL)                                                                  \
    extern "C" __global__ void BOUNDS suite_pagerank_##FORM(ROW rowptr, COL col, const float* contrib, float* next, \
                                                            float base, float damp, uint64_t v0, uint64_t v1) {     \
        pagerank(rowptr, col, contrib, next, base, damp, v0, v1);                                                 \
    }
SUITE_PAGERANK(SUITE_BOUNDS, plain, const uint64_t*, const uint32_t*)
SUITE_PAGERANK(SUITE_BOUNDS, bam, bam::array<uint64_t>, bam::array<uint32_t>)
SUITE_PAGERANK(SUITE_BOUNDS, pin, pin_port<uint64_t>, pin_port<uint32_t>)
SUITE_PAGERANK(SUITE_UNBOUNDED, bamu, bam::array<uint64_t>, bam::array<uint32_t>)
SUITE_PAGERANK(SUITE_BOUNDS8, bam8, bam::array<uint64_t>, bam::array<uint32_t>)

#define SUITE_HCOUNT(BOUNDS, FORM, K, T)                                                                        \
    extern "C" __global__ void BOUNDS suite_hcount_##FORM(K keys, T table, uint64_t mask, uint64_t first,       \
                                                          uint64_t end) {                                       \
        hcount(keys, table, mask, first, end);                                                                  \
    }                                                                                                           \
    extern "C" __global__ void BOUNDS suite_hcount_sum_##FORM(T table, uint64_t slots, unsigned long long* out) { \
        hcount_sum(table, slots, out);                                                                          \
    }
SUITE_HCOUNT(SUITE_BOUNDS, plain, const uint32_t*, uint64_t*)
SUITE_HCOUNT(SUITE_BOUNDS, bam, bam::array<uint32_t>, bam::array<uint64_t>)
SUITE_HCOUNT(SUITE_BOUNDS, pin, pin_port<uint32_t>, pin_port<uint64_t>)
SUITE_HCOUNT(SUITE_UNBOUNDED, bamu, bam::array<uint32_t>, bam::array<uint64_t>)
SUITE_HCOUNT(SUITE_BOUNDS8, bam8, bam::array<uint32_t>, bam::array<uint64_t>)

#define SUITE_EMBAG(BOUNDS, FORM, A)                                                                             \
    extern "C" __global__ void BOUNDS suite_embag_##FORM(A table, const uint32_t* idx, uint32_t per_bag, float* out, \
                                                         uint64_t b0, uint64_t b1) {                             \
        embag(table, idx, per_bag, out, b0, b1);                                                                 \
    }
SUITE_EMBAG(SUITE_BOUNDS, plain, const float*)
SUITE_EMBAG(SUITE_BOUNDS, bam, bam::array<float>)
SUITE_EMBAG(SUITE_BOUNDS, pin, pin_port<float>)
SUITE_EMBAG(SUITE_UNBOUNDED, bamu, bam::array<float>)
SUITE_EMBAG(SUITE_BOUNDS8, bam8, bam::array<float>)

// ---- cache warm-up ------------------------------------------------------------------------

/// Loads every line of `a` into the cache: warp w takes lines w, w + W, ... whole
/// (acquire_line / release_line with the full warp), so each line is filled by one warp
/// with no other waiting for it. The all-hits variants start from this: when many warps
/// miss the same line at once (a streaming kernel's first run), each of them draws from
/// the clock hand, the hand wraps before every line is in, and from then on each fill
/// evicts a valid line. failed[0] += lines that could not be acquired (the error is in
/// the log). Launch with blocks of a multiple of 32 threads.
template <typename T>
__device__ __forceinline__ void touch(const bam::array<T>& a, unsigned long long* failed) {
    const uint64_t warps = gthreads() / 32, lines = a.lines();
    for (uint64_t line = gtid() / 32; line < lines; line += warps) {  // warp-uniform
        const bam::line_span<T> s = bam::acquire_line(a, line, FULL);
        if (s.ok()) {
            bam::release_line(a, s);
        } else if (lane_id() == 0) {
            atomicAdd(failed, 1ull);
        }
    }
}

/// touch() for arrays of 4-byte elements (u32, f32: the view is the same).
extern "C" __global__ void SUITE_BOUNDS suite_touch_4(bam::array<uint32_t> a, unsigned long long* failed) {
    touch(a, failed);
}
/// touch() for arrays of 8-byte elements.
extern "C" __global__ void SUITE_BOUNDS suite_touch_8(bam::array<uint64_t> a, unsigned long long* failed) {
    touch(a, failed);
}

// ---- inputs ---------------------------------------------------------------------------------

/// out[0] = 1 when pin_port reads through bam::array<T>::read_pinned, 0 when it falls back
/// to operator[].
extern "C" __global__ void suite_info(uint32_t* out) {
    if (gtid() == 0) out[0] = has_read_pinned<bam::array<uint64_t>>::value ? 1u : 0u;
}

/// The gauge of suite/settle.rs: reads the n 16-byte words of `a` (grid-stride, as the
/// plain streaming kernels read) and writes `sink` only if what it read xors to a value a
/// zeroed buffer cannot give, so that the reads stay and nothing is written.
extern "C" __global__ void __launch_bounds__(256, 8) suite_settle_read(const uint4* a, uint64_t n, uint32_t* sink) {
    uint32_t x = 0;
    for (uint64_t i = gtid(); i < n; i += gthreads()) {
        const uint4 v = a[i];
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0xdeadbeefu) *sink = x;
}

/// deg[i] for rows i < n: a discrete Pareto (alpha = 2) degree, floor(xm / sqrt(u)) with u
/// uniform in (0, 1] from mix64(i ^ seed), at most `cap`. Its mean is about 2 * xm; most
/// rows have xm to 2 xm nonzeros and a few have thousands (a power-law tail).
extern "C" __global__ void suite_csr_degrees(uint32_t* deg, uint64_t n, double xm, uint32_t cap, uint64_t seed) {
    for (uint64_t i = gtid(); i < n; i += gthreads()) {
        const double u = static_cast<double>((mix64(i ^ seed) >> 11) + 1) * 0x1p-53;
        const double d = floor(xm / sqrt(u));
        deg[i] = d >= static_cast<double>(cap) ? cap : static_cast<uint32_t>(d);
    }
}

/// col[j] = a uniformly random column < ncols, val[j] in [0.5, 1.5), for j < nnz (each
/// from mix64 of j and its own seed).
extern "C" __global__ void suite_csr_fill(uint32_t* col, float* val, uint64_t nnz, uint64_t ncols, uint64_t seed) {
    for (uint64_t j = gtid(); j < nnz; j += gthreads()) {
        col[j] = static_cast<uint32_t>(mix64(j ^ seed) % ncols);
        val[j] = 0.5f + static_cast<float>(mix64(j ^ ~seed) >> 40) * 0x1p-24f;
    }
}

/// x[i] in [0.5, 1.5) from mix64(i ^ seed).
extern "C" __global__ void suite_fill_f32(float* x, uint64_t n, uint64_t seed) {
    for (uint64_t i = gtid(); i < n; i += gthreads()) x[i] = 0.5f + static_cast<float>(mix64(i ^ seed) >> 40) * 0x1p-24f;
}

/// p[i] = mix64(i ^ seed).
extern "C" __global__ void suite_fill_u64(uint64_t* p, uint64_t n, uint64_t seed) {
    for (uint64_t i = gtid(); i < n; i += gthreads()) p[i] = mix64(i ^ seed);
}

/// p[i] = the high half of mix64(i ^ seed).
extern "C" __global__ void suite_fill_u32(uint32_t* p, uint64_t n, uint64_t seed) {
    for (uint64_t i = gtid(); i < n; i += gthreads()) p[i] = static_cast<uint32_t>(mix64(i ^ seed) >> 32);
}

/// Copies the lines of `src` (words 4-byte words, lines of line_words) that live on SSD
/// `ssd` of `nssd` under the stripe layout (line l on SSD l % nssd, at line l / nssd of
/// that SSD's extent) to `dst`, that SSD's extent. nssd = 1: a plain copy.
extern "C" __global__ void suite_copy_lines(const uint32_t* src, uint64_t words, uint32_t line_words, uint32_t nssd,
                                            uint32_t ssd, uint32_t* dst) {
    const uint64_t nlines = (words + line_words - 1) / line_words;
    const uint64_t mine = ssd < nlines ? (nlines - ssd + nssd - 1) / nssd : 0;
    for (uint64_t t = gtid(); t < mine * line_words; t += gthreads()) {
        const uint64_t ssd_line = t / line_words, off = t - ssd_line * line_words;
        const uint64_t w = (ssd_line * nssd + ssd) * line_words + off;
        if (w < words) dst[t] = src[w];
    }
}

/// BFS start: dist[i] = UNSEEN except dist[src] = 0, frontier = {src}, counts[0] = 1 and
/// counts[1..ncounts) = 0 (counts[l] is the size of level l).
extern "C" __global__ void suite_bfs_init(uint32_t* dist, uint64_t n, uint32_t* frontier, uint32_t src,
                                          uint32_t* counts, uint32_t ncounts) {
    for (uint64_t i = gtid(); i < n; i += gthreads()) dist[i] = i == src ? 0u : UNSEEN;
    for (uint64_t i = gtid(); i < ncounts; i += gthreads()) counts[i] = i == 0 ? 1u : 0u;
    if (gtid() == 0) frontier[0] = src;
}

/// p[i] = offset + mix64(i ^ seed) % bound, for i < n: hash-count's keys (offset 1: never
/// 0, the empty slot) and embedding-bag's row indices (offset 0).
extern "C" __global__ void suite_fill_below(uint32_t* p, uint64_t n, uint64_t bound, uint32_t offset, uint64_t seed) {
    for (uint64_t i = gtid(); i < n; i += gthreads()) p[i] = offset + static_cast<uint32_t>(mix64(i ^ seed) % bound);
}

/// What hash-count's table must hold after counting keys[0..end) once into an empty one:
/// out[0] += the sum of mix64(key) over those keys (wrapping), out[1] += the distinct keys
/// among them (seen: a zeroed bitmap of the key range, one bit per key, set here).
extern "C" __global__ void suite_hcount_expect(const uint32_t* keys, uint64_t end, uint32_t* seen,
                                               unsigned long long* out) {
    uint64_t print = 0, fresh = 0;
    for (uint64_t i = gtid(); i < end; i += gthreads()) {
        const uint32_t k = keys[i];
        print += mix64(k);
        const uint32_t bit = 1u << (k & 31);
        fresh += (atomicOr(&seen[k >> 5], bit) & bit) == 0;
    }
    print = warp_sum_u64(print);
    fresh = warp_sum_u64(fresh);
    if (lane_id() == 0) {
        atomicAdd(&out[0], static_cast<unsigned long long>(print));
        atomicAdd(&out[1], static_cast<unsigned long long>(fresh));
    }
}

/// PageRank's out-degrees: outdeg[col[j]] += 1 for j < nnz (outdeg zeroed first).
extern "C" __global__ void suite_pagerank_outdeg(const uint32_t* col, uint64_t nnz, uint32_t* outdeg) {
    for (uint64_t j = gtid(); j < nnz; j += gthreads()) atomicAdd(&outdeg[col[j]], 1u);
}

/// PageRank's contributions from a uniform rank 1 / n: contrib[u] = (1 / n) / outdeg[u]
/// (0 for a vertex without out-edges).
extern "C" __global__ void suite_pagerank_contrib(const uint32_t* outdeg, uint64_t n, float* contrib) {
    const float rank = 1.0f / static_cast<float>(n);
    for (uint64_t u = gtid(); u < n; u += gthreads())
        contrib[u] = outdeg[u] == 0 ? 0.0f : __fdiv_rn(rank, static_cast<float>(outdeg[u]));
}
