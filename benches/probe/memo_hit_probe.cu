// Micro-probe: a read of bam::array that remembers, per thread, the line word of the line
// its next access will probably be in ("the memo"), loaded with acquire right after this
// access's element, in parallel with this access's second word load. An access whose line
// is the predicted one then needs two dependent loads (element, word) instead of three
// (word, element, word), and the protocol stays formally ordered: the memo's word is an
// acquire load program-ordered before the element load that uses its slot, and the
// element load is an acquire ordered before the second word load (the sequence check).
//
// Prediction: the next line is this line plus the last step (line - previous line), loaded
// only when the previous prediction was right (a constant stride, e.g. a grid-stride loop,
// or the same line again); random access never loads it.
//
// Shapes (1 GiB, 4 KiB lines, every line valid in slot = line): the suite's histogram (u32),
// its rmw (u64, a[i] = a[i] * 3 + 1) and a random gather (u64). Forms: plain, bam::array
// (the library's operator[]), memo (this prototype, the library's operator[] as its
// fallback), at 6 blocks of 256 per SM (__launch_bounds__(256, 6), as the suite) and 8.
//
// Outcome (H100; history: git show f700c74:benches/results/issue14-memo-probe/): slower than
// the library's three-load read in every form; why: git show f700c74:docs/performance.md,
// "Predicting the next line's word, formally". Kept as the record of what was tried.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I crates/bam/cuda/include -L <cu13>/lib -o memo-hit-probe benches/probe/memo_hit_probe.cu
#include <cstdint>
#include <cstdio>

#include "bam/array.cuh"
#include "probe_timing.h"
#include "bam/pattern.cuh"

namespace {
constexpr uint64_t VALID = BAM_LINE_VALID, BUSY = BAM_LINE_BUSY;

__device__ __forceinline__ unsigned long long ld_acq(uint64_t g) {
    unsigned long long x;
    asm volatile("ld.global.acquire.gpu.b64 %0, [%1];" : "=l"(x) : "l"(g) : "memory");
    return x;
}
__device__ __forceinline__ unsigned long long ld_rlx(uint64_t g) {
    unsigned long long x;
    asm volatile("ld.global.relaxed.gpu.b64 %0, [%1];" : "=l"(x) : "l"(g) : "memory");
    return x;
}

template <typename T>
struct memo_array {
    bam::array<T> a;
    mutable uint64_t last_line;  // line of the previous access
    mutable uint64_t pred_line;  // the line predicted for this access
    mutable unsigned long long pred_w;  // its word (acquired), 0 when not loaded

    __device__ __forceinline__ uint64_t size() const { return a.size(); }

    __device__ __forceinline__ T operator[](uint64_t i) const {
        using namespace bam::detail;
        const bam_array_view& v = a.v;
        uint32_t sub = 0;
        const uint64_t line = a.line_of(i, sub);
        const uint64_t words = __cvta_generic_to_global(reinterpret_cast<const unsigned long long*>(v.words));
        const uint64_t wp = words + line * 8;
        const bool predicted = line == pred_line;
        unsigned long long w1 = predicted ? pred_w : 0ull;
        if ((w1 & (VALID | BUSY)) != VALID) w1 = ld_acq(wp);
        const bool in_range = i < v.n;
        if (in_range && (w1 & (VALID | BUSY)) == VALID) {
            const T x = bam::detail::load_acquire(reinterpret_cast<const T*>(bam::detail::slot_ptr(v, w1 >> 32)) + sub);
            const unsigned long long w2 = ld_rlx(wp);
            const uint64_t next = line + (line - last_line);
            unsigned long long pw = 0;
            if (next == line) {
                pw = w1;  // acquired above; checked by w2 below
            } else if (predicted && next < bam::detail::lines_of(v)) {
                pw = ld_acq(words + next * 8);
            }
            if (((w1 ^ w2) & bam::detail::SEQ_BITS) == 0) {
                last_line = line;
                pred_line = next;
                pred_w = pw;
                return x;
            }
        }
        const T x = a[i];  // the library's path: misses, ranges, lines changing
        // Set after it: nothing of the memo lives across the general path but the line.
        last_line = line;
        pred_line = ~0ull;
        pred_w = 0;
        return x;
    }
};

// ---- histogram (u32) -----------------------------------------------------------------------
template <typename A>
__device__ __forceinline__ void hist_body(A a, uint64_t n, unsigned long long* out) {
    __shared__ uint32_t h[256];
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = t; i < n; i += T) atomicAdd(&h[a[i] & 255u], 1u);
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(h[b]));
}
template <typename A>
__global__ void __launch_bounds__(256, 6) hist6(A a, uint64_t n, unsigned long long* out) { hist_body(a, n, out); }
template <typename A>
__global__ void __launch_bounds__(256, 8) hist8(A a, uint64_t n, unsigned long long* out) { hist_body(a, n, out); }
template <typename A>
__global__ void __launch_bounds__(256, 5) hist5(A a, uint64_t n, unsigned long long* out) { hist_body(a, n, out); }

