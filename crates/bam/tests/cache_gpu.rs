//! GPU tests of the cache: run the suite when a GPU is present, otherwise skip.

#[test]
fn cache_gpu_suite() {
    if !bam::gpu_available() {
        eprintln!("skipping the cache GPU suite: no GPU (CUDA driver missing or no device)");
        return;
    }
    let gpu = bam::Gpu::new(0).expect("open GPU");
    for o in bam::cache::selftest::run_suite(&gpu) {
        assert!(o.result.is_ok(), "{}: {:?}", o.name, o.result);
    }
}
