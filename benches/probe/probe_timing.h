// probe_timing.h — the probes' timing loop: mean ms per launch of each variant, variants
// alternating (one warm-up launch of each, then `rounds` rounds of `reps` launches each,
// timed with CUDA events); adds to `ms`.
#pragma once
#include <cuda_runtime.h>

template <typename L>
void time_variants(int nv, int rounds, int reps, L&& launch, double* ms) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int k = 0; k < nv; ++k) launch(k);
    for (int r = 0; r < rounds; ++r)
        for (int k = 0; k < nv; ++k) {
            cudaEventRecord(e0);
            for (int j = 0; j < reps; ++j) launch(k);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float t = 0;
            cudaEventElapsedTime(&t, e0, e1);
            ms[k] += t / reps / rounds;
        }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}