// The memo's protocol by hand (no general path: a failed check counts a zero), as the
// ceiling of the library form; V 0: the library's protocol (word, element, word), 1: memo.
template <int V, int B>
__global__ void __launch_bounds__(256, B) hand_hist(const uint32_t* data, const unsigned long long* words, uint64_t n,
                                                    unsigned long long* out) {
    __shared__ uint32_t h[256];
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t wg = __cvta_generic_to_global(words), lines = n >> 10;
    uint64_t last_line = 0, pred_line = ~0ull;
    unsigned long long pred_w = 0;
    for (uint64_t i = t; i < n; i += T) {
        const uint64_t line = i >> 10, sub = i & 1023;
        uint32_t x = 0;
        const bool predicted = V == 1 && line == pred_line;
        unsigned long long w1 = predicted ? pred_w : 0ull;
        if ((w1 & (VALID | BUSY)) != VALID) w1 = ld_acq(wg + line * 8);
        if ((w1 & (VALID | BUSY)) == VALID) {
            uint32_t y;
            asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(y) : "l"(__cvta_generic_to_global(&data[((w1 >> 32) << 10) + sub])) : "memory");
            const unsigned long long w2 = ld_rlx(wg + line * 8);
            if (V == 1) {
                const uint64_t next = line + (line - last_line);
                unsigned long long pw = 0;
                if (next == line) pw = w1;
                else if (predicted && next < lines) pw = ld_acq(wg + next * 8);
                last_line = line, pred_line = next, pred_w = pw;
            }
            if (((w1 ^ w2) & bam::detail::SEQ_BITS) == 0) x = y;
        }
        atomicAdd(&h[x & 255u], 1u);
    }
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(h[b]));
}

// ---- rmw (u64) -------------------------------------------------------------------------------
__device__ __forceinline__ void put(uint64_t* a, uint64_t i, uint64_t x) { a[i] = x; }
template <typename A>
__device__ __forceinline__ void put(const A& a, uint64_t i, uint64_t x) { a.a.store(i, x); }
__device__ __forceinline__ void put(const bam::array<uint64_t>& a, uint64_t i, uint64_t x) { a.store(i, x); }
template <typename A>
__device__ __forceinline__ void rmw_body(A a, uint64_t n) {
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = t; i < n; i += T) put(a, i, a[i] * 3 + 1);
}
template <typename A>
__global__ void __launch_bounds__(256, 6) rmw6(A a, uint64_t n) { rmw_body(a, n); }
template <typename A>
__global__ void __launch_bounds__(256, 8) rmw8(A a, uint64_t n) { rmw_body(a, n); }
template <typename A>
__global__ void __launch_bounds__(256, 5) rmw5(A a, uint64_t n) { rmw_body(a, n); }

// ---- random gather (u64) -----------------------------------------------------------------------
template <typename A>
__device__ __forceinline__ void gather_body(A a, uint64_t n, uint64_t count, unsigned long long* out) {
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    uint64_t sum = 0;
    for (uint64_t k = t; k < count; k += T) sum += a[bam::mix64(k ^ 0x5eed) % n];
    atomicAdd(out, static_cast<unsigned long long>(sum));
}
template <typename A>
__global__ void __launch_bounds__(256, 6) gather6(A a, uint64_t n, uint64_t count, unsigned long long* out) {
    gather_body(a, n, count, out);
}


template <typename T>
memo_array<T> memo_of(const bam_array_view& v) {
    return memo_array<T>{bam::array<T>{v}, 0, ~0ull, 0};
}
}  // namespace

