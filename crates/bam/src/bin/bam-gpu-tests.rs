//! Runs the GPU test suite (twice by default, in one process, to catch leaked state).
//!
//! `bam-gpu-tests [--rounds N] [FILTER]`: only tests whose name contains FILTER.

fn main() {
    let mut rounds = 2u32;
    let mut filter = String::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            rounds = args.next().and_then(|v| v.parse().ok()).unwrap_or(2);
        } else {
            filter = a;
        }
    }
    let Some(gpu) = bam::selftest::open_test_gpu() else {
        return;
    };
    let mut failed = 0;
    let mut ran = 0;
    for round in 1..=rounds {
        for o in bam::selftest::run_filtered(&gpu, &filter) {
            ran += 1;
            if !o.report(&format!(" [round {round}]")) {
                failed += 1;
            }
        }
    }
    if failed > 0 {
        println!("{failed} of {ran} test run(s) failed");
        std::process::exit(1);
    }
    println!("all {ran} GPU test runs passed ({rounds} rounds)");
}
