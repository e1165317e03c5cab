//! Compiles this crate's kernels with the nvcc the `bam` crate found, against its device
//! headers (DEP_BAM_NVCC, DEP_BAM_INCLUDE: `links = "bam"`): `cuda/bench.cu` (the I/O and
//! cache benchmarks) and `cuda/suite.cu` (the kernel suite), each its own fatbin. The
//! benchmarks' own ABI header, `cuda/bench_abi.h`, sits beside them.

fn main() {
    bam_cuda_build::compile("cuda/bench.cu", "bench.fatbin");
    bam_cuda_build::compile("cuda/suite.cu", "suite.fatbin");
    println!("cargo:rerun-if-changed=cuda/bench_abi.h");
    // For tests/layout.rs, which compiles bench_abi.h (it includes bam/abi.h) on the host.
    let include = std::env::var("DEP_BAM_INCLUDE").expect("DEP_BAM_INCLUDE from the `bam` crate");
    println!("cargo:rustc-env=BAM_DEVICE_INCLUDE={include}");
}
