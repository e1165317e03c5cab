// The user's kernel: a sum over a bam::array<float>, written as it would be over a
// float* (each thread strides over the elements; a[i] goes through the cache).
#include <bam/array.cuh>

extern "C" __global__ void sum(bam::array<float> a, unsigned long long n, double* out) {
    double s = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        s += a[i];
    atomicAdd(out, s);
}
