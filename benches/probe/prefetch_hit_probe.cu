// Micro-probe: does an L2 prefetch of the slot a streaming read will need next take the
// HBM latency off the hit path's chain? A hit is three dependent loads (line word, element,
// word again: cache_read_unpinned); on a streaming all-hits run the element comes from HBM
// and the words from L2, so most of the chain is the element. A prefetch has no effect on
// memory semantics (the protocol stays as it is); it only needs the slot of the next access,
// which a relaxed load of that line's word gives (stale is harmless: a useless prefetch).
//
// Shapes (1 GiB, 4 KiB lines, every line valid in slot = line, blocks of 256 threads, 8 per
// SM as the suite's bam8 form): the suite's histogram (u32) and rmw (u64, a[i] = 3 a[i] + 1).
// Forms: plain; the protocol by hand; the protocol by hand with the next grid-stride
// access's element prefetched (each lane, or the warp's lowest lane for the warp's 128 B,
// one or two iterations ahead; or the whole next slot by the warp that starts a line);
// bam::array; bam::array behind a wrapper that learns each thread's stride and prefetches
// the element of the next access when the stride repeats (what the library could do).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I crates/bam/cuda/include -o prefetch-hit-probe benches/probe/prefetch_hit_probe.cu
#include <cstdint>
#include <cstdio>

#include "bam/array.cuh"
#include "probe_timing.h"

namespace {
constexpr uint64_t VALID = BAM_LINE_VALID, BUSY = BAM_LINE_BUSY;

__device__ __forceinline__ unsigned long long ld_acq(const void* p) {
    unsigned long long x;
    asm volatile("ld.global.acquire.gpu.b64 %0, [%1];" : "=l"(x) : "l"(__cvta_generic_to_global(p)) : "memory");
    return x;
}
__device__ __forceinline__ unsigned long long ld_rlx(const void* p) {
    unsigned long long x;
    asm volatile("ld.global.relaxed.gpu.b64 %0, [%1];" : "=l"(x) : "l"(__cvta_generic_to_global(p)) : "memory");
    return x;
}
__device__ __forceinline__ uint32_t ld_acq32(const void* p) {
    uint32_t x;
    asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(x) : "l"(__cvta_generic_to_global(p)) : "memory");
    return x;
}
__device__ __forceinline__ uint64_t ld_acq64(const void* p) { return ld_acq(p); }
__device__ __forceinline__ void pf_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(p)));
}
__device__ __forceinline__ void pf_bulk(const void* p, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(__cvta_generic_to_global(p)), "r"(bytes) : "memory");
}

// Where the element `i` of a 4 KiB-line array of T would be, given its line's word.
template <typename T>
__device__ __forceinline__ const T* elem_at(const T* data, unsigned long long w, uint64_t i) {
    constexpr uint64_t EPL = 4096 / sizeof(T);
    return data + (w >> 32) * EPL + (i & (EPL - 1));
}

// One read by the protocol, by hand (word acquire, element acquire, word relaxed); 0 when
// it would go to the slow path. P: prefetch mode for the access at `nx` (next access):
// 0 none, 1 each lane its element, 2 the warp's lowest lane its 128 B, 3 the lane at a
// line's start the whole slot.
template <typename T, int P>
__device__ __forceinline__ T hand_read(const T* data, const unsigned long long* words, uint64_t i, uint64_t nx,
                                       uint64_t n) {
    constexpr uint64_t EPL = 4096 / sizeof(T);
    const uint64_t line = i / EPL;
    unsigned long long nw = 0;
    const bool pf = P != 0 && nx < n && (P != 3 || (nx & (EPL - 1)) == 0);
    if (pf) nw = ld_rlx(&words[nx / EPL]);  // issued before the chain, not ordered: a hint
    T x = 0;
    const unsigned long long w1 = ld_acq(&words[line]);
    if ((w1 & (VALID | BUSY)) == VALID) {
        const T* p = elem_at(data, w1, i);
        T y;
        if constexpr (sizeof(T) == 8) y = ld_acq64(p); else y = ld_acq32(p);
        if (ld_rlx(&words[line]) == w1) x = y;
    }
    if (pf && (nw & (VALID | BUSY)) == VALID) {
        const T* q = elem_at(data, nw, nx);
        if (P == 1) pf_l2(q);
        if (P == 2 && (threadIdx.x & 31) == 0) pf_bulk(q, 128);
        if (P == 3) pf_bulk(q, 4096);
    }
    return x;
}

