//! Named trials for `cargo test -p bam-tests` (libtest-mimic, `harness = false`): one
//! trial a case a backend, named `<backend> <case>` (multi-GPU: `multi-gpu <backend>
//! <case>`), so `cargo test -p bam-tests -- 'sim torture'` selects and `-- --list`
//! lists them.
//!
//! The trials run one at a time, in the table's order (the cases fill the GPU and some
//! bound their waits), whatever `--test-threads` says. The GPU is opened, and the test
//! kernels loaded on it, once a process, by the first trial that runs (the kernels load
//! before any simulated array starts: `bam::Module`). Without a GPU the binary prints
//! `SKIPPED: no GPU ...` once and every trial ends *ignored* with that reason: none
//! reports ok without having run. A case a backend cannot run ends ignored with
//! `SKIPPED: needs ...`, what it needs.

use crate::backend::{Outcome, TestBackend};
use crate::case::Case;
use crate::multi_gpu_suite::MultiCase;
use bam::cuda::Gpu;
use bam::Storage;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::sync::{Arc, Mutex, OnceLock};

const NO_GPU: &str = "SKIPPED: no GPU (the CUDA driver is missing or sees no device)";

/// The trials' arguments: the command line's, run one trial at a time.
fn arguments() -> Arguments {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    args
}

/// A trial's end from a case's outcome: its report line printed, ok or failed.
fn conclude(o: Outcome) -> Result<Completion, Failed> {
    o.report("");
    match o.result {
        Ok(_) => Ok(Completion::Completed),
        Err(e) => Err(format!("{}: {e}", o.name).into()),
    }
}

/// GPU 0, opened with the test kernels loaded, once a process: `None` when there is no
/// GPU, the error when it cannot be opened or the kernels not loaded.
fn shared_gpu() -> Option<&'static Result<Arc<Gpu>, String>> {
    static GPU: OnceLock<Option<Result<Arc<Gpu>, String>>> = OnceLock::new();
    GPU.get_or_init(|| {
        if !bam::gpu_available() {
            return None;
        }
        Some(
            Gpu::new(0)
                .map_err(|e| format!("cannot open the GPU: {e}"))
                .and_then(|g| {
                    println!("GPU: {} ({} SMs)", g.name, g.sms);
                    crate::case::load_kernels(&g)
                        .map_err(|e| format!("load the test and benchmark kernels: {e}"))?;
                    Ok(g)
                }),
        )
    })
    .as_ref()
}

fn run_trial(case: &Case, backend: TestBackend) -> Result<Completion, Failed> {
    if let Some(needs) = case.needs {
        return Ok(Completion::ignored_with(format!("SKIPPED: needs {needs}")));
    }
    match shared_gpu() {
        None => Ok(Completion::ignored_with(NO_GPU)),
        Some(Err(e)) => Err(e.as_str().into()),
        Some(Ok(gpu)) => conclude(case.outcome(gpu, backend)),
    }
}

/// The `main` of a single-GPU suite's test binary: a trial `<backend> <case>` for every
/// case of `cases(backend)` on every backend, the simulated array's first.
pub fn single_gpu_main(cases: fn(TestBackend) -> Vec<Case>) -> ! {
    let args = arguments();
    if !args.list && !bam::gpu_available() {
        println!("{NO_GPU}: every trial below is ignored, nothing ran");
    }
    let trials = TestBackend::ALL
        .into_iter()
        .flat_map(|b| {
            cases(b).into_iter().map(move |c| {
                let name = format!("{} {}", b.name(), c.name);
                Trial::ignorable_test(name, move || run_trial(&c, b))
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// The GPUs the driver sees, when there are two or more.
fn gpu_count() -> usize {
    if bam::gpu_available() {
        cudarc::driver::CudaContext::device_count().unwrap_or(0) as usize
    } else {
        0
    }
}

/// Every GPU the driver sees, opened with the kernels loaded, once a process.
fn shared_gpus() -> &'static Result<Vec<Arc<Gpu>>, String> {
    static GPUS: OnceLock<Result<Vec<Arc<Gpu>>, String>> = OnceLock::new();
    GPUS.get_or_init(|| {
        let gpus = (0..gpu_count())
            .map(Gpu::new)
            .collect::<bam::Result<Vec<_>>>()
            .map_err(|e| format!("cannot open the GPUs: {e}"))?;
        for g in &gpus {
            println!("GPU {}: {} ({} SMs)", g.ordinal(), g.name, g.sms);
        }
        crate::multi_gpu_suite::load_kernels(&gpus)
            .map_err(|e| format!("load the test and benchmark kernels: {e}"))?;
        Ok(gpus)
    })
}

/// The backend every GPU shares, built for the first trial of a backend and kept for the
/// next ones of that backend (the cases run in order on one backend, as in
/// `bam-multi-gpu-tests`); dropped when a trial of another backend comes, and at the end.
type Shared = Option<(TestBackend, Result<Arc<dyn Storage>, String>)>;
static SHARED: Mutex<Shared> = Mutex::new(None);

fn run_multi_trial(case: &MultiCase, backend: TestBackend) -> Result<Completion, Failed> {
    let count = gpu_count();
    if count < 2 {
        return Ok(Completion::ignored_with(format!(
            "SKIPPED: needs two GPUs; the driver sees {count}"
        )));
    }
    let gpus = shared_gpus()
        .as_ref()
        .map_err(|e| Failed::from(e.as_str()))?;
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if !matches!(&*shared, Some((b, _)) if *b == backend) {
        *shared = None; // the other backend's, dropped before this one is built
        let arr = crate::multi_gpu_suite::shared_backend(gpus, backend)
            .map(Arc::from)
            .map_err(|e| format!("build one backend for every GPU: {e}"));
        *shared = Some((backend, arr));
    }
    let Some((_, arr)) = &*shared else {
        unreachable!("built above")
    };
    let arr = arr.as_ref().map_err(|e| Failed::from(e.as_str()))?;
    let t0 = std::time::Instant::now();
    let result = (case.run)(&**arr, backend);
    conclude(Outcome {
        name: crate::multi_gpu_suite::label(backend, gpus.len(), case.name),
        result,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The `main` of the multi-GPU test binary: a trial `multi-gpu <backend> <case>` for every
/// case on every backend; ignored (SKIPPED, with the count) with fewer than two GPUs.
pub fn multi_gpu_main() -> ! {
    let args = arguments();
    if !args.list {
        let count = gpu_count();
        if count < 2 {
            println!(
                "SKIPPED: the multi-GPU suite needs two GPUs; the driver sees {count}: every trial below is ignored, nothing ran"
            );
        }
    }
    let trials = TestBackend::MULTI_GPU
        .into_iter()
        .flat_map(|b| {
            crate::multi_gpu_suite::cases().into_iter().map(move |c| {
                let name = format!("multi-gpu {} {}", b.name(), c.name);
                Trial::ignorable_test(name, move || run_multi_trial(&c, b))
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    *SHARED.lock().unwrap_or_else(|p| p.into_inner()) = None;
    conclusion.exit()
}
