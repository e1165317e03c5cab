// Micro-probe: why the kernel suite's plain baselines on GPU memory sometimes run about 20 %
// slower (gather and histogram in full runs, after other kernels' UVM or cache variants;
// history: git show f700c74:docs/performance.md, "The plain baselines are bimodal"). Times the suite's plain
// histogram shape (1 GiB of u32, grid-stride, 8 blocks of 256 per SM) on a buffer allocated
// at the start (A) and on buffers allocated after a history of large allocations (B),
// alternating, so that a slow buffer and a slow GPU can be told apart. Histories: none;
// a balloon (cudaMalloc of all free memory but 2 GiB, freed); managed memory twice the
// buffer written by the GPU under a balloon that leaves half of it and freed (the suite's
// uvm variants' pattern, smaller);
// 1.25 GiB buffers allocated and freed one at a time, 8 times (what caches do). Then the
// same histogram on A at growing delays after a balloon and after alloc-only churn.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -o baseline-mode-probe benches/probe/baseline_mode_probe.cu
#include <cstdint>
#include <cstdio>
#include <vector>

#include <unistd.h>

#include "probe_timing.h"

namespace {
__global__ void __launch_bounds__(256, 8) hist(const uint32_t* a, uint64_t n, unsigned long long* out) {
    __shared__ uint32_t h[256];
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, T = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = t; i < n; i += T) atomicAdd(&h[a[i] & 255u], 1u);
    __syncthreads();
    for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x)
        if (h[b] != 0) atomicAdd(&out[b], static_cast<unsigned long long>(h[b]));
}

/// The suite's gather shape: sum of pseudo-random elements (latency-bound).
__global__ void __launch_bounds__(256, 6) gather(const uint32_t* a, uint64_t n, uint64_t reads, unsigned long long* out) {
    uint64_t s = 0;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < reads; k += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t x = (k + 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
        x ^= x >> 31;
        s += a[x % n];
    }
    if (s == 42) atomicAdd(out, s);
}

__global__ void touch(uint32_t* a, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        a[i] = static_cast<uint32_t>(i * 2654435761u);
}

constexpr uint64_t BYTES = 1ull << 30, N = BYTES / 4;
int grid = 0;
unsigned long long* out = nullptr;

uint32_t* fresh() {
    uint32_t* p = nullptr;
    if (cudaMalloc(&p, BYTES) != cudaSuccess) return nullptr;
    touch<<<grid, 256>>>(p, N);
    cudaDeviceSynchronize();
    return p;
}

// ms of A and B, alternating; then, on A, a gather and a device-to-device copy.
uint32_t* scratch = nullptr;
void compare(const char* what, uint32_t* a, uint32_t* b) {
    double ms[4] = {};
    uint32_t* bufs[2] = {a, b};
    time_variants(4, 3, 5, [&](int k) {
        if (k < 2) hist<<<grid, 256>>>(bufs[k], N, out);
        else if (k == 2) gather<<<grid / 8 * 6, 256>>>(a, N, N / 8, out);
        else cudaMemcpyAsync(scratch, a, BYTES / 4, cudaMemcpyDeviceToDevice);
    }, ms);
    printf("%-46s hist A %.3f B %.3f ms (B/A %.3f)  gather %.3f ms  copy 256 MiB %.1f GB/s\n", what, ms[0], ms[1],
           ms[1] / ms[0], ms[2], 2.0 * (BYTES / 4) / (ms[3] * 1e6));
}

void small_uvm() {
    uint32_t* m = nullptr;
    cudaMallocManaged(&m, 64ull << 20);
    touch<<<grid, 256>>>(m, (64ull << 20) / 4);
    cudaDeviceSynchronize();
    cudaFree(m);
}

void churn_alloc_only() {
    for (int k = 0; k < 8; ++k) {
        void* p = nullptr;
        cudaMalloc(&p, BYTES + BYTES / 4);
        cudaFree(p);
    }
}

void balloon() {
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    void* p = nullptr;
    if (cudaMalloc(&p, free - (2ull << 30)) == cudaSuccess) cudaFree(p);
}

void uvm() {
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    void* bal = nullptr;
    const uint64_t managed = BYTES / 4;  // 2x what the balloon leaves: faults, but not for minutes
    cudaMalloc(&bal, free - managed / 2 - (32ull << 20));
    uint32_t* m = nullptr;
    cudaMallocManaged(&m, managed);
    touch<<<grid, 256>>>(m, managed / 4);
    cudaDeviceSynchronize();
    cudaFree(m);
    cudaFree(bal);
}

void churn() {
    for (int k = 0; k < 8; ++k) {
        void* p = nullptr;
        cudaMalloc(&p, BYTES + BYTES / 4);
        cudaMemset(p, 0, BYTES + BYTES / 4);
        cudaDeviceSynchronize();
        cudaFree(p);
    }
}
}  // namespace

int main() {
    setvbuf(stdout, nullptr, _IONBF, 0);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    grid = sms * 8;
    cudaMalloc(&out, 256 * 8);
    cudaMalloc(&scratch, BYTES / 4);
    uint32_t* a = fresh();
    printf("baseline-mode probe: %d SMs, grid %d x 256, 1 GiB of u32 per buffer\n", sms, grid);
    uint32_t* b = fresh();
    compare("no history (B allocated right after A)", a, b);
    cudaFree(b);
    churn();
    b = fresh();
    compare("after 8 x 1.25 GiB allocated and freed", a, b);
    cudaFree(b);
    balloon();
    b = fresh();
    compare("after a balloon of all free memory", a, b);
    cudaFree(b);
    uvm();
    b = fresh();
    compare("after the uvm pattern (balloon + managed)", a, b);
    uint32_t* c = fresh();
    compare("  and a second fresh buffer (C as B)", a, c);
    cudaFree(b);
    cudaFree(c);
    churn_alloc_only();
    b = fresh();
    compare("after 8 x 1.25 GiB cudaMalloc + cudaFree only", a, b);
    cudaFree(b);
    churn();
    b = fresh();
    compare("after 8 x 1.25 GiB with memset (again)", a, b);
    cudaFree(b);
    small_uvm();
    b = fresh();
    compare("after 64 MiB of managed memory touched, no balloon", a, b);
    cudaFree(b);
    churn();
    uvm();
    b = fresh();
    compare("after memset churn, then the uvm pattern", a, b);
    cudaFree(b);
    // Does the slow state wear off with time (freed memory scrubbed in the background)?
    for (int h = 0; h < 2; ++h) {
        if (h == 0) balloon(); else churn_alloc_only();
        printf("%s, then waiting:", h == 0 ? "balloon" : "alloc-only churn");
        double waited = 0;
        for (double dt : {0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0}) {
            usleep(static_cast<useconds_t>(dt * 1e6));
            waited += dt;
            double ms[1] = {};
            time_variants(1, 1, 5, [&](int) { hist<<<grid, 256>>>(a, N, out); }, ms);
            printf("  %.2f s: %.3f ms", waited, ms[0]);
        }
        printf("\n");
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
