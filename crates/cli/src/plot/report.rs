//! The reports `bam plot` draws, as the plot reads them: the fields it draws of each
//! report kind, deserialised from the JSON that `bam bench`, `bench cache` and `bench
//! kernels` write (or from their typed reports through serde). These mirror the
//! producers' types (which live in crates the CLI has only with the `gpu` feature);
//! every field but the one that tells the kinds apart may be absent or null, as in
//! older reports.

use serde::{Deserialize, Deserializer, Serialize};

/// A benchmark report of one of the three kinds, told apart by the field each has:
/// `jobs`, `points` or `kernels` (tried in that order).
#[derive(Deserialize, Debug)]
#[serde(untagged)]
pub enum Report {
    /// `bam bench`.
    Raw(RawReport),
    /// `bam bench cache`.
    Cache(CacheReport),
    /// `bam bench kernels`.
    Kernels(KernelsReport),
}

/// Why a JSON value is none of the reports.
pub const NOT_A_REPORT: &str = "not a report of `bam bench` (no \"jobs\"), `bam bench cache` \
                                (no \"points\") or `bam bench kernels` (no \"kernels\")";

impl Report {
    /// The report in `v`, or why it is none.
    pub fn from_value(v: serde_json::Value) -> Result<Report, String> {
        Report::deserialize(v).map_err(|_| NOT_A_REPORT.to_string())
    }

    /// The report a benchmark just produced (its typed report, through serde's data
    /// model; no text in between).
    #[cfg_attr(not(feature = "gpu"), allow(dead_code))] // the benchmarks need the GPU feature
    pub fn from_serialize<R: Serialize>(report: &R) -> Result<Report, String> {
        let v = serde_json::to_value(report).map_err(|e| e.to_string())?;
        Report::from_value(v)
    }
}

/// A missing or null value as its type's default (the plot draws 0, "?" or nothing).
fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Where a report came from, as its title shows it.
#[derive(Deserialize, Debug, Default)]
pub struct Origin {
    /// The GPU (`bam bench`: "NAME (N SMs)").
    pub gpu: Option<String>,
    /// `bam bench`: the device string; `bench cache` and `bench kernels`: the GPU's name.
    pub device: Option<String>,
    /// The commit the binary was built from.
    pub commit: Option<String>,
}

/// `bam bench`'s report (one GPU; a multi-GPU report has `jobs` too, of another shape,
/// and draws as zeros).
#[derive(Deserialize, Debug)]
pub struct RawReport {
    pub jobs: Vec<RawJob>,
    #[serde(flatten)]
    pub origin: Origin,
}

/// One job of a `bam bench` report.
#[derive(Deserialize, Debug, Default)]
pub struct RawJob {
    #[serde(default, deserialize_with = "or_default")]
    pub job: JobSpec,
    #[serde(default, deserialize_with = "or_default")]
    pub iops: f64,
    #[serde(default, deserialize_with = "or_default")]
    pub latency: Latency,
}

/// What a job ran: its pattern, block size and point of the sweeps.
#[derive(Deserialize, Debug, Default)]
pub struct JobSpec {
    pub rw: Option<String>,
    pub bs: Option<u64>,
    #[serde(default, deserialize_with = "or_default")]
    pub threads: f64,
    #[serde(default, deserialize_with = "or_default")]
    pub queues: f64,
    #[serde(default, deserialize_with = "or_default")]
    pub ssds: f64,
}

/// A job's latency per I/O.
#[derive(Deserialize, Debug, Default)]
pub struct Latency {
    #[serde(default, deserialize_with = "or_default")]
    pub mean_us: f64,
    #[serde(default, deserialize_with = "or_default")]
    pub p99_us: f64,
}

/// `bam bench cache`'s report.
#[derive(Deserialize, Debug)]
pub struct CacheReport {
    pub points: Vec<CachePoint>,
    #[serde(default, deserialize_with = "or_default")]
    pub options: CacheOptions,
    #[serde(flatten)]
    pub origin: Origin,
}

/// The options of a cache study, as far as the plot shows them.
#[derive(Deserialize, Debug, Default)]
pub struct CacheOptions {
    #[serde(default, deserialize_with = "or_default")]
    pub line_bytes: u64,
}

/// One point of a cache study: cache and raw bandwidth of a pattern at a thread count.
#[derive(Deserialize, Debug, Default)]
pub struct CachePoint {
    pub study: Option<String>,
    pub pattern: Option<String>,
    #[serde(default, deserialize_with = "or_default")]
    pub threads: u64,
    #[serde(default, deserialize_with = "or_default")]
    pub cache_gbps: f64,
    #[serde(default, deserialize_with = "or_default")]
    pub raw_gbps: f64,
}

/// `bam bench kernels`' report (or what `--output` holds while it runs).
#[derive(Deserialize, Debug)]
pub struct KernelsReport {
    pub kernels: Vec<KernelEntry>,
    #[serde(flatten)]
    pub origin: Origin,
}

/// One kernel of the suite and its variants.
#[derive(Deserialize, Debug, Default)]
pub struct KernelEntry {
    pub kernel: Option<String>,
    /// The cache profile of its ported variants (reports since the per-kernel profiles).
    pub cache: Option<CacheProfile>,
    #[serde(default, deserialize_with = "or_default")]
    pub variants: Vec<VariantEntry>,
}

/// The cache of a kernel's ported variants.
#[derive(Deserialize, Debug, Default)]
pub struct CacheProfile {
    pub line_bytes: Option<u64>,
}

/// One variant of a kernel: its rate relative to hbm (none when it failed).
#[derive(Deserialize, Debug, Default)]
pub struct VariantEntry {
    pub variant: Option<String>,
    pub ratio_to_hbm: Option<f64>,
    /// False when the time budget cut its runs.
    pub complete: Option<bool>,
}
