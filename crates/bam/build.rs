//! Compiles `cuda/src/{sim,cache,scan,pattern,file}.cu` (the runtime's
//! kernels) into fatbins embedded in the crate, with nvcc found by `bam-cuda-build`
//! (`NVCC`, `CUDA_PATH`, `PATH`, the pinned pip wheels) for the architectures of
//! `BAM_CUDA_ARCHS`.
//!
//! Everything it reads lies inside this crate (`cuda/include/bam`: the public device API,
//! `detail/` its internals; `cuda/src`: the runtime's kernels and the simulator's ABI), so
//! the package `cargo package` makes builds on its own.

use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed={}", root.display());
    for sub in ["include/bam", "include/bam/detail", "src"] {
        if let Ok(rd) = std::fs::read_dir(root.join(sub)) {
            for e in rd.flatten() {
                println!("cargo:rerun-if-changed={}", e.path().display());
            }
        }
    }
    let nvcc = bam_cuda_build::find_nvcc();
    // Which GPUs the fatbins serve, for the error a GPU without a fitting image gets.
    let archs: Vec<String> = bam_cuda_build::archs().iter().map(u32::to_string).collect();
    println!("cargo:rustc-env=BAM_CUDA_ARCHS_BUILT={}", archs.join(","));
    for name in ["sim", "cache", "scan", "pattern", "file"] {
        bam_cuda_build::fatbin(
            &nvcc,
            &root.join("include"),
            &root.join(format!("src/{name}.cu")),
            &out.join(format!("{name}.fatbin")),
        );
    }
    println!("cargo:rustc-env=BAM_NVCC={}", nvcc.display());
    // For dependents' build scripts (links = "bam"): DEP_BAM_NVCC, DEP_BAM_INCLUDE (the
    // public headers; the simulator's sim_abi.h in cuda/src is not among them).
    println!("cargo:nvcc={}", nvcc.display());
    println!("cargo:include={}", root.join("include").display());
}
