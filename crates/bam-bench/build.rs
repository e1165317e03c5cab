//! Compiles this crate's kernels with the nvcc the `bam` crate found, against its device
//! headers (DEP_BAM_NVCC, DEP_BAM_INCLUDE: `links = "bam"`): `cuda/bench.cu` (the I/O and
//! cache benchmarks) and `cuda/suite.cu` (the kernel suite), each its own fatbin.

fn main() {
    bam_cuda_build::compile("cuda/bench.cu", "bench.fatbin");
    bam_cuda_build::compile("cuda/suite.cu", "suite.fatbin");
}
