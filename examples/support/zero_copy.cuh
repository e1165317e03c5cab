// The raw zero-copy read: every byte of a buffer in pinned host memory read once by GPU
// threads, the PCIe limit of any reader of host-resident data. The examples measure it
// in the same run as their scans (included by their kernels.cu).
#pragma once

#include <stdint.h>

/// Reads every 16-byte word of `src` once (grid-stride, 4 loads in flight per thread)
/// and folds them into one word so that no load can be optimised away.
extern "C" __global__ void zc_read(const uint4* src, uint64_t words, unsigned long long* sink) {
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
    uint32_t acc = 0;
    for (; i + 3 * stride < words; i += 4 * stride) {
        const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < words; i += stride) {
        const uint4 a = src[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) atomicAdd(sink, 1ull);  // practically never; keeps the loads
}
