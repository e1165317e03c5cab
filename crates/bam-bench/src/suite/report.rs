//! What the suite reports: one result per variant, one report per kernel, the suite's
//! report, and the events its caller hears while it runs.

use super::options::{CacheProfile, Form, Kernel, Sizes, SuiteOptions, Variant};
use bam::cache::CacheStats;
use bam::Error;
use serde::Serialize;

/// One storage array of a kernel.
#[derive(Clone, Debug, Serialize)]
pub struct ArrayInfo {
    /// Its name in the kernel.
    pub name: String,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Elements.
    pub len: u64,
}

/// The cache of a ported variant.
#[derive(Clone, Debug, Serialize)]
pub struct CacheInfo {
    /// Lines the cache holds.
    pub slots: u32,
    /// Lines of the storage arrays.
    pub data_lines: u64,
    /// Line size.
    pub line_bytes: u32,
    /// Read-ahead of streaming misses, in grid strides (0: off).
    pub readahead: u32,
    /// Where the simulated SSDs keep the data (or the backend, when not simulated).
    pub media: String,
    /// Statistics of the timed runs together.
    pub stats: CacheStats,
    /// hits / (hits + misses) of the timed runs (`None`: hits not counted, see
    /// `CacheConfig::count_hits`).
    pub hit_rate: Option<f64>,
}

/// How long the suite waited, before a variant's timed runs, for the GPU's memory
/// bandwidth to come back after large frees (suite/settle.rs).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Settled {
    /// How long it waited, ms.
    pub waited_ms: f64,
    /// The last reading's rate: decimal GB/s a streaming kernel read from GPU memory.
    pub read_gbps: f64,
    /// The fastest reading of the process, GB/s.
    pub best_gbps: f64,
    /// Whether the last reading was within 3 % of the fastest (false: it waited 3 s and
    /// gave up; the timed runs may be slow).
    pub settled: bool,
}

/// The managed-memory setup of a UVM variant.
#[derive(Clone, Debug, Serialize)]
pub struct UvmInfo {
    /// Nominal data / GPU memory left (2 or 4).
    pub oversubscription: u64,
    /// Bytes of the storage arrays (managed).
    pub data_bytes: u64,
    /// The balloon: GPU memory allocated (cuMemAlloc) and left unused.
    pub balloon_bytes: u64,
    /// Free GPU memory after the balloon (cuMemGetInfo): data / oversubscription plus
    /// the driver's margin.
    pub gpu_free_bytes: u64,
    /// The margin left for the driver ([`UVM_DRIVER_MARGIN`](super::UVM_DRIVER_MARGIN)).
    pub margin_bytes: u64,
    /// Free GPU memory after the managed copy was written (the driver keeps about the
    /// margin free and moves the rest of the data to host memory).
    pub gpu_free_after_fill: u64,
    /// data / (free - margin): the oversubscription the run actually had.
    pub effective_oversubscription: f64,
}

/// The measurement of one variant of one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct VariantResult {
    /// The variant.
    pub variant: Variant,
    /// The kernel form it ran.
    pub form: Form,
    /// Where the storage arrays were.
    pub memory: String,
    /// Timed runs measured.
    pub runs: u32,
    /// Median of the timed runs' times, ms.
    pub ms_median: f64,
    /// Fastest timed run, ms.
    pub ms_min: f64,
    /// Work per timed run (the kernel's `work_unit`s; less than the kernel's `work` when
    /// the UVM time budget stopped a run or the variant does less, see `notes`).
    pub work: u64,
    /// Every timed run did all of its work.
    pub complete: bool,
    /// Work units per second (work / median time; the median of the runs' rates when a
    /// run was cut short).
    pub rate: f64,
    /// Decimal GB/s of storage-array elements read and written (None for bfs).
    pub gbps: Option<f64>,
    /// rate / the hbm variant's rate.
    pub ratio_to_hbm: Option<f64>,
    /// rate / the zerocopy variant's rate.
    pub ratio_to_zerocopy: Option<f64>,
    /// Wrong values (or bins, or distances) found by the checks (must be 0).
    pub wrong: u64,
    /// The cache, for the ported variants.
    pub cache: Option<CacheInfo>,
    /// The managed-memory setup, for the UVM variants.
    pub uvm: Option<UvmInfo>,
    /// The wait for the GPU's memory bandwidth before the timed runs.
    pub settle: Option<Settled>,
    /// Remarks (partial runs, checks that did not apply).
    pub notes: Vec<String>,
    /// Why the variant did not run or did not finish.
    pub error: Option<String>,
}

