//! The file behind a simulated SSD's `media=file:PATH`: locked, marked as what it is, and
//! never grown, cut or reused silently.
//!
//! A media file is a 4 KiB header (`BAMSIMMD`, a format version, the capacity) followed by
//! the medium's bytes, which [`MappedFile`] maps and registers with the GPU.
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

use crate::cuda::Gpu;
use crate::error::{Error, Result};
use cudarc::driver::sys;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::mman::{self, MapFlags, ProtFlags};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

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

/// A simulated SSD's media file ([`open`]: locked, with its header) mapped into host
/// memory and registered with the GPU (zero-copy).
pub struct MappedFile {
    gpu: Arc<Gpu>,
    host: *mut u8,
    dev: u64,
    len: usize,
    /// The open, locked file: the lock lasts as long as the mapping.
    _file: nix::fcntl::Flock<std::fs::File>,
}

// SAFETY: plain shared mapping.
unsafe impl Send for MappedFile {}
// SAFETY: as above.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// Opens the media file `path` for a medium of `len` bytes (created when absent; see
    /// the module docs for what is refused), maps its medium read-write and registers it.
    pub fn open(gpu: &Arc<Gpu>, path: &std::path::Path, len: usize) -> Result<Self> {
        let f = open(path, len as u64)?;
        let n = std::num::NonZeroUsize::new(len)
            .ok_or_else(|| Error::InvalidArgument("a mapped file needs a length".into()))?;
        // SAFETY: a fresh shared mapping of a file we hold open and locked, whose length
        // media_file::open checked (header + len), from the page after the header; no
        // address hint: it aliases nothing of ours; unmapped in Drop.
        let mapping = unsafe {
            mman::mmap(
                None,
                n,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &*f,
                HEADER_BYTES as i64,
            )
        }
        .map_err(std::io::Error::from)?;
        let p = mapping.as_ptr();
        gpu.bind()?;
        let flags = sys::CU_MEMHOSTREGISTER_DEVICEMAP | sys::CU_MEMHOSTREGISTER_PORTABLE;
        // SAFETY: `p` is a live mapping of `len` bytes.
        let r = unsafe { sys::cuMemHostRegister_v2(p, len, flags) }.result();
        if let Err(e) = r {
            // SAFETY: undo our own mapping.
            let _ = unsafe { mman::munmap(mapping, len) };
            // Seen on Linux 6.18 (H100, driver 580): ext4 files fail with INVALID_VALUE,
            // tmpfs files work (writable long-term pins of dirty-tracked files are refused).
            if e.0 != sys::CUresult::CUDA_ERROR_INVALID_VALUE {
                return Err(e.into());
            }
            return Err(Error::InvalidArgument(format!(
                "the GPU could not pin the mapping of {} ({e:?}): recent Linux refuses writable \
                 long-term pins of files on file systems that track dirty pages (ext4, xfs...); \
                 put the media file on tmpfs or hugetlbfs, e.g. /dev/shm/NAME",
                path.display()
            )));
        }
        let mut dev: sys::CUdeviceptr = 0;
        // SAFETY: registered above with DEVICEMAP.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, p, 0) }.result()?;
        Ok(MappedFile {
            gpu: gpu.clone(),
            host: p.cast(),
            dev,
            len,
            _file: f,
        })
    }

    /// Device address of the mapping.
    pub fn dev_ptr(&self) -> u64 {
        self.dev
    }

    /// Host address of the mapping.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: registered and mapped by us, undone once.
        unsafe {
            let _ = sys::cuMemHostUnregister(self.host.cast());
            if let Some(p) = std::ptr::NonNull::new(self.host.cast()) {
                let _ = mman::munmap(p, self.len);
            }
        }
    }
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