/// bam::array<T> with a per-thread stride memo: when this access's step from the last one
/// equals the step before (a grid-stride or any constant-stride loop) and the next access
/// would be in another line, the next access's line word is loaded (relaxed, before this
/// access's chain) and its element prefetched to L2 after it.
template <typename T>
struct pf_array {
    bam::array<T> a;
    mutable uint64_t last;
    mutable int64_t step;
    __device__ __forceinline__ uint64_t size() const { return a.size(); }
    __device__ __forceinline__ T operator[](uint64_t i) const {
        const int64_t s = static_cast<int64_t>(i - last);
        const bool steady = s == step;
        step = s;
        last = i;
        const uint64_t nx = i + static_cast<uint64_t>(s);
        uint32_t sub = 0, nsub = 0;
        const uint64_t line = a.line_of(i, sub), nline = a.line_of(nx, nsub);
        const bool pf = steady && nx < a.v.n && nline != line;
        unsigned long long nw = 0;
        if (pf) nw = ld_rlx(reinterpret_cast<const unsigned long long*>(a.v.words) + nline);
        const T x = a[i];
        if (pf && (nw & (VALID | BUSY)) == VALID)
            pf_l2(reinterpret_cast<const T*>(bam::detail::slot_ptr(a.v, nw >> 32)) + nsub);
        return x;
    }
    __device__ __forceinline__ void store(uint64_t i, const T& x) const { a.store(i, x); }
};

template <typename A>
__device__ __forceinline__ void hist_body(const A& a, uint64_t n, unsigned long long* out) {
    __shared__ uint32_t h[256];
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = t; i < n; i += T) atomicAdd(&h[a[i] & 255u], 1u);
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(h[b]));
}

// V: 0 plain, 1 hand protocol, 2 + each lane prefetches its next element, 3 + lowest lane
// prefetches the warp's next 128 B, 4 as 2 two iterations ahead, 5 the lane at the start
// of the next line prefetches its whole slot.
template <int V>
__global__ void __launch_bounds__(256, 8)
    hand_hist(const uint32_t* data, const unsigned long long* words, uint64_t n, unsigned long long* out) {
    __shared__ uint32_t h[256];
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = t; i < n; i += T) {
        uint32_t x;
        if (V == 0) x = data[i];
        else if (V == 1) x = hand_read<uint32_t, 0>(data, words, i, 0, n);
        else if (V == 2) x = hand_read<uint32_t, 1>(data, words, i, i + T, n);
        else if (V == 3) x = hand_read<uint32_t, 2>(data, words, i, i + T, n);
        else if (V == 4) x = hand_read<uint32_t, 1>(data, words, i, i + 2 * T, n);
        else x = hand_read<uint32_t, 3>(data, words, i, i + T, n);
        atomicAdd(&h[x & 255u], 1u);
    }
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(h[b]));
}

__global__ void __launch_bounds__(256, 8) lib_hist(bam::array<uint32_t> a, unsigned long long* out) {
    hist_body(a, a.size(), out);
}
__global__ void __launch_bounds__(256, 8) pf_hist(bam::array<uint32_t> a, unsigned long long* out) {
    const pf_array<uint32_t> p{a, 0, 0};
    hist_body(p, a.size(), out);
}

// rmw: V 0 plain, 1 hand (protocol read, the lowest lane pins for the store), 2 as 1 with
// each lane's next element prefetched; bam::array and the wrapper below.
template <int V>
__global__ void __launch_bounds__(256, 8) hand_rmw(uint64_t* data, unsigned long long* words, uint64_t n) {
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = t; i < n; i += T) {
        if (V == 0) {
            data[i] = data[i] * 3 + 1;
            continue;
        }
        const uint64_t x = V == 1 ? hand_read<uint64_t, 0>(data, words, i, 0, n)
                                  : hand_read<uint64_t, 1>(data, words, i, i + T, n);
        const uint64_t line = i >> 9, sub = i & 511;
        const uint64_t g = __cvta_generic_to_global(&words[line]);
        unsigned long long old = 0;
        if ((threadIdx.x & 31) == 0) old = bam::detail::word_pin(g, 1);
        old = __shfl_sync(0xffffffffu, old, 0);
        __syncwarp();
        data[((old >> 32) << 9) + sub] = x * 3 + 1;
        __syncwarp();
        if ((threadIdx.x & 31) == 0) bam::detail::word_unpin_release(g, 1);
    }
}
template <typename A>
__device__ __forceinline__ void rmw_body(const A& a, uint64_t n) {
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = t; i < n; i += T) a.store(i, a[i] * 3 + 1);
}
__global__ void __launch_bounds__(256, 8) lib_rmw(bam::array<uint64_t> a) { rmw_body(a, a.size()); }
__global__ void __launch_bounds__(256, 8) pf_rmw(bam::array<uint64_t> a) {
    const pf_array<uint64_t> p{a, 0, 0};
    rmw_body(p, a.size());
}
}  // namespace

