// latency_probe.cu — the memory-system latencies that bound a single cache miss
// (docs/performance.md, "The one-warp miss"): one thread's dependent chains of loads,
// atomics and fences at device scope, the visibility hand-off between two SMs with
// different orderings, and one warp's copy of a cold 4 KiB block. Every figure is the
// mean over a long dependent chain, timed with globaltimer (32 ns steps) and clock64.
// Build: nvcc -O3 -arch=sm_90 -std=c++17 latency_probe.cu -o latency-probe
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e = (x);                                                                   \
        if (e != cudaSuccess) {                                                                \
            printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__);                 \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

__device__ __forceinline__ uint64_t gtimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint32_t ld_relaxed(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ uint32_t ld_acquire(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ uint32_t ld_plain(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed(uint32_t* p, uint32_t v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release(uint32_t* p, uint32_t v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t atom_add_relaxed(uint32_t* p, uint32_t v) {
    uint32_t r;
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ uint32_t atom_add_acqrel(uint32_t* p, uint32_t v) {
    uint32_t r;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ uint32_t atom_cas_acquire(uint32_t* p, uint32_t cmp, uint32_t v) {
    uint32_t r;
    asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(r) : "l"(p), "r"(cmp), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ uint32_t atom_cas_relaxed(uint32_t* p, uint32_t cmp, uint32_t v) {
    uint32_t r;
    asm volatile("atom.relaxed.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(r) : "l"(p), "r"(cmp), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ void fence_acqrel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ void fence_sc() { asm volatile("fence.sc.gpu;" ::: "memory"); }

// One thread. `ring` is a permutation cycle of 32-bit indices over `n` words spaced
// 128 B apart (one per L2 sector group), warmed into L2 by the first lap.
enum { CHAIN = 4000 };
__global__ void chains(uint32_t* ring, uint32_t* word, uint64_t* out) {
    uint32_t x = 0;
    for (int k = 0; k < CHAIN; ++k) x = ring[x];  // warm
    uint64_t c0, t0;
#define TIMED(slot, body)                                                                      \
    t0 = gtimer();                                                                             \
    c0 = clock64();                                                                            \
    for (int k = 0; k < CHAIN; ++k) { body; }                                                  \
    out[2 * (slot)] = (gtimer() - t0);                                                         \
    out[2 * (slot) + 1] = (clock64() - c0);
    TIMED(0, x = ld_plain(ring + x));             // L1 may hit (ld.ca default on sm_90: L1)
    TIMED(1, x = ld_relaxed(ring + x));           // L2
    TIMED(2, x = ld_acquire(ring + x));           // L2 + L1 invalidate
    TIMED(3, x = atom_add_relaxed(word + (x & 1), 0u));
    TIMED(4, x = atom_add_acqrel(word + (x & 1), 0u));
    TIMED(5, st_relaxed(word + 2, k); fence_acqrel());  // a release fence after a store
    TIMED(6, st_release(word + 2, k));            // back-to-back release stores
    TIMED(7, st_relaxed(word + 2, k));            // fire-and-forget stores
    TIMED(8, st_relaxed(word + 2, k); fence_sc());
    TIMED(9, fence_acqrel());                      // a fence with nothing outstanding
    TIMED(10, x += static_cast<uint32_t>(gtimer())); // reading the timer
    TIMED(11, x = atom_cas_relaxed(word + 4 + (x & 1), x, x + 1));  // a lock word's CAS
    TIMED(12, x = atom_cas_acquire(word + 4 + (x & 1), x, x + 1));
    TIMED(13, x = atom_cas_relaxed(word + 4 + (x & 1), x, x + 1); fence_acqrel());
#undef TIMED
    out[31] = x;
}

// Hand-off between block 0 (ping) and block 1 (pong), one thread each, `rounds` round
// trips through two words. mode 0: release store / acquire poll; 1: relaxed store /
// relaxed poll (lower bound: no fences); 2: relaxed store + fence / relaxed poll + fence
// on success; 3: atomic exchange publish / acquire poll.
__global__ void handoff(uint32_t* a, uint32_t* b, int rounds, int mode, uint64_t* out) {
    if (threadIdx.x != 0) return;
    uint32_t* mine = blockIdx.x == 0 ? a : b;
    uint32_t* theirs = blockIdx.x == 0 ? b : a;
    const uint64_t t0 = gtimer();
    for (int r = 1; r <= rounds; ++r) {
        if (blockIdx.x == 1) {
            if (mode == 1) while (ld_relaxed(theirs) != (uint32_t)r) {}
            else if (mode == 2) { while (ld_relaxed(theirs) != (uint32_t)r) {} fence_acqrel(); }
            else while (ld_acquire(theirs) != (uint32_t)r) {}
        }
        if (mode == 0) st_release(mine, r);
        else if (mode == 1) st_relaxed(mine, r);
        else if (mode == 2) { fence_acqrel(); st_relaxed(mine, r); }
        else atomicExch(mine, r);
        if (blockIdx.x == 0) {
            if (mode == 1) while (ld_relaxed(theirs) != (uint32_t)r) {}
            else if (mode == 2) { while (ld_relaxed(theirs) != (uint32_t)r) {} fence_acqrel(); }
            else while (ld_acquire(theirs) != (uint32_t)r) {}
        }
    }
    if (blockIdx.x == 0) out[0] = (gtimer() - t0) / rounds;
}

// One warp copies `n` cold 4 KiB blocks (16 B per lane per step, 8 steps) from src to
// dst, each followed by a release fence: a 4 KiB read's data movement in the simulated
// controller, plus the fence before its completion entry.
__global__ void copy4k(const uint4* src, uint4* dst, int n, uint64_t* out) {
    const int lane = threadIdx.x;
    const uint64_t t0 = gtimer();
    for (int i = 0; i < n; ++i) {
        const uint4* s = src + (size_t)i * 4096 * 37 % (64u << 20) / 16;  // spread, cold
        uint4* d = dst + (size_t)i * 256;
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = s[k * 32 + lane];
#pragma unroll
        for (int k = 0; k < 8; ++k) d[k * 32 + lane] = v[k];
        __syncwarp();
        fence_acqrel();
    }
    if (lane == 0) out[0] = (gtimer() - t0) / n;
}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int clk = 0;
    CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
    printf("# latency-probe on %s, %d SMs, max SM clock %d MHz\n", prop.name, prop.multiProcessorCount, clk / 1000);
    uint64_t *out, *out_d;
    CK(cudaHostAlloc(&out, 64 * 8, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&out_d, out, 0));
    // Ring of 512 words 128 B apart (64 KiB: fits L2, not one L1 line set), a random cycle.
    const int n = 512, stride = 32;
    static uint32_t h[n * stride];
    uint32_t perm[n];
    for (int i = 0; i < n; ++i) perm[i] = i;
    uint64_t s = 88172645463325252ull;
    for (int i = n - 1; i > 0; --i) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const int j = s % (i + 1);
        const uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (int i = 0; i < n; ++i) h[perm[i] * stride] = perm[(i + 1) % n] * stride;
    uint32_t *ring, *word;
    CK(cudaMalloc(&ring, sizeof h));
    CK(cudaMalloc(&word, 4096));
    CK(cudaMemcpy(ring, h, sizeof h, cudaMemcpyHostToDevice));
    CK(cudaMemset(word, 0, 4096));
    CK(cudaDeviceSynchronize());
    const char* names[] = {"ld (L1 allowed)", "ld.relaxed.gpu (L2)", "ld.acquire.gpu", "atom.add.relaxed.gpu",
                           "atom.add.acq_rel.gpu", "st.relaxed + fence.acq_rel.gpu", "st.release.gpu (back to back)",
                           "st.relaxed.gpu (no wait)", "st.relaxed + fence.sc.gpu", "fence.acq_rel.gpu alone",
                           "read globaltimer", "atom.cas.relaxed.gpu", "atom.cas.acquire.gpu",
                           "atom.cas.relaxed + fence.acq_rel"};
    for (int rep = 0; rep < 2; ++rep) {
        chains<<<1, 1>>>(ring, word, out_d);
        CK(cudaDeviceSynchronize());
        if (rep == 0) continue;  // first launch: module load, cold TLB
        for (int i = 0; i < 14; ++i)
            printf("%-34s %7.1f ns  %7.1f cycles  (%.0f MHz)\n", names[i], (double)out[2 * i] / CHAIN,
                   (double)out[2 * i + 1] / CHAIN, (double)out[2 * i + 1] / (double)out[2 * i] * 1e3);
    }
    uint32_t *a, *b;
    CK(cudaMalloc(&a, 4096));
    CK(cudaMalloc(&b, 4096));
    const char* modes[] = {"st.release / ld.acquire poll", "st.relaxed / ld.relaxed poll (no fence)",
                           "fence+st.relaxed / ld.relaxed poll+fence", "atomicExch / ld.acquire poll"};
    for (int m = 0; m < 4; ++m) {
        CK(cudaMemset(a, 0, 4096));
        CK(cudaMemset(b, 0, 4096));
        CK(cudaDeviceSynchronize());
        // Blocks large enough to land on two different SMs.
        const int smem = 200 * 1024;
        CK(cudaFuncSetAttribute(handoff, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        handoff<<<2, 32, smem>>>(a, b, 20000, m, out_d);
        CK(cudaDeviceSynchronize());
        printf("SM-to-SM round trip, %-42s %6llu ns\n", modes[m], (unsigned long long)out[0]);
    }
    uint4 *src, *dst;
    CK(cudaMalloc(&src, 64u << 20));
    CK(cudaMalloc(&dst, 4u << 20));
    CK(cudaMemset(src, 1, 64u << 20));
    CK(cudaDeviceSynchronize());
    copy4k<<<1, 32>>>(src, dst, 1000, out_d);
    CK(cudaDeviceSynchronize());
    printf("one warp: copy a cold 4 KiB block + fence             %6llu ns\n", (unsigned long long)out[0]);
    return 0;
}
