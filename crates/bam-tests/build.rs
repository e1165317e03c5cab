//! Compiles the test kernels (`cuda/tests.cu`) against the bam device headers.

fn main() {
    bam_cuda_build::compile("cuda/tests.cu", "tests.fatbin");
}
