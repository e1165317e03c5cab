//! Runs the GPU test suite (twice by default, in one process, to catch leaked state) on
//! the simulated array and on the host-side controller.
//!
//! `bam-gpu-tests [--rounds N] [--backend sim|hostctl|file|file-direct] [FILTER]`: only tests whose name
//! contains FILTER (names start with `[sim]`, `[hostctl]`, `[file]` or `[file-direct]`), only on one backend. The
//! same case table (`io_suite::cases`) gives the trials `cargo test -p bam-tests --test gpu`.

use bam_tests::TestBackend;

fn main() {
    let mut rounds = 2u32;
    let mut filter = String::new();
    let mut backends = TestBackend::ALL.to_vec();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            rounds = args.next().and_then(|v| v.parse().ok()).unwrap_or(2);
        } else if a == "--backend" {
            match args.next().as_deref().and_then(TestBackend::parse) {
                Some(b) => backends = vec![b],
                None => {
                    eprintln!("--backend takes sim, hostctl, file or file-direct");
                    std::process::exit(2);
                }
            }
        } else {
            filter = a;
        }
    }
    let Some(gpu) = bam_tests::open_test_gpu() else {
        return;
    };
    let mut failed = 0;
    let mut ran = 0;
    for round in 1..=rounds {
        for &b in &backends {
            for o in bam_tests::io_suite::run_filtered(&gpu, b, &filter) {
                ran += 1;
                if !o.report(&format!(" [round {round}]")) {
                    failed += 1;
                }
            }
        }
    }
    if failed > 0 {
        println!("{failed} of {ran} test run(s) failed");
        std::process::exit(1);
    }
    if ran == 0 {
        println!("FAIL: no test matched `{filter}`");
        std::process::exit(1);
    }
    println!("all {ran} GPU test runs passed ({rounds} rounds)");
}
