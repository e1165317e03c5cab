//! The cache's GPU tests and benchmark:
//!   bam-cache test [BACKEND...]    run the cache test suite on the backends named
//!                                  (sim, hostctl; default: both)
//!   bam-cache bench [OUT.json]     the cache study (hit/miss bandwidth, miss latency);
//!                                  `bam bench cache` runs the same study with flags

use bam::cache::bench::{run_cache_bench, CacheBenchOptions};
use bam::cache::selftest::run_suite;
use bam::selftest::TestBackend;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Load kernels when modules are loaded, not on first use (see bam::cache::Module::load_with).
    if std::env::var_os("CUDA_MODULE_LOADING").is_none() {
        std::env::set_var("CUDA_MODULE_LOADING", "EAGER");
    }
    let Some(gpu) = bam::selftest::open_test_gpu() else {
        return;
    };
    match args.get(1).map(String::as_str) {
        Some("test") => {
            let mut backends = Vec::new();
            for a in &args[2..] {
                match TestBackend::parse(a) {
                    Some(b) => backends.push(b),
                    None => {
                        eprintln!("unknown backend `{a}` (sim, hostctl)");
                        std::process::exit(2);
                    }
                }
            }
            if backends.is_empty() {
                backends = TestBackend::ALL.to_vec();
            }
            let mut failed = 0;
            for b in backends {
                for o in run_suite(&gpu, b) {
                    if !o.report("") {
                        failed += 1;
                    }
                }
            }
            if failed > 0 {
                println!("{failed} cache test(s) failed");
                std::process::exit(1);
            }
            println!("all cache tests passed");
        }
        Some("bench") => {
            // The same options and checks as `bam bench cache` (which takes them as flags).
            let o = CacheBenchOptions::from_env();
            if let Err(e) = o.validate() {
                eprintln!("FAIL: cache bench options (BAM_CACHE_BENCH_*): {e}");
                std::process::exit(2);
            }
            // BAM_CACHE_BENCH_DEVICE: the backend (default sim; see bam::device).
            let dev = std::env::var("BAM_CACHE_BENCH_DEVICE").unwrap_or_else(|_| "sim".into());
            let device: bam::device::GpuDevice = match dev.parse() {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("FAIL: BAM_CACHE_BENCH_DEVICE={dev}: {e}");
                    std::process::exit(2);
                }
            };
            let r = run_cache_bench(&gpu, &o, &device, &mut |p| {
                println!(
                    "{:<4} {:<6} threads {:>7}: cache {:>8.1} GB/s  raw {:>8.1} GB/s  ratio {:.3}  wrong {}  hits {} misses {}",
                    p.study, p.pattern, p.threads, p.cache_gbps, p.raw_gbps, p.ratio, p.wrong_values, p.stats.hits, p.stats.misses
                )
            });
            match r {
                Ok(mut r) => {
                    let l = &r.miss_latency;
                    println!("miss latency, one warp, {} B line: p50 {:.2} us  p99 {:.2} us  min {:.2} us  mean {:.2} us", l.line_bytes, l.p50_us, l.p99_us, l.min_us, l.mean_us);
                    let mut v = serde_json::to_value(&mut r).expect("json");
                    v["commit"] = std::env::var("BAM_COMMIT").unwrap_or_default().into();
                    v["command"] = args.join(" ").into();
                    let text = serde_json::to_string_pretty(&v).expect("json");
                    if let Some(path) = args.get(2) {
                        std::fs::write(path, text).expect("write report");
                    } else {
                        println!("{text}");
                    }
                }
                Err(e) => {
                    println!("FAIL: cache bench: {e}");
                    std::process::exit(1);
                }
            }
        }
        _ => {
            eprintln!("usage: bam-cache test [sim] [hostctl] | bench [OUT.json]");
            std::process::exit(2);
        }
    }
}
