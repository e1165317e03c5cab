//! Runs the GPU test suite (twice, in one process, to catch leaked state).

fn main() {
    if !bam::gpu_available() {
        println!("SKIP: no GPU (the CUDA driver is missing or sees no device)");
        return;
    }
    let gpu = match bam::Gpu::new(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("FAIL: cannot open the GPU: {e}");
            std::process::exit(1);
        }
    };
    println!("GPU: {} ({} SMs)", gpu.name, gpu.sms);
    let mut failed = 0;
    for round in 1..=2 {
        for o in bam::selftest::run_suite(&gpu) {
            match &o.result {
                Ok(s) => println!("PASS [round {round}] {} ({:.2} s): {s}", o.name, o.seconds),
                Err(e) => {
                    failed += 1;
                    println!("FAIL [round {round}] {} ({:.2} s): {e}", o.name, o.seconds);
                }
            }
        }
    }
    if failed > 0 {
        println!("{failed} test(s) failed");
        std::process::exit(1);
    }
    println!("all GPU tests passed (2 rounds)");
}
