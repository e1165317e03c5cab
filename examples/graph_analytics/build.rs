//! Compiles this example's kernels (`kernels.cu`) against the bam device headers with
//! the nvcc that the `bam` crate found (`bam_cuda_build::compile`).

fn main() {
    bam_cuda_build::compile("kernels.cu", "kernels.fatbin");
}
