//! Runs the cache's GPU test suite.
//!
//! `bam-cache-tests [sim] [hostctl]`: on the backends named (default: both).
//! `bam-cache-tests --soak OPS [sim|hostctl]`: the soak (torture runs with fresh seeds
//! until OPS element operations, fault tests every 10 runs), one line per run.
//! `BAM_CACHE_TEST=substring` runs only the tests whose name contains it. The cache study
//! (bandwidth, latency) is `bam bench cache`.

use bam_tests::cache_suite::run_suite;
use bam_tests::TestBackend;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--soak") {
        soak(&args[1..]);
        return;
    }
    let mut backends = Vec::new();
    for a in args {
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

fn soak(args: &[String]) {
    let Some(ops) = args.first().and_then(|s| s.parse::<u64>().ok()) else {
        eprintln!("usage: bam-cache-tests --soak OPS [sim|hostctl]");
        std::process::exit(2);
    };
    let backend = match args.get(1) {
        None => TestBackend::Sim,
        Some(b) => TestBackend::parse(b).unwrap_or_else(|| {
            eprintln!("unknown backend `{b}` (sim, hostctl)");
            std::process::exit(2)
        }),
    };
    let Some(gpu) = bam_tests::open_test_gpu() else {
        return;
    };
    let r = bam_tests::cache_suite::soak(&gpu, backend, ops, 10, &mut |r| {
        println!(
            "soak: run {} done: {} ops, {} misses (SSD reads), {} write-backs, {} fault rounds, {:.0} s",
            r.runs, r.ops, r.misses, r.writebacks, r.fault_rounds, r.seconds
        )
    });
    match r {
        Ok(r) => println!(
            "PASS soak [{}]: {} verified element operations in {} torture runs ({:.0} s in kernels, {:.0} s in all): {} line misses, {} write-backs, {} evictions, 0 mismatches; {} rounds of injected media errors and stalls passed",
            backend.name(), r.ops, r.runs, r.kernel_s, r.seconds, r.misses, r.writebacks, r.evictions, r.fault_rounds
        ),
        Err(e) => {
            println!("FAIL soak [{}]: {e}", backend.name());
            std::process::exit(1);
        }
    }
}
