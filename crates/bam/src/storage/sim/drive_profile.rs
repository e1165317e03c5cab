//! Drive profiles of the simulated SSDs (performance and geometry; not to be confused
//! with `bam_nvme::model`, the controller emulator that runs them). Figures and their
//! sources: docs/simulated-ssd.md.

use serde::Serialize;

/// Performance and geometry of one simulated SSD.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DriveProfile {
    /// Preset name.
    pub name: String,
    /// Logical block size in bytes (512 or 4096).
    pub lba_size: u32,
    /// Maximum data transfer size in bytes (a power of two >= 4096), 0 = no limit.
    pub mdts_bytes: u32,
    /// I/O queue pairs the controller grants.
    pub max_queues: u16,
    /// Largest queue (CAP.MQES + 1).
    pub max_depth: u32,
    /// Read latency in ns (device time, without queueing).
    pub lat_read_ns: u64,
    /// Write latency in ns.
    pub lat_write_ns: u64,
    /// Read IOPS cap (0 = none).
    pub iops_read: u64,
    /// Write IOPS cap (0 = none).
    pub iops_write: u64,
    /// Read bandwidth cap in bytes/s (0 = none).
    pub bw_read: u64,
    /// Write bandwidth cap in bytes/s (0 = none).
    pub bw_write: u64,
}

impl DriveProfile {
    /// No modelled limit: measures the software stack alone.
    pub fn ideal() -> Self {
        DriveProfile {
            name: "ideal".into(),
            lba_size: 512,
            mdts_bytes: 1 << 21,
            max_queues: 1024,
            max_depth: 65536,
            lat_read_ns: 0,
            lat_write_ns: 0,
            iops_read: 0,
            iops_write: 0,
            bw_read: 0,
            bw_write: 0,
        }
    }

    /// Intel Optane SSD DC P5800X (1.6 TB).
    pub fn optane_p5800x() -> Self {
        DriveProfile {
            name: "optane-p5800x".into(),
            lba_size: 512,
            mdts_bytes: 128 << 10,
            max_queues: 128,
            max_depth: 4096,
            lat_read_ns: 6_000,
            lat_write_ns: 6_000,
            iops_read: 5_100_000,
            iops_write: 1_500_000,
            bw_read: 7_200_000_000,
            bw_write: 6_200_000_000,
        }
    }

    /// Samsung 980 PRO (1 TB).
    pub fn samsung_980pro() -> Self {
        DriveProfile {
            name: "samsung-980pro".into(),
            lba_size: 512,
            mdts_bytes: 512 << 10,
            max_queues: 128,
            max_depth: 1024,
            lat_read_ns: 60_000,
            lat_write_ns: 20_000,
            iops_read: 1_000_000,
            iops_write: 1_000_000,
            bw_read: 7_000_000_000,
            bw_write: 5_000_000_000,
        }
    }

    /// Samsung PM1743 (PCIe 5.0, 7.68 TB).
    pub fn pm1743() -> Self {
        DriveProfile {
            name: "pm1743".into(),
            lba_size: 4096,
            mdts_bytes: 512 << 10,
            max_queues: 128,
            max_depth: 4096,
            lat_read_ns: 80_000,
            lat_write_ns: 15_000,
            iops_read: 2_500_000,
            iops_write: 250_000,
            bw_read: 13_000_000_000,
            bw_write: 6_600_000_000,
        }
    }

    /// A preset by name.
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "ideal" => Some(Self::ideal()),
            "optane-p5800x" | "p5800x" | "optane" => Some(Self::optane_p5800x()),
            "samsung-980pro" | "980pro" => Some(Self::samsung_980pro()),
            "pm1743" => Some(Self::pm1743()),
            _ => None,
        }
    }

    /// Names of the presets.
    pub const PRESETS: &'static [&'static str] =
        &["ideal", "optane-p5800x", "samsung-980pro", "pm1743"];

    /// Modelled time of one command of `bytes` in ps (1 / rate cap), 0 without caps.
    pub fn cost_ps(&self, write: bool, bytes: u64) -> u64 {
        let (iops, bw) = if write {
            (self.iops_write, self.bw_write)
        } else {
            (self.iops_read, self.bw_read)
        };
        let per_cmd = 1_000_000_000_000u64.checked_div(iops).unwrap_or(0);
        let per_byte = 1_000_000_000_000u64.checked_div(bw).unwrap_or(0);
        per_cmd.max(per_byte * bytes)
    }

    /// Modelled IOPS of one SSD with enough I/O outstanding (None = unlimited).
    pub fn model_iops(&self, write: bool, bytes: u64) -> Option<f64> {
        let c = self.cost_ps(write, bytes);
        (c > 0).then(|| 1e12 / c as f64)
    }

    /// The model's steady state of one SSD with `outstanding` I/Os kept in flight (a
    /// closed loop, no software overhead): each command costs `s = cost_ps` of device
    /// time (rate caps) and completes `s + latency` after it starts, so
    /// IOPS = min(1 / s, N / (s + L)) and, by Little's law, mean latency = N / IOPS =
    /// max(s + L, N s). Returns (IOPS, mean latency in us); None without modelled limits.
    pub fn model_point(&self, write: bool, bytes: u64, outstanding: u64) -> Option<(f64, f64)> {
        let s = self.cost_ps(write, bytes) as f64 * 1e-12;
        let l = if write {
            self.lat_write_ns
        } else {
            self.lat_read_ns
        } as f64
            * 1e-9;
        if s == 0.0 && l == 0.0 {
            return None;
        }
        let n = outstanding.max(1) as f64;
        let iops = if s > 0.0 {
            (1.0 / s).min(n / (s + l))
        } else {
            n / l
        };
        Some((iops, n / iops * 1e6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_resolve() {
        for p in DriveProfile::PRESETS {
            let m = DriveProfile::preset(p).unwrap();
            assert_eq!(&m.name, p);
            assert!(m.lba_size == 512 || m.lba_size == 4096);
            assert!(m.max_depth.is_power_of_two());
        }
        assert!(DriveProfile::preset("nope").is_none());
    }

    #[test]
    fn optane_model_rates() {
        let m = DriveProfile::optane_p5800x();
        let r512 = m.model_iops(false, 512).unwrap();
        assert!((r512 - 5.1e6).abs() / 5.1e6 < 0.01, "{r512}");
        let r4k = m.model_iops(false, 4096).unwrap();
        assert!(r4k > 1.5e6 && r4k < 1.8e6, "{r4k}");
        assert!(DriveProfile::ideal().model_iops(false, 512).is_none());
    }

    #[test]
    fn model_point_follows_littles_law() {
        let m = DriveProfile::samsung_980pro();
        // 512 B reads: s = 1 us (1 M IOPS), L = 60 us: the knee is at 61 outstanding.
        let (iops, lat) = m.model_point(false, 512, 30).unwrap();
        assert!((iops - 30.0 / 61e-6).abs() < 1.0 && (lat - 61.0).abs() < 1e-6);
        let (iops, lat) = m.model_point(false, 512, 128).unwrap();
        assert!((iops - 1e6).abs() < 1.0 && (lat - 128.0).abs() < 1e-6);
        assert!(DriveProfile::ideal().model_point(false, 512, 8).is_none());
    }
}
