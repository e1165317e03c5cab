// The random-access kernel of the BaM dissertation, Listing 5.2, and its port to
// bam::array (Listing 5.3), side by side. The listings' typos are fixed the same way in
// both (the stride is the grid size; `out[tid]` is the per-thread output the listing's
// `*output` stands for).
#include <bam/array.cuh>

#include <stddef.h>

// Listing 5.2: the kernel over plain GPU memory.
extern "C" __global__ void random_access_plain(const float* data, size_t n, float* out, const unsigned* randidx) {
    size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    for (; tid < n; tid += gridDim.x * blockDim.x)
        out[tid] += data[randidx[tid]];
}

// Listing 5.3: the same kernel with `data` and `out` on storage. Two changes: the types
// of the two parameters, and an array_ref for the reads of `data` (temporal reuse of the
// pinned line). `out[tid] += x` becomes a read and a store.
extern "C" __global__ void random_access_bam(bam::array<float> data, size_t n, bam::array<float> out,
                                             const unsigned* randidx) {
    bam::array_ref<float> ref(data);
    size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    for (; tid < n; tid += gridDim.x * blockDim.x)
        out.store(tid, out[tid] + ref[randidx[tid]]);
}

// Listing 5.3 without the array_ref: the reads of `data` are warp-coalesced accesses that
// pin their line only for the access (diagnostic variant, RA_COALESCED=1).
extern "C" __global__ void random_access_bam_coalesced(bam::array<float> data, size_t n, bam::array<float> out,
                                                       const unsigned* randidx) {
    size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    for (; tid < n; tid += gridDim.x * blockDim.x)
        out.store(tid, out[tid] + data[randidx[tid]]);
}
