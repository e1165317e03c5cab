// Micro-probe: what an embedding-bag port loses when each 4-byte read is checked, even with
// every line resident (one plain load an element). Embedding bags as the kernel suite's
// (256 Ki bags, each the sum of 32 random 512-byte rows of a 1 GiB f32 table, a warp per
// bag, lane l adds columns l, l + 32, l + 64, l + 96), in these forms:
//   0 plain          the loop as written; nvcc keeps the 16 loads of 4 rows in flight
//   1 plain-serial   the same with `#pragma unroll 1` on both loops
//   2 checked        each read: the index tested against the length, the load from a
//                    clamped index, a __noinline__ logger on failure (what any checked
//                    read that logs bad indices does)
//   3 checked-asm    2 with the logger's stores in inline asm without a memory clobber, so
//                    that the compiler sees no memory effect on the failure path
//   4 bam::array     bam::array<float>::operator[] over a resident view in one run of slots
//                    (BAM_VIEW_F_RESIDENT | BAM_VIEW_F_CONTIGUOUS: Array::view's default
//                    for an array that fits)
//   5 plain-float4   the table read as float4, lane l adding columns 4l..4l+3: one 16-byte
//                    load a lane a row (the sums differ from 0's by float rounding order
//                    within a lane, so 5 and 6 are compared with each other)
//   6 bam::float4    5 over bam::array<float4>, the same resident view with 16-byte
//                    elements: a quarter of the accesses
// Prints ms per launch and each form's ratio to `plain`; every form's sums must match.
// Build: nvcc -O3 -arch=sm_90 -std=c++17 -I crates/bam/cuda/include (benches/baselines/
// ported-kernels/run7.sh).
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bam/array.cuh"
#include "probe_timing.h"

#define CK(x)                                                                         \
    do {                                                                              \
        cudaError_t e_ = (x);                                                         \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            return 2;                                                                 \
        }                                                                             \
    } while (0)

constexpr uint32_t DIM = 128, PER_BAG = 32;

struct checked {
    const float* base;
    uint64_t n;
    unsigned long long* log;
};

__device__ __noinline__ void log_bad(unsigned long long* log, uint64_t i) {
    if (atomicAdd(log, 1ull) == 0) log[1] = i;
}

template <int V>
__device__ __forceinline__ float read_checked(const checked& c, uint64_t i) {
    const bool ok = i < c.n;
    const float x = c.base[ok ? i : 0];
    if (__builtin_expect(!ok, 0)) {
        if (V == 2) {
            log_bad(c.log, i);
        } else {
            asm volatile("red.global.add.u64 [%0], 1;" ::"l"(c.log));
            asm volatile("st.global.u64 [%0], %1;" ::"l"(c.log + 1), "l"(i));
        }
        return 0.f;
    }
    return x;
}

/// Forms 5 and 6: lane l sums columns 4l .. 4l + 3 of each row as one float4.
template <int V>
__global__ void __launch_bounds__(256, 6)
    embag4(const float4* table, bam::array<float4> a, const uint32_t* idx, float* out, uint64_t nb) {
    const uint64_t warp = (blockIdx.x * uint64_t(blockDim.x) + threadIdx.x) / 32;
    const uint64_t nwarps = uint64_t(gridDim.x) * blockDim.x / 32;
    const uint32_t lane = threadIdx.x & 31;
    for (uint64_t b = warp; b < nb; b += nwarps) {
        float4 acc = {0.f, 0.f, 0.f, 0.f};
        for (uint32_t j = 0; j < PER_BAG; ++j) {
            const uint64_t e = uint64_t(idx[b * PER_BAG + j]) * (DIM / 4) + lane;
            const float4 x = V == 5 ? table[e] : a[e];
            acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
        }
        reinterpret_cast<float4*>(out)[b * (DIM / 4) + lane] = acc;
    }
}

template <int V>
__global__ void __launch_bounds__(256, 6)
    embag(const float* table, checked c, bam::array<float> a, const uint32_t* idx, float* out, uint64_t nb) {
    const uint64_t warp = (blockIdx.x * uint64_t(blockDim.x) + threadIdx.x) / 32;
    const uint64_t nwarps = uint64_t(gridDim.x) * blockDim.x / 32;
    const uint32_t lane = threadIdx.x & 31;
    for (uint64_t b = warp; b < nb; b += nwarps) {
        float acc[DIM / 32] = {};
        if (V == 1) {
#pragma unroll 1
            for (uint32_t j = 0; j < PER_BAG; ++j) {
                const uint64_t row = idx[b * PER_BAG + j];
#pragma unroll 1
                for (uint32_t k = 0; k < DIM / 32; ++k) acc[k] += table[row * DIM + k * 32 + lane];
            }
        } else {
            for (uint32_t j = 0; j < PER_BAG; ++j) {
                const uint64_t row = idx[b * PER_BAG + j];
#pragma unroll
                for (uint32_t k = 0; k < DIM / 32; ++k) {
                    const uint64_t e = row * DIM + k * 32 + lane;
                    if (V == 0) acc[k] += table[e];
                    if (V == 2 || V == 3) acc[k] += read_checked<V>(c, e);
                    if (V == 4) acc[k] += a[e];
                }
            }
        }
#pragma unroll
        for (uint32_t k = 0; k < DIM / 32; ++k) out[b * DIM + k * 32 + lane] = acc[k];
    }
}

