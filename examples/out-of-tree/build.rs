//! Compiles `kernels.cu` against the bam device headers with the nvcc the runtime found.

fn main() {
    bam_cuda_build::compile("kernels.cu", "kernels.fatbin");
}
