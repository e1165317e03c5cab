// pattern.cu — the verification pattern's fill (shipped in the crate's fatbin):
//   bam_fill_pattern   any GPU buffer, or a fresh simulated medium, filled with generation
//                      `gen` of SSD `ssd`'s pattern (bam::pattern::fill_gpu)
#include <bam/pattern.cuh>
#include <bam/util.cuh>

using namespace bam;

/// Fills `nwords` 32-bit words at `medium` (a multiple of 4 words) with the verification
/// pattern of SSD `ssd`, generation `gen`: word w holds bam::pattern_word(ssd, w, gen).
extern "C" __global__ void bam_fill_pattern(uint64_t medium, uint64_t nwords, uint32_t ssd, uint32_t gen) {
    const uint64_t n4 = nwords / 4;
    for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n4;
         i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
        fill_words(reinterpret_cast<uint32_t*>(medium) + 4 * i, 4 * i, 4, ssd, gen);
    }
}
