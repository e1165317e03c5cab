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

/// A thread's own xorshift64* state from a run's seed and its thread index.
__device__ __forceinline__ uint64_t rng_seed(uint64_t seed, uint64_t tid) {
    uint64_t s = (seed ^ (tid * 0x9e3779b97f4a7c15ull)) | 1ull;
    rng_next(s);
    return s;
}

/// splitmix64's finaliser: element i of the cache benchmark's data is mix64(i ^ seed).
__host__ __device__ __forceinline__ uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/// Writes words [first_word, first_word + nwords) of SSD `ssd`'s pattern, generation
/// `gen`, to `p` (nwords a multiple of 4, `p` 16-byte aligned).
__device__ void fill_words(uint32_t* p, uint64_t first_word, uint64_t nwords, uint32_t ssd, uint32_t gen) {
    for (uint64_t i = 0; i < nwords; i += 4) {
        uint4 v;
        v.x = pattern_word(ssd, first_word + i, gen);
        v.y = pattern_word(ssd, first_word + i + 1, gen);
        v.z = pattern_word(ssd, first_word + i + 2, gen);
        v.w = pattern_word(ssd, first_word + i + 3, gen);
        *reinterpret_cast<uint4*>(p + i) = v;
    }
}

/// Number of words at `p` that match neither allowed generation. `alt` = gen when only one
/// generation is allowed.
__device__ uint64_t check_words(const uint32_t* p, uint64_t first_word, uint64_t nwords, uint32_t ssd,
                                uint32_t gen, uint32_t alt) {
    uint64_t bad = 0;
    for (uint64_t i = 0; i < nwords; i += 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(p + i);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const uint32_t a = pattern_word(ssd, first_word + i + k, gen);
            if (w[k] != a && (alt == gen || w[k] != pattern_word(ssd, first_word + i + k, alt))) ++bad;
        }
    }
    return bad;
}

}  // namespace bam
