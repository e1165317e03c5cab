//! One JSON line per case, and the clock it is measured with (wall time and this
//! process's CPU time from `getrusage(RUSAGE_SELF)`).

use serde::Serialize;
use std::time::Instant;

/// What one case prints: its shape, then what it measured.
#[derive(Serialize, Debug)]
pub struct Report {
    #[serde(flatten)]
    pub case: Case,
    pub ops: u64,
    pub seconds: f64,
    pub iops: f64,
    /// Decimal GB/s.
    pub gbps: f64,
    /// (user + system CPU time) / wall time.
    pub cpu_cores_busy: f64,
    /// cpu_cores_busy per million reads a second (null when nothing was read).
    pub cores_per_miops: Option<f64>,
    /// Pieces that differed from the pattern (with `--verify` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_errors: Option<u64>,
}

/// What a case measured, before it is named.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub ops: u64,
    pub wall_s: f64,
    pub cpu_s: f64,
}

/// The shape of a case, for its line.
#[derive(Serialize, Debug)]
pub struct Case {
    pub peer: &'static str,
    pub mode: &'static str,
    pub direct: bool,
    pub threads: usize,
    /// Reads in flight per thread.
    pub depth: usize,
    pub bs: u64,
}

impl Report {
    /// The line for `case` from what was measured.
    pub fn new(case: Case, m: Measured, verify_errors: Option<u64>) -> Report {
        let secs = m.wall_s.max(1e-9);
        let iops = m.ops as f64 / secs;
        let busy = m.cpu_s / secs;
        let gbps = round(iops * case.bs as f64 / 1e9, 4);
        Report {
            case,
            ops: m.ops,
            seconds: round(secs, 4),
            iops: round(iops, 1),
            gbps,
            cpu_cores_busy: round(busy, 3),
            cores_per_miops: (m.ops > 0).then(|| round(busy / (iops / 1e6), 3)),
            verify_errors,
        }
    }

    /// The JSON line.
    pub fn line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// Wall and CPU time from a starting point.
pub struct Clock {
    wall: Instant,
    cpu: f64,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            wall: Instant::now(),
            cpu: cpu_seconds(),
        }
    }

    /// (wall seconds, CPU seconds) since the start.
    pub fn elapsed(&self) -> (f64, f64) {
        (self.wall.elapsed().as_secs_f64(), cpu_seconds() - self.cpu)
    }
}

/// User + system CPU seconds of this process so far, every thread included.
fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain data that getrusage fills; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: FFI call with a valid pointer to a rusage that lives across the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_every_field() {
        let case = Case {
            peer: "uring",
            mode: "randread",
            direct: false,
            threads: 2,
            depth: 32,
            bs: 4096,
        };
        let m = Measured {
            ops: 2_000_000,
            wall_s: 2.0,
            cpu_s: 3.0,
        };
        let v: serde_json::Value =
            serde_json::from_str(&Report::new(case, m, None).line()).expect("json");
        assert_eq!(v["iops"], 1_000_000.0);
        assert_eq!(v["gbps"], 4.096);
        assert_eq!(v["cpu_cores_busy"], 1.5);
        assert_eq!(v["cores_per_miops"], 1.5);
        assert!(v.get("verify_errors").is_none());
    }
}
