// Micro-probe: where a thread-per-vertex PageRank pull loses its speed when every access
// goes through a cache hit protocol. One pull (rank'[v] = sum of contrib[col[j]] over v's
// row) over a CSR graph in GPU memory, 8 Mi vertices, 16 edges a vertex on average
// (degrees uniform, then power-law as the kernel suite's: a warp then waits for its
// longest row, run by one lane), in these forms (all data valid, slot = line, 4 KiB lines, as the suite's all-hits runs):
//   0 plain          the loop as written; nvcc unrolls it and keeps many loads in flight
//   1 plain-serial   the same with `#pragma unroll 1`
//   2 seqlock        each access (col, then contrib) reads its line word (acquire), the
//                    element, the word again (relaxed), as the unpinned hit path does
//   3 seqlock-vote   2 plus a warp vote of the calling lanes after each access, as the
//                    library's lean read has (`__ballot_sync(__activemask(), !hit)`)
//   4 relaxed        2 with the first word load relaxed (not a correct protocol: the
//                    price of the acquire alone)
//   5 ordered        2 with the element loaded with acquire too, so that the second word
//                    load comes after it (what a correct sequence lock needs)
//   6 library        bam::cache_read_unpinned itself (asm volatile loads: acquire word,
//                    acquire element, relaxed word; the globaltimer window check)
//   7 bam::array     bam::array<T>::operator[] over views of the same words and data (the
//                    lean read: range test, cache_read_unpinned, a vote of the calling lanes)
// Prints ms per pull and each form's ratio to `plain`; every form's checksum must match.
// Build: nvcc -O3 -arch=sm_90 -std=c++17 -I crates/bam/cuda/include (see scripts/gpu-run.sh).
#include <cuda/atomic>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bam/array.cuh"
#include "probe_timing.h"

using word_ref = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;
constexpr unsigned long long VALID = 0x80000000ull, BUSY = 0x40000000ull;
constexpr int LINE_SHIFT = 12;  // 4 KiB lines

__host__ __device__ inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/// A view of `slots` (line L in slot L) with line words `words`, as Array::view gives.
template <typename T>
bam_array_view view_of(const T* slots, unsigned long long* words, uint64_t n) {
    bam_array_view v{};
    v.words = reinterpret_cast<uint64_t>(words);
    v.n = n;
    v.data = reinterpret_cast<uint64_t>(slots);
    v.slot_shift = LINE_SHIFT;
    v.line_bytes = 1u << LINE_SHIFT;
    v.elem_size = sizeof(T);
    v.epl = (1u << LINE_SHIFT) / sizeof(T);
    v.epl_shift = __builtin_ctz(v.epl);
    return v;  // flags 0: an ordinary view that counts nothing (the lean read)
}

/// One element through the hit protocol: the line word, the element from the slot the word
/// names, the word again. `V`: 2 seqlock, 3 seqlock + vote, 4 relaxed first load, 5 the
/// element acquired, 6 the library's cache_read_unpinned.
template <int V, typename T>
__device__ __forceinline__ T hit_read(const T* slots, unsigned long long* words, uint64_t i, bool& ok,
                                      const bam_array_view& view) {
    constexpr uint64_t per_line = (1ull << LINE_SHIFT) / sizeof(T);
    const uint64_t line = i / per_line, sub = i % per_line;
    T x{};
    bool hit = false;
    if (V == 6) {
        hit = bam::cache_read_unpinned(view, line, static_cast<uint32_t>(sub * sizeof(T)), x);
        ok = ok && hit;
        return x;
    }
    word_ref w(words[line]);
    const unsigned long long w1 =
        w.load(V == 4 ? cuda::memory_order_relaxed : cuda::memory_order_acquire);
    if ((w1 & (VALID | BUSY)) == VALID) {
        if (V == 5) {
            x = cuda::atomic_ref<T, cuda::thread_scope_device>(
                    const_cast<T&>(slots[(w1 >> 32) * per_line + sub]))
                    .load(cuda::memory_order_acquire);
        } else {
            x = slots[(w1 >> 32) * per_line + sub];
        }
        hit = w.load(cuda::memory_order_relaxed) == w1;
    }
    if (V == 3) {
        if (__ballot_sync(__activemask(), !hit) != 0) ok = false;
    }
    ok = ok && hit;
    return x;
}

template <int V>
__global__ void __launch_bounds__(256) pull(const uint64_t* rowptr, const uint32_t* col, const float* contrib,
                                            unsigned long long* col_words, unsigned long long* contrib_words,
                                            uint64_t n, float* out, unsigned long long* bad, bam_array_view col_view,
                                            bam_array_view contrib_view) {
    const uint64_t v = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (v >= n) return;
    float s = 0.f;
    bool ok = true;
    const uint64_t b = rowptr[v], e = rowptr[v + 1];
    if (V == 0) {
        for (uint64_t j = b; j < e; ++j) s += contrib[col[j]];
    } else if (V == 1) {
#pragma unroll 1
        for (uint64_t j = b; j < e; ++j) s += contrib[col[j]];
    } else if (V == 7) {
        const bam::array<uint32_t> c{col_view};
        const bam::array<float> r{contrib_view};
        for (uint64_t j = b; j < e; ++j) s += r[c[j]];
    } else {
        for (uint64_t j = b; j < e; ++j) {
            const uint32_t u = hit_read<V>(col, col_words, j, ok, col_view);
            s += hit_read<V>(contrib, contrib_words, u, ok, contrib_view);
        }
    }
    out[v] = s;
    if (!ok) atomicAdd(bad, 1ull);
}

