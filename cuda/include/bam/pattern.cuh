// bam/pattern.cuh — the deterministic data pattern used by benchmarks and tests.
//
// Word w (4 bytes) of SSD `ssd`, byte offset 4 * w, generation `gen` holds
// pattern_word(ssd, w, gen). Generation 0 is what a fresh medium holds; writes use the
// run's generation, so a read can tell "never written" from "written" and from
// "written somewhere else" (the word index is part of the hash). rng_next: the random
// sequence the benchmark and test kernels draw from (replayed by host models).
#pragma once

#include <stdint.h>

namespace bam {

__host__ __device__ __forceinline__ uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

__host__ __device__ __forceinline__ uint32_t pattern_word(uint32_t ssd, uint64_t word, uint32_t gen) {
    return mix32(static_cast<uint32_t>(word) ^ mix32(static_cast<uint32_t>(word >> 32) ^ (ssd * 0x9e3779b9u) ^
                                                    (gen * 0x85ebca6bu)));
}

/// xorshift64*: advances `s` and returns the next value (`s` must not be 0).
__host__ __device__ __forceinline__ uint64_t rng_next(uint64_t& s) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dull;
}

}  // namespace bam
