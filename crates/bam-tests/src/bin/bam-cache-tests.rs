//! Runs the cache's GPU test suite.
//!
//! `bam-cache-tests [sim] [hostctl]`: on the backends named (default: both).
//! `BAM_CACHE_TEST=substring` runs only the tests whose name contains it. The cache study
//! (bandwidth, latency) is `bam bench cache`.

use bam_tests::cache_suite::run_suite;
use bam_tests::TestBackend;

fn main() {
    let mut backends = Vec::new();
    for a in std::env::args().skip(1) {
        match TestBackend::parse(&a) {
            Some(b) => backends.push(b),
            None => {
                eprintln!("usage: bam-cache-tests [sim] [hostctl] (unknown backend `{a}`)");
                std::process::exit(2);
            }
        }
    }
    if backends.is_empty() {
        backends = TestBackend::ALL.to_vec();
    }
    let Some(gpu) = bam_tests::open_test_gpu() else {
        return;
    };
    let mut failed = 0;
    let mut ran = 0;
    for b in backends {
        for o in run_suite(&gpu, b) {
            ran += 1;
            if !o.report("") {
                failed += 1;
            }
        }
    }
    if failed > 0 {
        println!("{failed} cache test(s) failed");
        std::process::exit(1);
    }
    if ran == 0 {
        println!("FAIL: no cache test matched BAM_CACHE_TEST");
        std::process::exit(1);
    }
    println!("all cache tests passed");
}