impl VariantResult {
    /// Records the wait for a quiet GPU before the timed runs, with a note when the GPU
    /// did not get quiet.
    pub(super) fn settled(&mut self, s: Settled) {
        if !s.settled {
            self.notes.push(format!(
                "a streaming read of GPU memory ran at {:.0} GB/s, not back to the process's {:.0} \
                 GB/s after {:.0} ms of waiting (memory work after earlier frees): the timed runs \
                 may be slow",
                s.read_gbps, s.best_gbps, s.waited_ms
            ));
        }
        self.settle = Some(s);
    }

    /// The result of a variant that did not run or did not finish.
    pub(super) fn failed(v: Variant, memory: String, e: &Error) -> Self {
        VariantResult {
            variant: v,
            form: v.form(),
            memory,
            runs: 0,
            ms_median: 0.0,
            ms_min: 0.0,
            work: 0,
            complete: false,
            rate: 0.0,
            gbps: None,
            ratio_to_hbm: None,
            ratio_to_zerocopy: None,
            wrong: 0,
            cache: None,
            uvm: None,
            settle: None,
            notes: vec![],
            error: Some(e.to_string()),
        }
    }
}

/// The variants of one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    /// The kernel.
    pub kernel: Kernel,
    /// What it does.
    pub about: String,
    /// Its storage arrays (the ones that move between variants).
    pub storage: Vec<ArrayInfo>,
    /// Their bytes together.
    pub storage_bytes: u64,
    /// What `work` counts: nonzeros, edges (traversed), reads or elements.
    pub work_unit: String,
    /// Work of one full run.
    pub work: u64,
    /// The cache configuration of its ported variants (the kernel's own unless the
    /// options override it: [`SuiteOptions::cache_profile`]).
    pub cache: CacheProfile,
    /// The variants, in the order they ran.
    pub variants: Vec<VariantResult>,
}

/// The suite's report (what `bam bench kernels --json` prints and `--output` writes).
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// GPU name.
    pub device: String,
    /// SMs.
    pub sms: u32,
    /// The backend of the ported variants.
    pub backend: String,
    /// The commit the binary was built from, when the caller passed it.
    pub commit: Option<String>,
    /// Whether pin_port read through `bam::array<T>::read_pinned` (false: that method was
    /// missing and pin_port used `operator[]`, so bam-pin-hit measured bam-hit's path).
    pub pin_port_uses_read_pinned: bool,
    /// Options.
    pub options: SuiteOptions,
    /// The element counts they gave.
    pub sizes: Sizes,
    /// One report per kernel.
    pub kernels: Vec<KernelReport>,
}

/// What [`run_suite`](super::run_suite) tells its caller while it runs.
pub enum SuiteEvent<'a> {
    /// Generating a kernel's inputs.
    Preparing {
        /// The kernel.
        kernel: Kernel,
    },
    /// A variant starts (`detail`: e.g. the UVM time budget).
    Starting {
        /// The kernel.
        kernel: Kernel,
        /// The variant.
        variant: Variant,
        /// What to expect.
        detail: String,
    },
    /// A variant is done.
    Finished {
        /// The kernel.
        kernel: Kernel,
        /// Its result (with the ratios).
        result: &'a VariantResult,
    },
    /// A kernel is done (every variant).
    KernelDone {
        /// Its report.
        report: &'a KernelReport,
    },
}

/// What the variant runners (variants, ported, uvm) report to `run_kernel`.
pub(super) enum Step {
    Starting(Variant, String),
    Done(Box<VariantResult>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_that_stayed_busy_gets_a_note() {
        let base = || {
            let mut r =
                VariantResult::failed(Variant::Hbm, "m".into(), &Error::Timeout("t".into()));
            r.error = None;
            r
        };
        let wait = |settled| Settled {
            waited_ms: 3000.0,
            read_gbps: 2300.0,
            best_gbps: 2880.0,
            settled,
        };
        let mut r = base();
        r.settled(wait(true));
        assert!(r.notes.is_empty());
        assert!(r.settle.is_some_and(|s| s.settled));
        let mut r = base();
        r.settled(wait(false));
        assert_eq!(r.notes.len(), 1);
        assert!(
            r.notes[0].contains("2300 GB/s, not back to the process's 2880"),
            "{}",
            r.notes[0]
        );
    }
}
