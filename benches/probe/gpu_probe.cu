// gpu_probe.cu — micro-measurements behind the simulated array's per-command cost
// (docs/simulated-ssd.md, "Where the time goes"): __nanosleep accuracy, globaltimer
// resolution, device-scope ping-pong round trip between two SMs (the submitter <->
// controller hand-off), and the latency of a load from mapped host memory.
// Build: nvcc -O3 -arch=sm_90 -std=c++17 gpu_probe.cu -o gpu_probe
#include <cstdio>
#include <cstdint>
#include <cuda/atomic>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

__device__ __forceinline__ uint64_t gtimer() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__global__ void sleep_probe(uint64_t* out) {
    const unsigned ts[6] = {0, 32, 64, 128, 1000, 10000};
    for (int i = 0; i < 6; ++i) {
        const int n = ts[i] >= 10000 ? 20 : 200;
        uint64_t t0 = gtimer();
        for (int k = 0; k < n; ++k) __nanosleep(ts[i]);
        out[i] = (gtimer() - t0) / n;
    }
    // globaltimer resolution: smallest nonzero step seen
    uint64_t last = gtimer(), mind = ~0ull;
    for (int k = 0; k < 100000; ++k) { uint64_t t = gtimer(); if (t != last) { if (t - last < mind) mind = t - last; last = t; } }
    out[6] = mind;
}

// Block 0 warp 0 pings, block 1 warp 0 pongs through one device-scope word each way.
// mode bit 0: pong polls with __nanosleep(64) when idle; bit 1: ping polls with nanosleep(128);
// bit 2: the other warps of the pong block loop on __nanosleep(1000) (idle controller warps);
// bit 3: those idle warps also load mapped host memory every 64 loops.
__global__ void pingpong(uint32_t* a, uint32_t* b, uint32_t* stop, volatile uint32_t* hostw, int rounds, int mode, uint64_t* out) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (blockIdx.x == 1 && warp != 0) {
        if (!(mode & 4)) return;
        uint64_t it = 0;
        while (cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*stop).load(cuda::memory_order_relaxed) == 0) {
            if ((mode & 8) && (it & 63) == 0 && lane == 0) (void)cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*const_cast<uint32_t*>(hostw)).load(cuda::memory_order_relaxed);
            __nanosleep(1000);
            ++it;
        }
        return;
    }
    if (warp != 0 || lane != 0) return;
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device> A(*a), B(*b);
    if (blockIdx.x == 0) {
        uint64_t t0 = gtimer();
        for (int r = 1; r <= rounds; ++r) {
            A.store(r, cuda::memory_order_release);
            while (B.load(cuda::memory_order_acquire) != (uint32_t)r) if (mode & 2) __nanosleep(128);
        }
        out[0] = (gtimer() - t0) / rounds;
        cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*stop).store(1, cuda::memory_order_relaxed);
    } else {
        for (int r = 1; r <= rounds; ++r) {
            while (A.load(cuda::memory_order_acquire) != (uint32_t)r) if (mode & 1) __nanosleep(64);
            B.store(r, cuda::memory_order_release);
        }
    }
}

__global__ void host_load(uint32_t* h, int n, uint64_t* out) {
    uint64_t t0 = gtimer();
    uint32_t x = 0;
    for (int i = 0; i < n; ++i) x += cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(h[(i + x) & 1023]).load(cuda::memory_order_relaxed);
    out[0] = (gtimer() - t0) / n;
    out[1] = x;
}

int main() {
    uint64_t *out, *out_d;
    CK(cudaHostAlloc(&out, 64 * 8, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&out_d, out, 0));
    sleep_probe<<<1, 32>>>(out_d); CK(cudaDeviceSynchronize());
    printf("nanosleep(t) measured ns per call: t=0:%llu 32:%llu 64:%llu 128:%llu 1000:%llu 10000:%llu\n",
           (unsigned long long)out[0], (unsigned long long)out[1], (unsigned long long)out[2], (unsigned long long)out[3], (unsigned long long)out[4], (unsigned long long)out[5]);
    printf("globaltimer smallest step: %llu ns\n", (unsigned long long)out[6]);
    uint32_t *a, *b, *stop, *hostw;
    CK(cudaMalloc(&a, 256)); CK(cudaMalloc(&b, 256)); CK(cudaMalloc(&stop, 256));
    CK(cudaHostAlloc(&hostw, 4096, cudaHostAllocMapped));
    for (int i = 0; i < 1024; ++i) hostw[i] = 0;
    uint32_t* hostw_d; CK(cudaHostGetDevicePointer(&hostw_d, hostw, 0));
    int modes[] = {0, 1, 3, 7, 15};
    for (int m : modes) {
        CK(cudaMemset(a, 0, 256)); CK(cudaMemset(b, 0, 256)); CK(cudaMemset(stop, 0, 256));
        // each block fills an SM (all shared memory), like the controller kernel
        int smem = 200 * 1024;
        CK(cudaFuncSetAttribute(pingpong, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        pingpong<<<2, 512, smem>>>(a, b, stop, hostw_d, 20000, m, out_d); CK(cudaDeviceSynchronize());
        printf("ping-pong round trip (mode %2d: pong-sleep %d ping-sleep %d idle-warps %d idle-host-loads %d): %llu ns\n", m, m & 1, (m >> 1) & 1, (m >> 2) & 1, (m >> 3) & 1, (unsigned long long)out[0]);
    }
    host_load<<<1, 1>>>(hostw_d, 2000, out_d); CK(cudaDeviceSynchronize());
    printf("dependent load from mapped host memory: %llu ns\n", (unsigned long long)out[0]);

    // The race behind issue 4's illegal address: cudaMemset (the "synchronous" form, the
    // same as cuMemsetD8) on device memory returns before it has run, on the legacy
    // stream, which is not ordered with a non-blocking stream. Queue a large memset, then
    // memset a small table, fill the table through a non-blocking stream and wait for
    // that stream only, as DeviceBuffer::zeroed + write did: the late memset zeroes it.
    cudaStream_t copy;
    CK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    int lost = 0, trials = 5;
    for (int t = 0; t < trials; ++t) {
        void *big, *table;
        CK(cudaMalloc(&big, 4ull << 30));
        CK(cudaMalloc(&table, 4096));
        CK(cudaMemset(big, 0, 4ull << 30));
        CK(cudaMemset(table, 0, 4096));
        static uint64_t pat[512], back[512];
        for (int i = 0; i < 512; ++i) pat[i] = 0x1234567800000000ull + i;
        CK(cudaMemcpyAsync(table, pat, 4096, cudaMemcpyHostToDevice, copy));
        CK(cudaStreamSynchronize(copy));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(back, table, 4096, cudaMemcpyDeviceToHost));
        if (back[7] != pat[7]) ++lost;
        CK(cudaFree(big)); CK(cudaFree(table));
    }
    printf("legacy-stream memset vs non-blocking copy: table overwritten by the late memset in %d of %d trials\n", lost, trials);
    return 0;
}
