//! The emulated controllers' backing images: creation, the data patterns the guest
//! writes through our stack, and the host-side check of what landed where.
//!
//! The guest announces every region it wrote with a console line
//! `BAMDATA <image-index> <byte-offset> <pattern-file>`; after the guest has exited the
//! host reads `<image>[offset .. offset + len(pattern)]` and compares it with the
//! pattern file it put into the initramfs.

use anyhow::{bail, Context, Result};
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Steps of `tests/qemu/io-tests.sh` and `vfio-tests.sh` that must pass.
pub const REQUIRED_RUST_STEPS: &[&str] = &[
    "bind-refuses-in-use",
    "bam-list-kmod",
    "bam-doctor",
    "bam-info-kmod",
    "bam-write-read-kmod",
    "bam-load-verify-kmod",
    "guest-io-kmod",
    "kmod-killed-mid-io",
    "vfio-bind",
    "bam-list-vfio",
    "bam-info-vfio",
    "bam-write-read-vfio",
    "bam-load-verify-vfio",
    "guest-io-vfio",
    "rebind-to-module",
    "bam-unbind-to-nvme",
];

/// Whether the guest uses `bam bind` (else the shell helper) to bind controllers.
pub const HAVE_BAM_BIND: bool = true;

/// A sparse, zero-filled image file.
pub fn create(path: &Path, len: u64) -> Result<()> {
    let f = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.set_len(len)?;
    Ok(())
}

/// Deterministic pseudo-random bytes (xorshift64*), the same on every run.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes the pattern files the guest uses into `dir`; returns their names.
pub fn write_patterns(dir: &Path) -> Result<Vec<String>> {
    fs::create_dir_all(dir)?;
    let mut names = Vec::new();
    for (seed, len) in [(1u64, 1usize << 20), (2, (3 << 20) + 4096), (3, 8 << 20)] {
        let name = format!("pattern{seed}.bin");
        fs::write(dir.join(&name), pattern(seed, len))?;
        names.push(name);
    }
    Ok(names)
}

/// Checks every `BAMDATA` region announced in the log against the images.
pub fn verify(log: &str, images: &[PathBuf], patterns: &Path) -> Result<usize> {
    let mut checked = 0;
    for line in log.lines() {
        let Some(rest) = line.trim_start().strip_prefix("BAMDATA ") else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() != 3 {
            bail!("malformed line {line:?}");
        }
        let idx: usize = f[0].parse()?;
        let offset: u64 = f[1].parse()?;
        let want = fs::read(patterns.join(f[2])).with_context(|| format!("pattern {}", f[2]))?;
        let img = images.get(idx).with_context(|| format!("no image {idx}"))?;
        let mut file = fs::File::open(img)?;
        file.seek(SeekFrom::Start(offset))?;
        let mut got = vec![0u8; want.len()];
        file.read_exact(&mut got)
            .with_context(|| format!("reading {} at {offset}", img.display()))?;
        if let Some(pos) = got.iter().zip(&want).position(|(a, b)| a != b) {
            bail!(
                "image {} at offset {} (+{pos}): data written in the guest ({}) is not there",
                img.display(),
                offset,
                f[2]
            );
        }
        eprintln!(
            "qemu-test: {} bytes of {} verified in {} at offset {offset}",
            want.len(),
            f[2],
            img.display()
        );
        checked += 1;
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_finds_written_data_and_catches_corruption() {
        let dir = std::env::temp_dir().join(format!("bam-images-test-{}", std::process::id()));
        let pats = dir.join("data");
        let names = write_patterns(&pats).unwrap();
        assert_eq!(pattern(2, 64), pattern(2, 64));
        assert_ne!(pattern(1, 64), pattern(2, 64));
        let img = dir.join("img");
        create(&img, 4 << 20).unwrap();
        let want = fs::read(pats.join(&names[0])).unwrap();
        let mut data = vec![0u8; 4 << 20];
        data[4096..4096 + want.len()].copy_from_slice(&want);
        fs::write(&img, &data).unwrap();
        let log = format!("x\n    BAMDATA 0 4096 {}\n", names[0]);
        assert_eq!(verify(&log, std::slice::from_ref(&img), &pats).unwrap(), 1);
        // one flipped byte, or the wrong offset, fails
        data[4096 + 1000] ^= 1;
        fs::write(&img, &data).unwrap();
        assert!(verify(&log, std::slice::from_ref(&img), &pats).is_err());
        let log = format!("BAMDATA 0 0 {}\n", names[0]);
        assert!(verify(&log, &[img], &pats).is_err());
        fs::remove_dir_all(dir).unwrap();
    }
}
