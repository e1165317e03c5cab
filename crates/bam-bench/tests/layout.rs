//! Compares the Rust twins of the benchmark kernels' structs (`bam_bench::abi`) with the
//! C++ compiler's view of `cuda/bench_abi.h`: sizes, every field offset and the constants
//! (`bam_cuda_build::layout`). bench_abi.h includes bam's `bam/abi.h`, found where the bam
//! crate's build script says (`DEP_BAM_INCLUDE`, handed on by build.rs as
//! `BAM_DEVICE_INCLUDE`). Needs a host C++ compiler (CXX, or c++), no GPU.

use std::path::Path;

#[test]
fn rust_and_cuda_bench_layouts_match() {
    let cuda = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    bam_cuda_build::layout::check(
        &["bench_abi.h"],
        &[Path::new(env!("BAM_DEVICE_INCLUDE")), &cuda],
        &bam_bench::abi::layouts(),
        &bam_bench::abi::constants(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