int main() {
    const uint64_t rows = 2ull << 20, n = rows * DIM, nb = 256ull << 10;
    float *d_table, *d_out;
    uint32_t* d_idx;
    unsigned long long* d_log;
    CK(cudaMalloc(&d_table, n * 4));
    CK(cudaMalloc(&d_out, nb * DIM * 4));
    CK(cudaMalloc(&d_idx, nb * PER_BAG * 4));
    CK(cudaMalloc(&d_log, 16));
    CK(cudaMemset(d_log, 0, 16));
    std::vector<float> table(n);
    for (uint64_t i = 0; i < n; ++i) table[i] = float((i * 2654435761ull >> 7) % 1000) / 1000.f;
    std::vector<uint32_t> idx(nb * PER_BAG);
    uint64_t x = 88172645463325252ull;
    for (auto& r : idx) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        r = uint32_t(x % rows);
    }
    CK(cudaMemcpy(d_table, table.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    // A resident view in one run of slots: element i at ((float*)slots)[i]; cache and words
    // are never read (every index is in range, nothing counted).
    bam_array_view v{};
    v.n = n;
    v.line_bytes = 4096;
    v.elem_size = 4;
    v.epl = 1024;
    v.epl_shift = 10;
    v.slot_shift = 12;
    v.data = reinterpret_cast<uint64_t>(d_table);
    v.slots = reinterpret_cast<uint64_t>(d_table);
    v.flags = BAM_VIEW_F_RESIDENT | BAM_VIEW_F_CONTIGUOUS;
    const bam::array<float> a{v};
    bam_array_view v4 = v;
    v4.n = n / 4;
    v4.elem_size = 16;
    v4.epl = 256;
    v4.epl_shift = 8;
    const bam::array<float4> a4{v4};
    const checked c{d_table, n, d_log};
    constexpr int NV = 7;
    const char* names[NV] = {"plain", "plain-serial", "checked", "checked-asm", "bam::array", "plain-float4", "bam::float4"};
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    const unsigned blocks = p.multiProcessorCount * 6;
    auto launch = [&](int k) {
        switch (k) {
            case 0: embag<0><<<blocks, 256>>>(d_table, c, a, d_idx, d_out, nb); break;
            case 1: embag<1><<<blocks, 256>>>(d_table, c, a, d_idx, d_out, nb); break;
            case 2: embag<2><<<blocks, 256>>>(d_table, c, a, d_idx, d_out, nb); break;
            case 3: embag<3><<<blocks, 256>>>(d_table, c, a, d_idx, d_out, nb); break;
            case 4: embag<4><<<blocks, 256>>>(d_table, c, a, d_idx, d_out, nb); break;
            case 5: embag4<5><<<blocks, 256>>>(reinterpret_cast<const float4*>(d_table), a4, d_idx, d_out, nb); break;
            default: embag4<6><<<blocks, 256>>>(reinterpret_cast<const float4*>(d_table), a4, d_idx, d_out, nb); break;
        }
    };
    double sums[NV];
    std::vector<float> out(nb * DIM);
    for (int k = 0; k < NV; ++k) {
        CK(cudaMemset(d_out, 0, nb * DIM * 4));
        launch(k);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost));
        double s = 0;
        for (float y : out) s += y;
        sums[k] = s;
    }
    unsigned long long logged = 0;
    CK(cudaMemcpy(&logged, d_log, 8, cudaMemcpyDeviceToHost));
    double ms[NV] = {};
    time_variants(NV, 5, 10, launch, ms);
    CK(cudaDeviceSynchronize());
    printf("embedding-bag probe on %s: %llu bags of %u rows of %u f32 (table %llu MiB), %u blocks of 256\n", p.name,
           (unsigned long long)nb, PER_BAG, DIM, (unsigned long long)(n * 4 >> 20), blocks);
    int wrong = logged != 0;
    for (int k = 0; k < NV; ++k) {
        const bool same = sums[k] == sums[k < 5 ? 0 : 5];
        wrong += !same;
        printf("%-13s %8.3f ms  %.3f x plain  checksum %.6e%s\n", names[k], ms[k], ms[0] / ms[k], sums[k],
               same ? "" : "  MISMATCH");
    }
    printf("%s\n", wrong ? "FAIL" : "ok: every form summed the same, nothing logged");
    return wrong ? 1 : 0;
}