int main() {
    const uint64_t bytes = 1ull << 30, lines = bytes / 4096;
    void* data;
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
    const int g5 = sms * 5, g6 = sms * 6, g8 = sms * 8;
    bam_array_view v{};
    v.words = (uint64_t)words;
    v.data = (uint64_t)data;
    v.slot_shift = 12;
    v.line_bytes = 4096;
    v.nssd = 1;
    v.line_lbas = 8;
    bam_array_view v4 = v, v8 = v;
    v4.n = bytes / 4, v4.elem_size = 4, v4.epl = 1024, v4.epl_shift = 10;
    v8.n = bytes / 8, v8.elem_size = 8, v8.epl = 512, v8.epl_shift = 9;
    const uint64_t n4 = v4.n, n8 = v8.n, count = 1ull << 27;
    const uint32_t* p4 = static_cast<const uint32_t*>(data);
    uint64_t* p8 = static_cast<uint64_t*>(data);
    const int rounds = 3, reps = 5;

    const char* hn[] = {"hist plain, 8 blocks", "hist plain, 6 blocks", "hist lib a[i], 6", "hist memo, 6",
                        "hist lib a[i], bounds (256, 8)", "hist memo, bounds (256, 8)",
                        "hist hand protocol, 6", "hist hand memo, 6", "hist hand protocol, 8", "hist hand memo, 8",
                        "hist lib a[i], bounds (256, 5)"};
    double hms[11] = {};
    const unsigned long long* wc = words;
    time_variants(11, rounds, reps, [&](int k) {
        switch (k) {
            case 0: hist8<<<g8, 256>>>(p4, n4, out); break;
            case 1: hist6<<<g6, 256>>>(p4, n4, out); break;
            case 2: hist6<<<g6, 256>>>(bam::array<uint32_t>{v4}, n4, out); break;
            case 3: hist6<<<g6, 256>>>(memo_of<uint32_t>(v4), n4, out); break;
            case 4: hist8<<<g8, 256>>>(bam::array<uint32_t>{v4}, n4, out); break;
            case 5: hist8<<<g8, 256>>>(memo_of<uint32_t>(v4), n4, out); break;
            case 6: hand_hist<0, 6><<<g6, 256>>>(p4, wc, n4, out); break;
            case 7: hand_hist<1, 6><<<g6, 256>>>(p4, wc, n4, out); break;
            case 8: hand_hist<0, 8><<<g8, 256>>>(p4, wc, n4, out); break;
            case 9: hand_hist<1, 8><<<g8, 256>>>(p4, wc, n4, out); break;
            case 10: hist5<<<g5, 256>>>(bam::array<uint32_t>{v4}, n4, out); break;
        }
    }, hms);
    printf("memo-hit probe on %d SMs, 1 GiB, 4 KiB lines, every line valid\n", sms);
    for (int k = 0; k < 11; ++k) printf("%-40s %8.3f ms  %.3f of plain at 8 blocks\n", hn[k], hms[k], hms[0] / hms[k]);

    const char* rn[] = {"rmw plain, 8 blocks", "rmw plain, 6 blocks", "rmw lib, 6", "rmw memo read, 6",
                        "rmw lib, bounds (256, 8)", "rmw memo read, bounds (256, 8)", "rmw lib, bounds (256, 5)"};
    double rms[7] = {};
    time_variants(7, rounds, reps, [&](int k) {
        switch (k) {
            case 0: rmw8<<<g8, 256>>>(p8, n8); break;
            case 1: rmw6<<<g6, 256>>>(p8, n8); break;
            case 2: rmw6<<<g6, 256>>>(bam::array<uint64_t>{v8}, n8); break;
            case 3: rmw6<<<g6, 256>>>(memo_of<uint64_t>(v8), n8); break;
            case 4: rmw8<<<g8, 256>>>(bam::array<uint64_t>{v8}, n8); break;
            case 5: rmw8<<<g8, 256>>>(memo_of<uint64_t>(v8), n8); break;
            case 6: rmw5<<<g5, 256>>>(bam::array<uint64_t>{v8}, n8); break;
        }
    }, rms);
    for (int k = 0; k < 7; ++k) printf("%-40s %8.3f ms  %.3f of plain at 8 blocks\n", rn[k], rms[k], rms[0] / rms[k]);

    const char* gn[] = {"gather plain, 6", "gather lib a[i], 6", "gather memo, 6"};
    double gms[3] = {};
    time_variants(3, rounds, reps, [&](int k) {
        switch (k) {
            case 0: gather6<<<g6, 256>>>(static_cast<const uint64_t*>(data), n8, count, out); break;
            case 1: gather6<<<g6, 256>>>(bam::array<uint64_t>{v8}, n8, count, out); break;
            case 2: gather6<<<g6, 256>>>(memo_of<uint64_t>(v8), n8, count, out); break;
        }
    }, gms);
    for (int k = 0; k < 3; ++k) printf("%-40s %8.3f ms  %.3f of plain\n", gn[k], gms[k], gms[0] / gms[k]);
    printf("err: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
