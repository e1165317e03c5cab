//! Sizes on the command line and in output.
//!
//! Input sizes are binary: `K`, `M`, `G`, `T` (optionally followed by `iB`) multiply by
//! 2^10, 2^20, 2^30, 2^40. Output rates and capacities are decimal (GB, GB/s) and say so;
//! binary values are labelled GiB / MiB.

pub use bam_nvme::device::parse_size;

/// A length flag: a size (see [`parse_size`]) of at least one byte.
pub fn parse_length(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err("the length must be at least 1 byte".into()),
        n => Ok(n),
    }
}

/// `n` bytes in decimal units, e.g. `1.07 GB` (indicatif's formatting, as its bars).
pub fn decimal_bytes(n: u64) -> String {
    indicatif::DecimalBytes(n).to_string()
}

/// `n` bytes in binary units, e.g. `1.00 GiB`.
pub fn binary_bytes(n: u64) -> String {
    indicatif::BinaryBytes(n).to_string()
}

/// A cache line size as people write it: "512 B", "4 KiB".
pub fn line_size(bytes: u64) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// Decimal gigabytes per second.
pub fn gb_per_s(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / secs / 1e9
    } else {
        0.0
    }
}

/// A size flag: parsed by [`parse_size`], shown in `--help` defaults in the largest binary
/// unit that divides it (`1G`, `4K`, `1000`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "gpu"), allow(dead_code))] // only the GPU commands take one yet
pub struct SizeArg(pub u64);

impl std::str::FromStr for SizeArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_size(s).map(SizeArg)
    }
}

impl std::fmt::Display for SizeArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0;
        for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
            if n != 0 && n.is_multiple_of(1u64 << shift) {
                return write!(f, "{}{unit}", n >> shift);
            }
        }
        write!(f, "{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_sizes() {
        assert_eq!(line_size(512), "512 B");
        assert_eq!(line_size(1536), "1536 B");
        assert_eq!(line_size(4096), "4 KiB");
        assert_eq!(line_size(65536), "64 KiB");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("10b"), Ok(10));
        assert!(parse_size("").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("1X").is_err());
        assert!(parse_size("1.5G").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("1GB").unwrap_err().contains("binary"));
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("16777216T").is_err());
    }

    #[test]
    fn size_args_round_trip() {
        for (n, text) in [
            (0, "0"),
            (1000, "1000"),
            (4096, "4K"),
            (3 << 29, "1536M"),
            (2 << 30, "2G"),
        ] {
            assert_eq!(SizeArg(n).to_string(), text);
            assert_eq!(text.parse::<SizeArg>(), Ok(SizeArg(n)));
        }
        assert!("foo".parse::<SizeArg>().is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(decimal_bytes(999), "999 B");
        assert_eq!(decimal_bytes(1 << 30), "1.07 GB");
        assert_eq!(binary_bytes(1 << 30), "1.00 GiB");
        assert_eq!(binary_bytes(1536), "1.50 KiB");
        assert_eq!(gb_per_s(2_000_000_000, 2.0), 1.0);
        assert_eq!(gb_per_s(1, 0.0), 0.0);
    }
}
