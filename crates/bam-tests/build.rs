//! Compiles the test kernels (`cuda/tests.cu`) against the bam device headers.

fn main() {
    bam_cuda_build::compile("cuda/tests.cu", "tests.fatbin");
    // tests.cu shares the benchmark kernels' structs (bam-bench, beside this crate).
    println!("cargo:rerun-if-changed=../bam-bench/cuda/bench_abi.h");
}
