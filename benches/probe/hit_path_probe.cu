// Micro-probe: cost of the pieces of an unpinned cache hit (linear pattern, 8-byte elements,
// 4 KiB lines, every line valid in slot = line). Prints GB/s per variant.
#include <cstdio>
#include <cstdint>
#include <cuda/atomic>
#include "bam/array.cuh"
using word_ref = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;
constexpr uint64_t VALID = 0x80000000ull, BUSY = 0x40000000ull;

template <int V>
__global__ void __launch_bounds__(256) k(const uint64_t* data, unsigned long long* words, uint64_t n, int reps,
                                         unsigned long long* stats, unsigned long long* out) {
    uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    uint64_t acc = 0;
    for (int r = 0; r < reps; ++r)
        for (uint64_t i = t; i < n; i += T) {
            uint64_t line = i >> 9, sub = i & 511;
            word_ref w(words[line]);
            if (V == 0) {  // plain
                acc += data[i];
            } else if (V == 1) {  // acquire, data, fence, W2
                unsigned long long w1 = w.load(cuda::memory_order_acquire);
                if ((w1 & (VALID | BUSY)) == VALID) {
                    uint64_t x = data[((w1 >> 32) << 9) + sub];
                    cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
                    unsigned long long w2 = w.load(cuda::memory_order_relaxed);
                    if (w1 == w2) acc += x;
                }
            } else if (V == 2) {  // acquire, data, W2 (no fence)
                unsigned long long w1 = w.load(cuda::memory_order_acquire);
                if ((w1 & (VALID | BUSY)) == VALID) {
                    uint64_t x = data[((w1 >> 32) << 9) + sub];
                    unsigned long long w2 = w.load(cuda::memory_order_relaxed);
                    if (w1 == w2) acc += x;
                }
            } else if (V == 3) {  // relaxed W1, data, W2 (no acquire, no fence)
                unsigned long long w1 = w.load(cuda::memory_order_relaxed);
                if ((w1 & (VALID | BUSY)) == VALID) {
                    uint64_t x = data[((w1 >> 32) << 9) + sub];
                    unsigned long long w2 = w.load(cuda::memory_order_relaxed);
                    if (w1 == w2) acc += x;
                }
            } else if (V == 4) {  // acquire W1, data only
                unsigned long long w1 = w.load(cuda::memory_order_acquire);
                if ((w1 & (VALID | BUSY)) == VALID) acc += data[((w1 >> 32) << 9) + sub];
            } else if (V == 5) {  // pin: leader fetch_add acquire, shfl, data, syncwarp, leader fetch_sub release
                unsigned mask = __activemask();
                int leader = __ffs(mask) - 1;
                unsigned long long w1 = 0;
                if ((threadIdx.x & 31) == leader) w1 = w.fetch_add(1, cuda::memory_order_acquire);
                w1 = __shfl_sync(mask, w1, leader);
                __syncwarp(mask);
                acc += data[((w1 >> 32) << 9) + sub];
                __syncwarp(mask);
                if ((threadIdx.x & 31) == leader) w.fetch_sub(1, cuda::memory_order_release);
            } else if (V == 6) {  // V1 + one RED per warp access after
                unsigned mask = __activemask();
                unsigned long long w1 = w.load(cuda::memory_order_acquire);
                if ((w1 & (VALID | BUSY)) == VALID) {
                    uint64_t x = data[((w1 >> 32) << 9) + sub];
                    cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
                    unsigned long long w2 = w.load(cuda::memory_order_relaxed);
                    if (w1 == w2) acc += x;
                }
                if ((threadIdx.x & 31) == __ffs(mask) - 1) {
                    unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
                    atomicAdd(&stats[s * 16], 32ull);
                }
            } else if (V >= 8 && V <= 12) {  // acquire on the data load orders W2 after it
                unsigned mask = __activemask();
                unsigned long long w1 = V == 12 ? w.load(cuda::memory_order_relaxed) : w.load(cuda::memory_order_acquire);
                if (V == 10) {
                    if ((w1 & (VALID | BUSY)) == VALID) {
                        uint64_t x = data[((w1 >> 32) << 9) + sub];
                        cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
                        unsigned long long w2 = w.load(cuda::memory_order_relaxed);
                        if (w1 == w2) acc += x;
                    }
                } else if ((w1 & (VALID | BUSY)) == VALID) {
                    uint64_t x = cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(
                                     const_cast<uint64_t&>(data[((w1 >> 32) << 9) + sub]))
                                     .load(cuda::memory_order_acquire);
                    unsigned long long w2 = w.load(cuda::memory_order_relaxed);
                    if (w1 == w2) acc += x;
                }
                if (V == 9 && (threadIdx.x & 31) == __ffs(mask) - 1) {
                    unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
                    atomicAdd(&stats[s * 16], 32ull);
                }
                if (V == 10 || V == 11) out[1 + (i & 0xffff)] = acc;
            } else if (V == 7) {  // leader-only W1/W2 (shfl), fence by leader after syncwarp
                unsigned mask = __activemask();
                int leader = __ffs(mask) - 1;
                bool lead = (threadIdx.x & 31) == leader;
                unsigned long long w1 = 0;
                if (lead) w1 = w.load(cuda::memory_order_acquire);
                w1 = __shfl_sync(mask, w1, leader);
                __syncwarp(mask);
                uint64_t x = data[((w1 >> 32) << 9) + sub];
                __syncwarp(mask);
                int ok = 0;
                if (lead) {
                    cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
                    ok = w.load(cuda::memory_order_relaxed) == w1;
                }
                if (__shfl_sync(mask, ok, leader)) acc += x;
            }
        }
    if (acc == 42) *out = acc;
}

