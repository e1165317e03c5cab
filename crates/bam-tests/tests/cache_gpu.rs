//! GPU tests of the cache (both backends): run when a GPU is present, otherwise SKIPPED.

#[test]
fn cache_gpu_suite() {
    if !bam::gpu_available() {
        println!("SKIPPED: the cache GPU suite needs a GPU (CUDA driver missing or no device)");
        return;
    }
    let gpu = bam::Gpu::new(0).expect("open GPU");
    for backend in bam_tests::TestBackend::ALL {
        for o in bam_tests::cache_suite::run_suite(&gpu, backend) {
            assert!(o.result.is_ok(), "{}: {:?}", o.name, o.result);
        }
    }
}
