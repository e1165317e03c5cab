//! The verifiable pattern of a test file: the 8-byte little-endian word at every
//! 8-aligned offset `o` holds `o ^ KEY`, so any piece can be checked knowing its offset.

use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Mixed into every word, so that zeros or a file of offsets does not pass.
pub const KEY: u64 = 0xB5AD_4ECE_DA1C_E2A9;

/// Bytes each writer thread writes at a time in [`make_file`].
const CHUNK: usize = 4 << 20;

/// The pattern's word at 8-aligned offset `o`.
pub fn word(o: u64) -> u64 {
    o ^ KEY
}

/// The pattern's byte at offset `o`.
pub fn byte(o: u64) -> u8 {
    word(o & !7).to_le_bytes()[(o & 7) as usize]
}

/// Fills `buf` with the file's bytes from offset `off`.
pub fn fill(buf: &mut [u8], off: u64) {
    if off.is_multiple_of(8) && buf.len().is_multiple_of(8) {
        for (i, w) in buf.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&word(off + 8 * i as u64).to_le_bytes());
        }
    } else {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = byte(off + i as u64);
        }
    }
}

/// The first byte of a piece that differs from the pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Its offset in the file.
    pub offset: u64,
    pub got: u8,
    pub want: u8,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "byte at offset {} is {:#04x}, the pattern says {:#04x}",
            self.offset, self.got, self.want
        )
    }
}

/// Checks `buf`, read from offset `off`, against the pattern.
pub fn check(buf: &[u8], off: u64) -> Option<Mismatch> {
    if off.is_multiple_of(8) {
        let words = buf.chunks_exact(8);
        let tail = words.remainder().len();
        for (i, w) in words.enumerate() {
            let o = off + 8 * i as u64;
            if w != word(o).to_le_bytes() {
                return first_bad(w, o);
            }
        }
        let start = buf.len() - tail;
        return first_bad(&buf[start..], off + start as u64);
    }
    first_bad(buf, off)
}

fn first_bad(buf: &[u8], off: u64) -> Option<Mismatch> {
    buf.iter().enumerate().find_map(|(i, &got)| {
        let offset = off + i as u64;
        let want = byte(offset);
        (got != want).then_some(Mismatch { offset, got, want })
    })
}

/// Writes a regular file of `size` bytes holding the pattern, with `threads` writers,
/// and syncs it to its device (so a later cold-cache run reads real storage).
pub fn make_file(path: &Path, size: u64, threads: usize) -> Result<()> {
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() {
            bail!(
                "{}: not a regular file; --make-file writes only regular files (copy a \
                 made file onto a block device with dd if you mean to)",
                path.display()
            );
        }
    }
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.set_len(size)
        .with_context(|| format!("sizing {} to {size} B", path.display()))?;
    let chunks = size.div_ceil(CHUNK as u64);
    let threads = threads.max(1) as u64;
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..threads)
            .map(|t| {
                let file = &file;
                s.spawn(move || write_chunks(file, size, chunks, t, threads))
            })
            .collect();
        writers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| bail!("a writer thread panicked"))
            })
            .collect::<Result<Vec<()>>>()
    })?;
    file.sync_all()
        .with_context(|| format!("syncing {}", path.display()))
}

/// Chunks `t`, `t + step`, ... of the file.
fn write_chunks(file: &File, size: u64, chunks: u64, t: u64, step: u64) -> Result<()> {
    let mut buf = vec![0u8; CHUNK];
    let mut c = t;
    while c < chunks {
        let off = c * CHUNK as u64;
        let len = (size - off).min(CHUNK as u64) as usize;
        fill(&mut buf[..len], off);
        file.write_all_at(&buf[..len], off)
            .with_context(|| format!("writing {len} B at offset {off}"))?;
        c += step;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_then_check_passes_at_any_alignment() {
        for off in [0u64, 3, 8, 4093, 1 << 40] {
            let mut b = vec![0u8; 77];
            fill(&mut b, off);
            assert_eq!(check(&b, off), None, "offset {off}");
        }
    }

    #[test]
    fn aligned_and_bytewise_fills_agree() {
        let mut a = vec![0u8; 64];
        fill(&mut a, 4096);
        let b: Vec<u8> = (4096..4096 + 64).map(byte).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn a_changed_byte_is_found_where_it_is() {
        let mut b = vec![0u8; 4096];
        fill(&mut b, 8192);
        b[1234] ^= 0x10;
        let m = check(&b, 8192).expect("mismatch");
        assert_eq!(m.offset, 8192 + 1234);
        assert_eq!(m.got ^ m.want, 0x10);
    }

    #[test]
    fn a_piece_read_from_the_wrong_offset_fails() {
        let mut b = vec![0u8; 4096];
        fill(&mut b, 0);
        assert!(check(&b, 4096).is_some());
    }

    #[test]
    fn zeros_fail() {
        assert!(check(&[0u8; 16], 0).is_some());
    }
}