// The library's element read (bam::array<uint64_t>::operator[]) in the same linear pattern,
// under different register budgets (launch bounds); every line valid, so only the hit path
// runs. PIN: read_pinned (a pin and release per warp access).
template <int MINB, bool PIN>
__global__ void __launch_bounds__(256, MINB) lib(bam_array_view v, int reps, unsigned long long* out) {
    bam::array<uint64_t> a{v};
    uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    uint64_t acc = 0;
    for (int r = 0; r < reps; ++r)
        for (uint64_t i = t; i < v.n; i += T) acc += PIN ? a.read_pinned(i) : a[i];
    if (acc == 42) *out = acc;
}

int main() {
    const uint64_t bytes = 1ull << 30, n = bytes / 8, lines = n / 512;
    uint64_t* data; unsigned long long *words, *stats, *out;
    cudaMalloc(&data, bytes); cudaMalloc(&words, lines * 8); cudaMalloc(&stats, 1 << 20); cudaMalloc(&out, 8 << 17);
    cudaMemset(data, 1, bytes);
    unsigned long long* h = new unsigned long long[lines];
    for (uint64_t l = 0; l < lines; ++l) h[l] = (l << 32) | VALID;
    cudaMemcpy(words, h, lines * 8, cudaMemcpyHostToDevice);
    const char* names[] = {"plain", "acq+data+fence+w2", "acq+data+w2 (no fence)", "relaxed w1+data+w2", "acq+data",
                           "pin (leader atomics)", "acq+data+fence+w2 + RED", "leader-only w1/w2 + fence", "acq w1+acq data+w2", "acq w1+acq data+w2 + RED", "fence version + store", "acq data version + store", "relaxed w1+acq data+w2"};
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int threads : {65536, 262144}) {
        for (int v = 0; v < 13; ++v) {
            auto launch = [&](int reps) {
                int grid = threads / 256;
                switch (v) {
                    case 0: k<0><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 1: k<1><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 2: k<2><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 3: k<3><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 4: k<4><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 5: k<5><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 6: k<6><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 7: k<7><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 8: k<8><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 9: k<9><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 10: k<10><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 11: k<11><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                    case 12: k<12><<<grid, 256>>>(data, words, n, reps, stats, out); break;
                }
            };
            launch(1);
            cudaEventRecord(a); launch(3); cudaEventRecord(b); cudaEventSynchronize(b);
            float ms; cudaEventElapsedTime(&ms, a, b);
            printf("threads %6d  %-28s %8.1f GB/s\n", threads, names[v], 3.0 * bytes / (ms * 1e-3) / 1e9);
        }
    }
    bam_array_view v{};
    v.words = (uint64_t)words; v.n = n; v.data = (uint64_t)data; v.slot_shift = 12; v.line_bytes = 4096;
    v.elem_size = 8; v.id = 0; v.epl = 512; v.epl_shift = 9; v.stats = (uint64_t)stats; v.flags = BAM_VIEW_F_COUNTING; v.nssd = 1; v.line_lbas = 8;
    for (int threads : {65536, 262144}) {
        for (int c = 0; c < 4; ++c) {
            const char* nm[] = {"lib a[i] minblocks 1", "lib a[i] minblocks 4", "lib a[i] minblocks 6", "lib a[i] minblocks 8",
                                "lib read_pinned minblocks 6", "lib read_pinned minblocks 8"};
            auto launch = [&](int reps) {
                int grid = threads / 256;
                switch (c) {
                    case 0: lib<1, false><<<grid, 256>>>(v, reps, out); break;
                    case 1: lib<4, false><<<grid, 256>>>(v, reps, out); break;
                    case 2: lib<6, false><<<grid, 256>>>(v, reps, out); break;
                    case 3: lib<8, false><<<grid, 256>>>(v, reps, out); break;
                    case 4: lib<6, true><<<grid, 256>>>(v, reps, out); break;
                    case 5: lib<8, true><<<grid, 256>>>(v, reps, out); break;
                }
            };
            launch(1);
            cudaEventRecord(a); launch(3); cudaEventRecord(b); cudaEventSynchronize(b);
            float ms; cudaEventElapsedTime(&ms, a, b);
            printf("threads %6d  %-28s %8.1f GB/s\n", threads, nm[c], 3.0 * bytes / (ms * 1e-3) / 1e9);
        }
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
