// Micro-probe: where a streaming ported kernel's all-hits time goes. The suite's histogram
// shape (4-byte elements, a grid-stride loop, a 256-bin shared-memory histogram; blocks of
// 256 threads, __launch_bounds__(256, 6) as the suite) over 1 GiB with 4 KiB lines, every
// line valid in slot = line. Variants: the plain kernel, bam::array<uint32_t> (with and
// without statistics), and hand-written forms of the read protocol (which of its steps
// cost what). Prints ms and the ratio to plain per variant, three alternating rounds.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I crates/bam/cuda/include -o stream-hit-probe benches/probe/stream_hit_probe.cu
#include <cstdint>
#include <cstdio>
#include <cuda/atomic>

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
__device__ __forceinline__ uint32_t ld_rlx32(const void* p) {
    uint32_t x;
    asm volatile("ld.global.relaxed.gpu.b32 %0, [%1];" : "=r"(x) : "l"(__cvta_generic_to_global(p)) : "memory");
    return x;
}

// V: 0 plain, 1 acq w1 + acq data + rlx w2 (the library's protocol, by hand),
// 2 rlx w1 + acq data + rlx w2, 3 acq w1 + data (no w2: two loads), 4 acq w1 + rlx data + rlx w2
// (unordered: not a valid protocol, shows what the data acquire costs), 5 only w1 + data relaxed,
// 6 the protocol with w1 read ahead: each iteration loads (relaxed) the word of the line the
// next grid-stride iteration will be in, and that iteration uses it as its w1 (acq data, w2),
// 7 as 6 with a relaxed data load (unordered: the ceiling of 6), 8 as 6 with a fence before
// the data load (the read-ahead w1 and the fence make an acquire pattern), 9 as 8 with a
// relaxed data load and a second fence before w2 (a fence-only seqlock), 10 a warp-pinned
// read (the lowest lane pins the line for the warp with an acquiring atomic, the lanes read,
// the lowest lane unpins with a releasing RED: two dependent steps, formally ordered)
template <int V>
__global__ void __launch_bounds__(256, 6)
    hand(const uint32_t* data, const unsigned long long* words, uint64_t n, unsigned long long* out) {
    __shared__ uint32_t h[256];
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long ahead_w = 0;
    uint64_t ahead_line = ~0ull;
    for (uint64_t i = t; i < n; i += T) {
        uint32_t x = 0;
        if (V == 0) {
            x = data[i];
        } else if (V == 10) {
            // Every lane of the warp is in one line here (32 consecutive u32 of a 4 KiB line).
            const uint64_t line = i >> 10, sub = i & 1023;
            const uint64_t g = __cvta_generic_to_global(&words[line]);
            const bool lead = (threadIdx.x & 31) == 0;
            unsigned long long old = 0;
            if (lead) old = bam::detail::word_pin(g, 1);
            old = bam::shfl_u64(0xffffffffu, old, 0);
            __syncwarp();  // the lead's acquire happens-before every lane's read
            if ((old & (VALID | BUSY)) == VALID) x = data[((old >> 32) << 10) + sub];
            __syncwarp();  // every lane's read happens-before the lead's release
            if (lead) {
                if ((old & (VALID | BUSY)) == VALID) bam::detail::word_unpin_release(g, 1);
                else bam::detail::word_unpin_relaxed(g, 1);
            }
        } else {
            const uint64_t line = i >> 10, sub = i & 1023;
            unsigned long long w1;
            if (V >= 6) {
                w1 = line == ahead_line ? ahead_w : ld_acq(&words[line]);
                if (V >= 8) asm volatile("fence.acq_rel.gpu;" ::: "memory");
                ahead_line = (i + T) >> 10;
                if (i + T < n) ahead_w = ld_rlx(&words[ahead_line]);
            } else {
                w1 = V == 2 ? ld_rlx(&words[line]) : ld_acq(&words[line]);
            }
            if ((w1 & (VALID | BUSY)) == VALID) {
                const uint32_t* p = &data[((w1 >> 32) << 10) + sub];
                if (V == 3) {
                    x = ld_acq32(p);
                } else if (V == 5) {
                    x = ld_rlx32(p);
                } else {
                    x = V == 4 || V == 7 || V == 9 ? ld_rlx32(p) : ld_acq32(p);
                    if (V == 9) asm volatile("fence.acq_rel.gpu;" ::: "memory");
                    const unsigned long long w2 = ld_rlx(&words[line]);
                    if (w1 != w2) x = 0;
                }
            }
        }
        atomicAdd(&h[x & 255u], 1u);
    }
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(h[b]));
}

