//! Compares the Rust twins of the shared structs (`bam::abi`, `bam::storage::sim::abi`, `bam::storage::file::abi`) with the C++ compiler's view
//! of `cuda/include/bam/abi.h` `cuda/src/sim_abi.h` and `cuda/src/file_abi.h`: sizes, every field offset and the
//! constants (`bam_cuda_build::layout`). Needs a host C++ compiler (CXX, or c++), no GPU.
//! (bench_abi.h's structs are checked by bam-bench's own layout test.)

use std::path::Path;

#[test]
fn rust_and_cuda_layouts_match() {
    let cuda = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    let (include, src) = (cuda.join("include"), cuda.join("src"));
    bam_cuda_build::layout::check(
        &["bam/abi.h"],
        &[&include],
        &bam::abi::layouts(),
        &bam::abi::constants(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    bam_cuda_build::layout::check(
        &["sim_abi.h"],
        &[&include, &src],
        &bam::storage::sim::abi::layouts(),
        &bam::storage::sim::abi::constants(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    bam_cuda_build::layout::check(
        &["file_abi.h"],
        &[&include, &src],
        &bam::storage::file::abi::layouts(),
        &bam::storage::file::abi::constants(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