__global__ void fill_words(unsigned long long* words, uint64_t nlines) {
    for (uint64_t l = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; l < nlines; l += (uint64_t)gridDim.x * blockDim.x)
        words[l] = (l << 32) | VALID;  // slot = line, valid, nobody reading it in
}

__global__ void fill_col(uint32_t* col, uint64_t m, uint64_t n) {
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < m; j += (uint64_t)gridDim.x * blockDim.x)
        col[j] = static_cast<uint32_t>(mix(j + 1) % n);
}

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

/// Degree of vertex v: uniform 0..32, or power-law (Pareto, alpha 1.5, mean about 16,
/// capped at 1 Mi) as the kernel suite's in-degrees.
uint64_t degree(uint64_t v, bool power_law) {
    if (!power_law) return mix(v * 7 + 3) % 33;
    const double u = (static_cast<double>(mix(v * 7 + 3) >> 11) + 1.0) / 9007199254740992.0;  // (0, 1]
    const double d = (16.0 / 3.0) / std::pow(u, 1.0 / 1.5);
    return d > 1048576.0 ? 1048576 : static_cast<uint64_t>(d);
}

int run(bool power_law) {
    const uint64_t n = 8ull << 20;
    std::vector<uint64_t> rowptr(n + 1, 0);
    for (uint64_t v = 0; v < n; ++v) rowptr[v + 1] = rowptr[v] + degree(v, power_law);
    const uint64_t m = rowptr[n];
    std::vector<float> contrib(n);
    for (uint64_t v = 0; v < n; ++v) contrib[v] = static_cast<float>(mix(v) % 1000) / 1000.f;
    uint64_t* d_rowptr;
    uint32_t* d_col;
    float *d_contrib, *d_out;
    unsigned long long *d_cw, *d_kw, *d_bad;
    const uint64_t col_lines = (m * 4 + 4095) / 4096 + 1, contrib_lines = (n * 4 + 4095) / 4096 + 1;
    CK(cudaMalloc(&d_rowptr, (n + 1) * 8));
    CK(cudaMalloc(&d_col, m * 4));
    CK(cudaMalloc(&d_contrib, n * 4));
    CK(cudaMalloc(&d_out, n * 4));
    CK(cudaMalloc(&d_cw, col_lines * 8));
    CK(cudaMalloc(&d_kw, contrib_lines * 8));
    CK(cudaMalloc(&d_bad, 8));
    CK(cudaMemcpy(d_rowptr, rowptr.data(), (n + 1) * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_contrib, contrib.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, 8));
    fill_col<<<1024, 256>>>(d_col, m, n);
    fill_words<<<1024, 256>>>(d_cw, col_lines);
    fill_words<<<1024, 256>>>(d_kw, contrib_lines);
    CK(cudaDeviceSynchronize());
    constexpr int NV = 8;
    const char* names[NV] = {"plain",   "plain-serial", "seqlock", "seqlock-vote",
                             "relaxed", "ordered",      "library", "bam::array"};
    const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
    const bam_array_view cv = view_of(d_col, d_cw, m), kv = view_of(d_contrib, d_kw, n);
#define PULL(V) pull<V><<<blocks, 256>>>(d_rowptr, d_col, d_contrib, d_cw, d_kw, n, d_out, d_bad, cv, kv)
    auto launch = [&](int k) {
        switch (k) {
            case 0: PULL(0); break;
            case 1: PULL(1); break;
            case 2: PULL(2); break;
            case 3: PULL(3); break;
            case 4: PULL(4); break;
            case 5: PULL(5); break;
            case 6: PULL(6); break;
            default: PULL(7); break;
        }
    };
    // Checksums: each form's output, summed in double on the host.
    double sums[NV];
    std::vector<float> out(n);
    for (int k = 0; k < NV; ++k) {
        CK(cudaMemset(d_out, 0, n * 4));
        launch(k);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(out.data(), d_out, n * 4, cudaMemcpyDeviceToHost));
        double s = 0;
        for (float x : out) s += x;
        sums[k] = s;
    }
    unsigned long long bad = 0;
    CK(cudaMemcpy(&bad, d_bad, 8, cudaMemcpyDeviceToHost));
    double ms[NV] = {};
    time_variants(NV, 5, 10, launch, ms);
    CK(cudaDeviceSynchronize());
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("pagerank pull probe on %s: %llu vertices, %llu edges (%s degrees), 4 KiB lines, 256 threads a block\n",
           p.name, (unsigned long long)n, (unsigned long long)m, power_law ? "power-law" : "uniform 0..32");
    int wrong = bad != 0;
    for (int k = 0; k < NV; ++k) {
        const bool same = sums[k] == sums[0];
        wrong += !same;
        printf("%-13s %8.3f ms  %.3f x plain  checksum %.6e%s\n", names[k], ms[k], ms[0] / ms[k], sums[k],
               same ? "" : "  MISMATCH");
    }
    printf("%s\n", wrong ? "FAIL" : "ok: every form summed the same, no failed hit");
    cudaFree(d_rowptr);
    cudaFree(d_col);
    cudaFree(d_contrib);
    cudaFree(d_out);
    cudaFree(d_cw);
    cudaFree(d_kw);
    cudaFree(d_bad);
    return wrong ? 1 : 0;
}

int main() {
    const int uniform = run(false);
    return run(true) | uniform;
}