/// B: the blocks per SM the launch bounds ask for (6 as the suite; 8 caps registers at 32).
template <int B = 6>
__global__ void __launch_bounds__(256, B) lib(bam::array<uint32_t> a, unsigned long long* out) {
    __shared__ uint32_t h[256];
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = t; i < a.size(); i += T) atomicAdd(&h[a[i] & 255u], 1u);
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(h[b]));
}
/// The suite's rmw shape (u64, a[i] = a[i] * 3 + 1) over the same lines (512 elements each).
/// V: 0 plain, 1 lib, 2 hand (protocol read, then the lowest lane pins for the warp,
/// stores, release RED), 3 as 2 with w1 read ahead (as hand<6>), 4 a warp-pinned read (as
/// hand<10>) and then the same warp-pinned store as 2 (two pins, as a[i] and store would).
template <int V, int B = 6>
__global__ void __launch_bounds__(256, B) rmw(uint64_t* data, unsigned long long* words, bam::array<uint64_t> a) {
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t n = a.size();
    unsigned long long ahead_w = 0;
    uint64_t ahead_line = ~0ull;
    for (uint64_t i = t; i < n; i += T) {
        if (V == 0) {
            data[i] = data[i] * 3 + 1;
        } else if (V == 1) {
            a.store(i, a[i] * 3 + 1);
        } else {
            const uint64_t line = i >> 9, sub = i & 511;
            uint64_t x = 0;
            if (V == 4) {
                const uint64_t g = __cvta_generic_to_global(&words[line]);
                const bool lead = (threadIdx.x & 31) == 0;
                unsigned long long o = 0;
                if (lead) o = bam::detail::word_pin(g, 1);
                o = bam::shfl_u64(0xffffffffu, o, 0);
                __syncwarp();
                if ((o & (VALID | BUSY)) == VALID) x = data[((o >> 32) << 9) + sub];
                __syncwarp();
                if (lead) bam::detail::word_unpin_release(g, 1);
            } else {
                unsigned long long w1;
                if (V == 3) {
                    w1 = line == ahead_line ? ahead_w : ld_acq(&words[line]);
                    ahead_line = (i + T) >> 9;
                    if (i + T < n) ahead_w = ld_rlx(&words[ahead_line]);
                } else {
                    w1 = ld_acq(&words[line]);
                }
                if ((w1 & (VALID | BUSY)) == VALID) {
                    uint64_t* p = &data[((w1 >> 32) << 9) + sub];
                    unsigned long long y;
                    asm volatile("ld.global.acquire.gpu.b64 %0, [%1];" : "=l"(y) : "l"(__cvta_generic_to_global(p)) : "memory");
                    if (ld_rlx(&words[line]) == w1) x = y;
                }
            }
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
}
}  // namespace

int main() {
    const uint64_t bytes = 1ull << 30, n = bytes / 4, lines = bytes / 4096;
    uint32_t* data;
    unsigned long long *words, *stats, *out;
    cudaMalloc(&data, bytes);
    cudaMalloc(&words, lines * 8);
    cudaMalloc(&stats, 1 << 20);
    cudaMalloc(&out, 256 * 8);
    cudaMemset(data, 1, bytes);
    cudaMemset(stats, 0, 1 << 20);
    unsigned long long* hw = new unsigned long long[lines];
    for (uint64_t l = 0; l < lines; ++l) hw[l] = (l << 32) | VALID;
    cudaMemcpy(words, hw, lines * 8, cudaMemcpyHostToDevice);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const int grid = sms * 6;
    bam_array_view v{};
    v.words = (uint64_t)words;
    v.n = n;
    v.data = (uint64_t)data;
    v.slot_shift = 12;
    v.line_bytes = 4096;
    v.elem_size = 4;
    v.id = 0;
    v.epl = 1024;
    v.epl_shift = 10;
    v.nssd = 1;
    v.line_lbas = 8;
    bam_array_view vs = v;
    vs.stats = (uint64_t)stats;
    const char* names[] = {"plain",
                           "hand: acq w1, acq data, w2 (the protocol)",
                           "hand: relaxed w1, acq data, w2",
                           "hand: acq w1, acq data, no w2",
                           "hand: acq w1, relaxed data, w2",
                           "hand: acq w1, relaxed data, no w2",
                           "lib a[i], statistics",
                           "lib a[i], no statistics",
                           "hand: w1 read ahead, acq data, w2",
                           "hand: w1 read ahead, relaxed data, w2",
                           "hand: w1 read ahead, fence, acq data, w2",
                           "hand: w1 read ahead, fence, data, fence, w2",
                           "8 blocks/SM: plain",
                           "8 blocks/SM: hand protocol",
                           "8 blocks/SM: lib, bounds (256, 8), no stats",
                           "8 blocks/SM: lib, bounds (256, 8), stats",
                           "hand: warp-pinned read",
                           "8 blocks/SM: hand: warp-pinned read"};
    constexpr int NV = 18;
    const int grid8 = sms * 8;
    double ms_sum[NV] = {};
    auto launch = [&](int k) {
        switch (k) {
            case 0: hand<0><<<grid, 256>>>(data, words, n, out); break;
            case 1: hand<1><<<grid, 256>>>(data, words, n, out); break;
            case 2: hand<2><<<grid, 256>>>(data, words, n, out); break;
            case 3: hand<3><<<grid, 256>>>(data, words, n, out); break;
            case 4: hand<4><<<grid, 256>>>(data, words, n, out); break;
            case 5: hand<5><<<grid, 256>>>(data, words, n, out); break;
            case 6: lib<<<grid, 256>>>(bam::array<uint32_t>{vs}, out); break;
            case 7: lib<<<grid, 256>>>(bam::array<uint32_t>{v}, out); break;
            case 8: hand<6><<<grid, 256>>>(data, words, n, out); break;
            case 9: hand<7><<<grid, 256>>>(data, words, n, out); break;
            case 10: hand<8><<<grid, 256>>>(data, words, n, out); break;
            case 11: hand<9><<<grid, 256>>>(data, words, n, out); break;
            case 12: hand<0><<<grid8, 256>>>(data, words, n, out); break;
            case 13: hand<1><<<grid8, 256>>>(data, words, n, out); break;
            case 14: lib<8><<<grid8, 256>>>(bam::array<uint32_t>{v}, out); break;
            case 15: lib<8><<<grid8, 256>>>(bam::array<uint32_t>{vs}, out); break;
            case 16: hand<10><<<grid, 256>>>(data, words, n, out); break;
            case 17: hand<10><<<grid8, 256>>>(data, words, n, out); break;
        }
    };
    const int rounds = 3, reps = 5;
    time_variants(NV, rounds, reps, launch, ms_sum);
    printf("stream-hit probe on %d SMs, grid %d x 256, 1 GiB of u32, 4 KiB lines, all valid\n", sms, grid);
    for (int k = 0; k < NV; ++k)
        printf("%-44s %8.3f ms  %.3f of plain\n", names[k], ms_sum[k], ms_sum[0] / ms_sum[k]);
    // rmw: u64 over the same GiB (the words say slot = line, 512 elements a line).
    bam_array_view v8 = vs;
    v8.n = bytes / 8;
    v8.elem_size = 8;
    v8.epl = 512;
    v8.epl_shift = 9;
    bam_array_view v8n = v8;
    v8n.stats = 0;
    uint64_t* d8 = reinterpret_cast<uint64_t*>(data);
    const char* rnames[] = {"rmw plain", "rmw lib, statistics", "rmw lib, no statistics", "rmw hand (protocol read, warp pin store)",
                            "rmw hand, w1 read ahead",
                            "rmw 8 blocks/SM: plain",
                            "rmw 8 blocks/SM: lib, bounds (256, 8), no stats",
                            "rmw hand, warp-pinned read"};
    double rms[8] = {};
    auto rlaunch = [&](int k) {
        switch (k) {
            case 0: rmw<0><<<grid, 256>>>(d8, words, bam::array<uint64_t>{v8}); break;
            case 1: rmw<1><<<grid, 256>>>(d8, words, bam::array<uint64_t>{v8}); break;
            case 2: rmw<1><<<grid, 256>>>(d8, words, bam::array<uint64_t>{v8n}); break;
            case 3: rmw<2><<<grid, 256>>>(d8, words, bam::array<uint64_t>{v8}); break;
            case 4: rmw<3><<<grid, 256>>>(d8, words, bam::array<uint64_t>{v8}); break;
            case 5: rmw<0><<<grid8, 256>>>(d8, words, bam::array<uint64_t>{v8}); break;
            case 6: rmw<1, 8><<<grid8, 256>>>(d8, words, bam::array<uint64_t>{v8n}); break;
            case 7: rmw<4><<<grid, 256>>>(d8, words, bam::array<uint64_t>{v8}); break;
        }
    };
    time_variants(8, rounds, reps, rlaunch, rms);
    for (int k = 0; k < 8; ++k) printf("%-44s %8.3f ms  %.3f of plain\n", rnames[k], rms[k], rms[0] / rms[k]);
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
