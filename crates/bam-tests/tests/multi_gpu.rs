//! Multi-GPU tests (every GPU on the same controllers, both backends): run when the
//! driver sees two GPUs or more, otherwise SKIPPED.

#[test]
fn multi_gpu_suite() {
    let count = if bam::gpu_available() {
        cudarc::driver::CudaContext::device_count().unwrap_or(0)
    } else {
        0
    };
    if count < 2 {
        println!("SKIPPED: the multi-GPU suite needs two GPUs; the driver sees {count}");
        return;
    }
    let gpus: Vec<_> = (0..count as usize)
        .map(|g| bam::Gpu::new(g).expect("open GPU"))
        .collect();
    for backend in bam_tests::TestBackend::ALL {
        for o in bam_tests::multi_gpu_suite::run_suite(&gpus, backend) {
            assert!(o.result.is_ok(), "{}: {:?}", o.name, o.result);
        }
    }
}
