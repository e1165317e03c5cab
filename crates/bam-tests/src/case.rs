//! The one case table of the single-GPU suites: every case a name, what a backend lacks to
//! run it (then it is SKIPPED there, with that reason), and the function that runs it.
//!
//! Each suite builds its table for one backend (`io_suite::cases`, `cache_suite::cases`):
//! some names say how much a case does there (the torture's operations a thread), and the
//! host-side controller runs a sample of the type matrix, so a table is per backend; a
//! case a backend cannot run is still in its table, marked [`Case::sim_only`]. The same
//! tables feed the named trials of `cargo test -p bam-tests` ([`crate::harness`]: one
//! trial `<backend> <case>` a case) and the runners `bam-gpu-tests` and `bam-cache-tests`
//! ([`run_cases`]).

use crate::backend::{Outcome, TestBackend};
use bam::cuda::Gpu;
use bam::Result;
use std::sync::Arc;
use std::time::Instant;

/// What a case runs: on a GPU (with the test kernels loaded) and a backend.
pub type CaseFn = Box<dyn Fn(&Arc<Gpu>, TestBackend) -> Result<String> + Send + Sync>;

/// One case of a suite on one backend.
pub struct Case {
    /// The case's name (the same on every backend where the case does the same).
    pub name: String,
    /// What the backend lacks to run it (`SKIPPED [backend] name: needs ...`), or `None`.
    pub needs: Option<&'static str>,
    /// Runs it: the detail line of a pass, or the check that did not hold.
    pub run: CaseFn,
}

impl Case {
    /// A case every backend runs.
    pub fn new(
        name: impl Into<String>,
        run: impl Fn(&Arc<Gpu>, TestBackend) -> Result<String> + Send + Sync + 'static,
    ) -> Case {
        Case {
            name: name.into(),
            needs: None,
            run: Box::new(run),
        }
    }

    /// Runs only on the simulated array: on `backend`, when it is another, the case is
    /// SKIPPED because it `needs` what only the simulated array has.
    pub fn sim_only(self, backend: TestBackend, needs: &'static str) -> Case {
        self.only_on(TestBackend::Sim, backend, needs)
    }

    /// Runs only on `on`: on `backend`, when it is another, the case is SKIPPED because it
    /// `needs` what only `on` has.
    pub fn only_on(mut self, on: TestBackend, backend: TestBackend, needs: &'static str) -> Case {
        if backend != on {
            self.needs = Some(needs);
        }
        self
    }

    /// `[backend] name`, the name in the runners' report lines and filters.
    pub fn label(&self, backend: TestBackend) -> String {
        format!("[{}] {}", backend.name(), self.name)
    }

    /// `SKIPPED [backend] name: needs ...` when `backend` cannot run the case.
    pub fn skipped_line(&self, backend: TestBackend) -> Option<String> {
        self.needs
            .map(|n| format!("SKIPPED {}: needs {n}", self.label(backend)))
    }

    /// Runs the case on `gpu` and `backend` (the test kernels loaded already) and times it.
    pub fn outcome(&self, gpu: &Arc<Gpu>, backend: TestBackend) -> Outcome {
        let t0 = Instant::now();
        let result = (self.run)(gpu, backend);
        Outcome {
            name: self.label(backend),
            result,
            seconds: t0.elapsed().as_secs_f64(),
        }
    }
}

/// Loads the test and benchmark kernels on `gpu`: before any simulated array starts
/// (`bam::Module`), so before the first case.
pub fn load_kernels(gpu: &Arc<Gpu>) -> Result<()> {
    crate::kernels(gpu).and_then(|_| bam_bench::kernels(gpu))?;
    Ok(())
}

/// Runs, in order, the cases of `cases` (a suite's table for `backend`) whose label
/// contains `filter`, after loading the kernels (a failed load is the one outcome, named
/// `load_name`); a case `backend` cannot run prints its SKIPPED line instead. With
/// `progress` each case's start and end go to stderr (`cache test: ...`).
pub fn run_cases(
    gpu: &Arc<Gpu>,
    backend: TestBackend,
    cases: &[Case],
    filter: &str,
    load_name: &str,
    progress: bool,
) -> Vec<Outcome> {
    if let Err(e) = load_kernels(gpu) {
        return vec![Outcome {
            name: load_name.into(),
            result: Err(e),
            seconds: 0.0,
        }];
    }
    let mut out = Vec::new();
    for c in cases {
        let label = c.label(backend);
        if !label.contains(filter) {
            continue;
        }
        if let Some(line) = c.skipped_line(backend) {
            println!("{line}");
            continue;
        }
        if progress {
            eprintln!("cache test: {label} ...");
        }
        let o = c.outcome(gpu, backend);
        if progress {
            eprintln!("cache test: {label}: {:?}", o.result.as_ref().map(|_| "ok"));
        }
        out.push(o);
    }
    out
}
