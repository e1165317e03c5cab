//! Compiles this crate's kernels (`cuda/bench.cu`) with the nvcc the `bam` crate found,
//! against its device headers (DEP_BAM_NVCC, DEP_BAM_INCLUDE: `links = "bam"`).

fn main() {
    bam_cuda_build::compile("cuda/bench.cu", "bench.fatbin");
}
