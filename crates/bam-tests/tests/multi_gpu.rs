//! The multi-GPU cases (every GPU on the same controllers) as named trials, `multi-gpu
//! <backend> <case>`; with fewer than two GPUs every trial is ignored and SKIPPED is
//! printed.

fn main() {
    bam_tests::harness::multi_gpu_main()
}
