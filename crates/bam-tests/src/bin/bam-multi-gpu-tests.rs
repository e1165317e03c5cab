//! Runs the multi-GPU test suite: every GPU on the same controllers at once, on the
//! simulated array (served from the first GPU through peer access) and on the host-side
//! controller models.
//!
//! `bam-multi-gpu-tests [--gpus 0,1] [--backend sim|hostctl]` (default: every GPU the
//! driver sees, both backends). Prints SKIPPED and exits 0 on a machine with fewer than
//! two GPUs: nothing was tested there.

use bam_tests::TestBackend;

fn main() {
    let mut gpus: Option<Vec<usize>> = None;
    let mut backends = TestBackend::MULTI_GPU.to_vec();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--gpus" => match args.next().map(|v| bam::storage::parse_gpus(&v)) {
                Some(Ok(g)) if g.len() >= 2 => gpus = Some(g),
                _ => {
                    eprintln!("--gpus takes two or more distinct GPU ordinals, e.g. 0,1");
                    std::process::exit(2);
                }
            },
            "--backend" => match args.next().as_deref().and_then(TestBackend::parse) {
                Some(b) => backends = vec![b],
                None => {
                    eprintln!("--backend takes sim or hostctl");
                    std::process::exit(2);
                }
            },
            other => {
                eprintln!("unknown argument `{other}` (--gpus LIST, --backend sim|hostctl)");
                std::process::exit(2);
            }
        }
    }
    let count = if bam::gpu_available() {
        cudarc::driver::CudaContext::device_count().unwrap_or(0) as usize
    } else {
        0
    };
    let gpus = gpus.unwrap_or_else(|| (0..count).collect());
    if count < 2 || gpus.len() < 2 {
        println!(
            "SKIPPED: the multi-GPU tests need two GPUs; the driver sees {count}. Nothing was tested."
        );
        return;
    }
    let opened: Vec<_> = match gpus.iter().map(|&g| bam::Gpu::new(g)).collect() {
        Ok(v) => v,
        Err(e) => {
            println!("FAIL: cannot open GPUs {gpus:?}: {e}");
            std::process::exit(1);
        }
    };
    for g in &opened {
        println!("GPU {}: {} ({} SMs)", g.ordinal(), g.name, g.sms);
    }
    let (mut ran, mut failed) = (0, 0);
    for &b in &backends {
        for o in bam_tests::multi_gpu_suite::run_suite(&opened, b) {
            ran += 1;
            if !o.report("") {
                failed += 1;
            }
        }
    }
    if failed > 0 {
        println!("{failed} of {ran} multi-GPU tests failed");
        std::process::exit(1);
    }
    println!("all {ran} multi-GPU tests passed on GPUs {gpus:?}");
}