int main() {
    const uint64_t bytes = 1ull << 30, n = bytes / 4, lines = bytes / 4096;
    uint32_t* data;
    unsigned long long *words, *out;
    cudaMalloc(&data, bytes);
    cudaMalloc(&words, lines * 8);
    cudaMalloc(&out, 256 * 8);
    cudaMemset(data, 1, bytes);
    unsigned long long* hw = new unsigned long long[lines];
    for (uint64_t l = 0; l < lines; ++l) hw[l] = (l << 32) | VALID;
    cudaMemcpy(words, hw, lines * 8, cudaMemcpyHostToDevice);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const int grid = sms * 8;
    bam_array_view v{};
    v.words = (uint64_t)words;
    v.n = n;
    v.data = (uint64_t)data;
    v.slot_shift = 12;
    v.line_bytes = 4096;
    v.elem_size = 4;
    v.epl = 1024;
    v.epl_shift = 10;
    v.nssd = 1;
    v.line_lbas = 8;
    const char* names[] = {"plain",
                           "hand: the protocol",
                           "hand: + each lane prefetches its next element",
                           "hand: + lowest lane prefetches the warp's next 128 B",
                           "hand: + each lane, two iterations ahead",
                           "hand: + line starter prefetches the next slot",
                           "bam::array",
                           "bam::array + stride-memo prefetch"};
    constexpr int NV = 8;
    double ms[NV] = {};
    auto launch = [&](int k) {
        switch (k) {
            case 0: hand_hist<0><<<grid, 256>>>(data, words, n, out); break;
            case 1: hand_hist<1><<<grid, 256>>>(data, words, n, out); break;
            case 2: hand_hist<2><<<grid, 256>>>(data, words, n, out); break;
            case 3: hand_hist<3><<<grid, 256>>>(data, words, n, out); break;
            case 4: hand_hist<4><<<grid, 256>>>(data, words, n, out); break;
            case 5: hand_hist<5><<<grid, 256>>>(data, words, n, out); break;
            case 6: lib_hist<<<grid, 256>>>(bam::array<uint32_t>{v}, out); break;
            case 7: pf_hist<<<grid, 256>>>(bam::array<uint32_t>{v}, out); break;
        }
    };
    const int rounds = 3, reps = 5;
    time_variants(NV, rounds, reps, launch, ms);
    printf("prefetch-hit probe on %d SMs, grid %d x 256, 1 GiB, 4 KiB lines, all valid\n", sms, grid);
    for (int k = 0; k < NV; ++k) printf("hist %-52s %8.3f ms  %.3f of plain\n", names[k], ms[k], ms[0] / ms[k]);
    bam_array_view v8 = v;
    v8.n = bytes / 8;
    v8.elem_size = 8;
    v8.epl = 512;
    v8.epl_shift = 9;
    uint64_t* d8 = reinterpret_cast<uint64_t*>(data);
    const char* rnames[] = {"plain", "hand: protocol read, warp-pinned store", "hand: + each lane prefetches its next element",
                            "bam::array", "bam::array + stride-memo prefetch"};
    double rms[5] = {};
    auto rlaunch = [&](int k) {
        switch (k) {
            case 0: hand_rmw<0><<<grid, 256>>>(d8, words, v8.n); break;
            case 1: hand_rmw<1><<<grid, 256>>>(d8, words, v8.n); break;
            case 2: hand_rmw<2><<<grid, 256>>>(d8, words, v8.n); break;
            case 3: lib_rmw<<<grid, 256>>>(bam::array<uint64_t>{v8}); break;
            case 4: pf_rmw<<<grid, 256>>>(bam::array<uint64_t>{v8}); break;
        }
    };
    time_variants(5, rounds, reps, rlaunch, rms);
    for (int k = 0; k < 5; ++k) printf("rmw  %-52s %8.3f ms  %.3f of plain\n", rnames[k], rms[k], rms[0] / rms[k]);
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
