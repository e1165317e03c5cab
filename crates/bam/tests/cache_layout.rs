//! Compares the Rust twins of the cache structs (`bam::cache::abi`) with the C++
//! compiler's view of `cuda/include/bam/cache_abi.h`: sizes, every field offset and the
//! constants (`bam_cuda_build::layout`). Needs a host C++ compiler (CXX, or c++), no GPU.

use std::path::Path;

#[test]
fn cache_layouts_match() {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/include");
    bam_cuda_build::layout::check(
        &["bam/cache_abi.h"],
        &[&include],
        &bam::cache::abi::layouts(),
        &bam::cache::abi::constants(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
