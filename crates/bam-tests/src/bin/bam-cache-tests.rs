//! Runs the cache's GPU test suite.
//!
//! `bam-cache-tests [sim] [hostctl] [file] [file-direct]`: on the backends named (default: all).
//! `bam-cache-tests --soak OPS [sim|hostctl|file|file-direct]`: the soak (torture runs with fresh seeds,
//! each followed by a write-heavy phase of users' loads or GPU stores with write-back
//! until OPS element operations, fault tests every 10 runs), one line per run.
//! `bam-cache-tests --scenario [SIZES] [RUNS]`: users' loads of two striped arrays of
//! each size (default 134M,537M,1.07G; 20 runs each) on `sim:ideal,ssds=8,media=host`,
//! loaded, flushed and read back (`bam_tests::bulk`).
//! `bam-cache-tests --stress [BYTES] [RUNS] [FILTER]`: the stress matrix (media, queues,
//! depth, SSDs, lines, layouts; loads and GPU stores) at BYTES per array (default 1G),
//! RUNS times each (default 1), the cases whose label contains FILTER; a table at the end.
//! Both write their table as JSON to `$BAM_STRESS_JSON` when it is set.
//! `BAM_CACHE_TEST=substring` runs only the tests whose name contains it (the same case
//! table, `cache_suite::cases`, gives the trials `cargo test -p bam-tests --test cache_gpu`). The cache study
//! (bandwidth, latency) is `bam bench cache`.

use bam_tests::cache_suite::run_suite;
use bam_tests::TestBackend;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--soak") => return soak(&args[1..]),
        Some("--scenario") => return scenario(&args[1..]),
        Some("--stress") => return stress(&args[1..]),
        _ => {}
    }
    let mut backends = Vec::new();
    for a in args {
        match TestBackend::parse(&a) {
            Some(b) => backends.push(b),
            None => {
                eprintln!("usage: bam-cache-tests [sim] [hostctl] [file] [file-direct] (unknown backend `{a}`)");
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
        eprintln!("usage: bam-cache-tests --soak OPS [sim|hostctl|file|file-direct]");
        std::process::exit(2);
    };
    let backend = match args.get(1) {
        None => TestBackend::Sim,
        Some(b) => TestBackend::parse(b).unwrap_or_else(|| {
            eprintln!("unknown backend `{b}` (sim, hostctl, file, file-direct)");
            std::process::exit(2)
        }),
    };
    let Some(gpu) = bam_tests::open_test_gpu() else {
        return;
    };
    let r = bam_tests::cache_suite::soak(&gpu, backend, ops, 10, &mut |r| {
        println!(
            "soak: run {} done: {} ops, {} misses (SSD reads), {} write-backs, {} write-heavy phases ({} elements verified), {} fault rounds, {:.0} s",
            r.runs, r.ops, r.misses, r.writebacks, r.write_phases, r.write_phase_elements, r.fault_rounds, r.seconds
        )
    });
    match r {
        Ok(r) => println!(
            "PASS soak [{}]: {} verified element operations in {} torture runs ({:.0} s in kernels, {:.0} s in all): {} line misses, {} write-backs, {} evictions, 0 mismatches; {} write-heavy phases, {} elements read back and verified; {} rounds of injected media errors and stalls passed",
            backend.name(), r.ops, r.runs, r.kernel_s, r.seconds, r.misses, r.writebacks, r.evictions, r.write_phases, r.write_phase_elements, r.fault_rounds
        ),
        Err(e) => {
            println!("FAIL soak [{}]: {e}", backend.name());
            std::process::exit(1);
        }
    }
}

fn parse_bytes(s: &str) -> u64 {
    let (num, mul) = match s.as_bytes().last() {
        Some(b'G') => (&s[..s.len() - 1], 1e9),
        Some(b'M') => (&s[..s.len() - 1], 1e6),
        Some(b'K') => (&s[..s.len() - 1], 1e3),
        _ => (s, 1.0),
    };
    match num.parse::<f64>() {
        Ok(x) if x > 0.0 => ((x * mul) as u64).next_multiple_of(4096),
        _ => {
            eprintln!("bad size `{s}` (e.g. 134M, 1.07G)");
            std::process::exit(2)
        }
    }
}

fn scenario(args: &[String]) {
    let sizes: Vec<u64> = args
        .first()
        .map_or("134M,537M,1.07G", String::as_str)
        .split(',')
        .map(parse_bytes)
        .collect();
    let runs = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let Some(gpu) = bam_tests::open_test_gpu() else {
        return;
    };
    let cases: Vec<_> = sizes
        .iter()
        .map(|&b| bam_tests::bulk::BulkCase::scenario(b))
        .collect();
    let json = std::env::var_os("BAM_STRESS_JSON").map(std::path::PathBuf::from);
    let failed = bam_tests::bulk::stress(&gpu, &cases, runs, 0x5eed, json.as_deref());
    if failed > 0 {
        std::process::exit(1);
    }
}

fn stress(args: &[String]) {
    let bytes = args
        .first()
        .map_or(1_000_000_000u64.next_multiple_of(4096), |s| parse_bytes(s));
    let runs = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let filter = args.get(2).cloned().unwrap_or_default();
    let Some(gpu) = bam_tests::open_test_gpu() else {
        return;
    };
    let cases: Vec<_> = bam_tests::bulk::matrix(bytes)
        .into_iter()
        .filter(|c| c.label().contains(&filter))
        .collect();
    let json = std::env::var_os("BAM_STRESS_JSON").map(std::path::PathBuf::from);
    let failed = bam_tests::bulk::stress(&gpu, &cases, runs, 0x57e55, json.as_deref());
    if failed > 0 {
        std::process::exit(1);
    }
}
