//! What the bam examples share: the metadata every JSON result carries (command, commit,
//! GPU, time), progress bars, human count/size arguments (`1e9`, `100M`, `1GiB`) and
//! best-of-N timing.

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::time::Instant;

/// Where and how a result was measured.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    /// The command line.
    pub command: String,
    /// The commit the binary was built from (`BAM_COMMIT`, else `git rev-parse HEAD`;
    /// "dirty" is appended by the build script when the tree differed).
    pub commit: String,
    /// The GPU's name, as the driver reports it.
    pub gpu: String,
    /// UTC time of the run (seconds since the epoch).
    pub unix_time: u64,
    /// Host CPUs available to the process.
    pub host_cpus: usize,
}

impl RunInfo {
    /// Metadata of this process's run on `gpu` (a name).
    pub fn new(gpu: &str) -> Self {
        let commit = std::env::var("BAM_COMMIT").ok().unwrap_or_else(|| {
            std::process::Command::new("git")
                .args(["rev-parse", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_else(|| "unknown".into())
        });
        RunInfo {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            commit: commit.trim().to_string(),
            gpu: gpu.to_string(),
            unix_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            host_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// A count such as `1000000`, `1e9`, `250M`, `2G` (decimal suffixes K, M, G, T).
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1e3),
        Some('M' | 'm') => (&t[..t.len() - 1], 1e6),
        Some('G' | 'g') => (&t[..t.len() - 1], 1e9),
        Some('T' | 't') => (&t[..t.len() - 1], 1e12),
        _ => (&t[..], 1.0),
    };
    if let Ok(v) = num.parse::<u64>() {
        return v
            .checked_mul(mult as u64)
            .ok_or_else(|| format!("{s}: too large"));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s}: not a count (examples: 1000000, 1e9, 250M)"))?;
    let v = v * mult;
    if !(0.0..1.8e19).contains(&v) || v.fract() != 0.0 {
        return Err(format!("{s}: not a whole, non-negative count"));
    }
    Ok(v as u64)
}

/// A size in bytes such as `4096`, `512K`, `1M`, `1MiB`, `2G` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let stripped = lower.trim_end_matches("ib").trim_end_matches('b');
    let (num, shift) = match stripped.chars().last() {
        Some('k') => (&stripped[..stripped.len() - 1], 10),
        Some('m') => (&stripped[..stripped.len() - 1], 20),
        Some('g') => (&stripped[..stripped.len() - 1], 30),
        _ => (stripped, 0),
    };
    let v: u64 = num
        .parse()
        .map_err(|_| format!("{s}: not a size (examples: 4096, 512K, 1MiB)"))?;
    v.checked_shl(shift)
        .filter(|r| r >> shift == v)
        .ok_or_else(|| format!("{s}: too large"))
}

/// A progress bar over `total` units (`bytes`: shown as sizes and rates), drawn on
/// stderr when it is a terminal (hidden in logs).
pub fn progress(total: u64, what: &str, bytes: bool) -> ProgressBar {
    let pb = ProgressBar::new(total);
    let tmpl = if bytes {
        "{msg:>12} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
    } else {
        "{msg:>12} [{bar:40}] {human_pos}/{human_len} {per_sec} eta {eta}"
    };
    if let Ok(st) = ProgressStyle::with_template(tmpl) {
        pb.set_style(st.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}

/// Times of `runs` repetitions of `f` (seconds), each after `prepare` (untimed).
pub fn time_runs<P, F>(runs: u32, mut prepare: P, mut f: F) -> anyhow::Result<Vec<f64>>
where
    P: FnMut() -> anyhow::Result<()>,
    F: FnMut() -> anyhow::Result<()>,
{
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        prepare()?;
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(times)
}

/// The smallest of `times` (`f64::NAN` when empty).
pub fn best(times: &[f64]) -> f64 {
    times.iter().copied().fold(f64::NAN, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_count("250M"), Ok(250_000_000));
        assert_eq!(parse_count("1_000"), Ok(1000));
        assert_eq!(parse_count("2.5K"), Ok(2500));
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("-3").is_err());
        assert!(parse_count("lots").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("1.5M").is_err());
        assert!(parse_size("99999999999G").is_err());
    }

    #[test]
    fn best_of_runs() {
        assert_eq!(best(&[3.0, 1.0, 2.0]), 1.0);
        assert!(best(&[]).is_nan());
        let mut n = 0;
        let t = time_runs(
            3,
            || Ok(()),
            || {
                n += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!((t.len(), n), (3, 3));
    }
}
