//! The file behind a simulated SSD's `media=file:PATH`: locked, marked as what it is, and
//! never grown, cut or reused silently.
//!
//! A media file is a 4 KiB header (`BAMSIMMD`, a format version, the capacity) followed by
//! the medium's bytes, which [`crate::gpu::MappedFile`] maps and registers with the GPU.
//! Opening one:
//!
//! * takes an exclusive `flock` for as long as the medium lives, so a second process (or a
//!   second array in this one) is refused instead of writing the same bytes;
//! * creates the file when it is absent or empty;
//! * refuses a file with another header: a controller model image (`BAMMODEL`, which
//!   `model:PATH` and `hostctl:...,media=file:PATH` use), or any other non-empty file,
//!   instead of overwriting it as a medium;
//! * refuses a media file made for another capacity, or whose length does not match its
//!   header, instead of growing it.

use crate::error::{Error, Result};
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes before the medium's first byte (the header; a page, so the mapping's offset is
/// page aligned).
pub(crate) const HEADER_BYTES: u64 = 4096;
const MAGIC: &[u8; 8] = b"BAMSIMMD";
const VERSION: u32 = 1;

fn bad<T>(path: &Path, why: impl std::fmt::Display) -> Result<T> {
    Err(Error::InvalidArgument(format!(
        "media file {}: {why}",
        path.display()
    )))
}

fn header(capacity: u64) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&capacity.to_le_bytes());
    h
}

/// Opens (creating it if absent or empty) the media file `path` for a medium of
/// `capacity` bytes, locked exclusively for as long as the result lives. The medium's
/// bytes start at [`HEADER_BYTES`].
pub(crate) fn open(path: &Path, capacity: u64) -> Result<Flock<File>> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .or_else(|e| bad(path, e))?;
    let f = match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(f) => f,
        Err((_, e)) => {
            return bad(
                path,
                format!("in use by another simulated array (it is locked: {e})"),
            )
        }
    };
    let len = f.metadata().or_else(|e| bad(path, e))?.len();
    let Some(total) = capacity.checked_add(HEADER_BYTES) else {
        return bad(path, format!("capacity {capacity} is too large"));
    };
    if len == 0 {
        // New: the length first, then the header, so that a crash in between leaves a
        // file without a header, which the next open refuses rather than misreads.
        f.set_len(total)
            .and_then(|()| f.write_all_at(&header(capacity), 0))
            .and_then(|()| f.sync_all())
            .or_else(|e| bad(path, e))?;
        return Ok(f);
    }
    let mut head = [0u8; 24];
    let n = (len as usize).min(head.len());
    f.read_exact_at(&mut head[..n], 0)
        .or_else(|e| bad(path, e))?;
    if head[..8] == bam_nvme::model::IMAGE_MAGIC {
        return bad(
            path,
            "is a controller model image (model:PATH and hostctl:...,media=file:PATH use those); \
             a simulated SSD's media file is another format: give another path",
        );
    }
    if &head[..8] != MAGIC {
        return bad(
            path,
            format!(
                "exists ({len} bytes) and is not a simulated SSD's media file (no BAMSIMMD \
                 header): refusing to overwrite it; give a new path (or remove the file \
                 yourself)"
            ),
        );
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version != VERSION {
        return bad(
            path,
            format!("format version {version}, this build reads {VERSION}"),
        );
    }
    let made_for = u64::from_le_bytes(head[16..24].try_into().unwrap_or([0; 8]));
    if made_for != capacity {
        return bad(
            path,
            format!(
                "made for a capacity of {made_for} bytes, not {capacity}: give capacity={made_for} \
                 (a media file is never grown or cut)"
            ),
        );
    }
    if len != total {
        return bad(
            path,
            format!(
                "is {len} bytes, its header says {total}: damaged, or changed by another program"
            ),
        );
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn msg(r: Result<Flock<File>>) -> String {
        match r {
            Ok(_) => panic!("opened"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_new_file_gets_a_header_and_its_capacity_and_opens_again() {
        let d = tmp();
        let p = d.path().join("sim");
        drop(open(&p, 1 << 20).unwrap());
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            HEADER_BYTES + (1 << 20)
        );
        drop(open(&p, 1 << 20).unwrap());
    }

    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_it() {
        let d = tmp();
        let p = d.path().join("sim");
        let first = open(&p, 4096).unwrap();
        assert!(msg(open(&p, 4096)).contains("locked"));
        drop(first);
        drop(open(&p, 4096).unwrap());
    }

    #[test]
    fn a_model_image_or_another_file_is_refused_and_left_as_it_was() {
        let d = tmp();
        let img = d.path().join("disk.img");
        let mut bytes = b"BAMMODEL".to_vec();
        bytes.resize(8192, 7);
        std::fs::write(&img, &bytes).unwrap();
        assert!(msg(open(&img, 1 << 20)).contains("model image"));
        let other = d.path().join("notes.txt");
        std::fs::write(&other, b"my notes").unwrap();
        assert!(msg(open(&other, 1 << 20)).contains("refusing to overwrite"));
        assert_eq!(std::fs::read(&img).unwrap(), bytes);
        assert_eq!(std::fs::read(&other).unwrap(), b"my notes");
    }

    #[test]
    fn another_capacity_or_a_changed_length_is_refused_not_grown() {
        let d = tmp();
        let p = d.path().join("sim");
        drop(open(&p, 1 << 20).unwrap());
        assert!(msg(open(&p, 2 << 20)).contains("capacity=1048576"));
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            HEADER_BYTES + (1 << 20)
        );
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(HEADER_BYTES + 4096).unwrap();
        assert!(msg(open(&p, 1 << 20)).contains("damaged"));
    }
}
