//! GPU tests: run the suite (both backends) when a GPU is present, otherwise say SKIPPED.

#[test]
fn gpu_suite() {
    if !bam::gpu_available() {
        println!("SKIPPED: the GPU suite needs a GPU (CUDA driver missing or no device)");
        return;
    }
    let gpu = bam::Gpu::new(0).expect("open GPU");
    for o in bam_tests::io_suite::run_suite(&gpu) {
        assert!(o.result.is_ok(), "{}: {:?}", o.name, o.result);
    }
}
