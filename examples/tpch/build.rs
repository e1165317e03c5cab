//! Compiles this example's kernels (`kernels.cu`, which includes
//! `../support/zero_copy.cuh`) against the bam device headers with the nvcc that the
//! `bam` crate found (`bam_cuda_build::compile`).

fn main() {
    println!("cargo:rerun-if-changed=../support/zero_copy.cuh");
    bam_cuda_build::compile("kernels.cu", "kernels.fatbin");
}
