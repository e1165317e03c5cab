//! The files behind a file-backed array: opened, locked, measured.
//!
//! Each path is one "SSD": a regular file or a block device. Its namespace holds the
//! file's bytes in blocks of the array's block size; the last block may run past the end
//! of the file, and reads there return zeros. With `O_DIRECT` the block size is the
//! alignment the kernel asks for (`statx` `STATX_DIOALIGN`, a block device's logical
//! block size), at least 512 B.

use super::config::{FileConfig, FileMode};
use crate::error::{Error, Result};
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// One opened file.
pub struct FileMedium {
    /// The path as given.
    pub path: PathBuf,
    file: Flock<File>,
    /// The same file through the page cache, without `O_DIRECT` (reads and writes of
    /// any alignment: tests, the pattern fill).
    plain: File,
    /// Its size in bytes when it was opened.
    pub size: u64,
    /// A block device (its size cannot change underneath).
    pub block_device: bool,
    /// The smallest block size `O_DIRECT` allows on it (512 when unknown or buffered).
    pub direct_align: u32,
}

impl FileMedium {
    /// The raw descriptor (valid while `self` lives).
    pub fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// The file's size now (it may have been truncated since it was opened).
    pub fn current_size(&self) -> u64 {
        if self.block_device {
            return self.size;
        }
        self.file.metadata().map(|m| m.len()).unwrap_or(0)
    }

    /// Reads at `off` through the page cache (tests check what reached the file).
    pub fn read_at(&self, off: u64, out: &mut [u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut done = 0;
        while done < out.len() {
            match self.plain.read_at(&mut out[done..], off + done as u64)? {
                0 => {
                    out[done..].fill(0);
                    return Ok(());
                }
                n => done += n,
            }
        }
        Ok(())
    }

    /// Writes at `off` (the pattern fill).
    pub fn write_at(&self, off: u64, data: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.plain.write_all_at(data, off)
    }
}

/// Opens every path of `cfg` (creating or growing files to `cfg.size`), locks each
/// (shared when read-only, exclusive when writable) and measures it.
pub fn open_all(cfg: &FileConfig) -> Result<Vec<FileMedium>> {
    if cfg.paths.is_empty() {
        return Err(Error::InvalidArgument(
            "file: needs at least one path (file:PATH[,PATH...])".into(),
        ));
    }
    cfg.paths.iter().map(|p| open(p, cfg)).collect()
}

fn open(path: &Path, cfg: &FileConfig) -> Result<FileMedium> {
    let what = |e: std::io::Error| Error::InvalidArgument(format!("{}: {e}", path.display()));
    let writable = cfg.opens_writable();
    let mut o = OpenOptions::new();
    o.read(true).write(writable);
    if cfg.size.is_some() && !path.exists() {
        o.create(true);
    }
    if cfg.mode == FileMode::Direct {
        o.custom_flags(libc::O_DIRECT);
    }
    let file = o.open(path).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) if cfg.mode == FileMode::Direct => {
                " (this file system refuses O_DIRECT: use `buffered`)"
            }
            Some(libc::ENOENT) => " (give `size=SIZE` to create it)",
            Some(libc::EACCES) | Some(libc::EPERM) if writable => {
                " (open for writing refused: drop `rw`, `size=` and `fill=pattern` to read it)"
            }
            _ => "",
        };
        Error::InvalidArgument(format!("{}: {e}{hint}", path.display()))
    })?;
    let meta = file.metadata().map_err(what)?;
    let block_device = meta.file_type().is_block_device();
    if !block_device && !meta.is_file() {
        return Err(Error::InvalidArgument(format!(
            "{}: neither a regular file nor a block device",
            path.display()
        )));
    }
    let arg = if writable {
        FlockArg::LockExclusiveNonblock
    } else {
        FlockArg::LockSharedNonblock
    };
    let file = Flock::lock(file, arg).map_err(|(_, e)| {
        Error::InvalidArgument(format!(
            "{}: locked by another process ({e}): a writer holds it, or you asked to write \
             while it is read",
            path.display()
        ))
    })?;
    let mut size = if block_device {
        block_device_size(&file).map_err(what)?
    } else {
        meta.len()
    };
    if let Some(want) = cfg.size {
        if !block_device && size < want {
            file.set_len(want).map_err(what)?;
            size = want;
        }
    }
    if size == 0 {
        return Err(Error::InvalidArgument(format!(
            "{}: empty (give `size=SIZE` to make room)",
            path.display()
        )));
    }
    let direct_align = if cfg.mode == FileMode::Direct {
        direct_alignment(&file, block_device).max(512)
    } else {
        512
    };
    let plain = OpenOptions::new()
        .read(true)
        .write(writable)
        .open(path)
        .map_err(what)?;
    Ok(FileMedium {
        path: path.to_path_buf(),
        file,
        plain,
        size,
        block_device,
        direct_align,
    })
}

fn block_device_size(f: &File) -> std::io::Result<u64> {
    let mut n: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is valid.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut n as *mut u64) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n)
}

/// `_IOR(0x12, 114, size_t)` and `_IO(0x12, 104)`.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;

/// The offset alignment `O_DIRECT` needs: a block device's logical block size, else the
/// file system's answer to `statx(STATX_DIOALIGN)`, else 4096.
fn direct_alignment(f: &File, block_device: bool) -> u32 {
    if block_device {
        let mut n: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int through the pointer, which is valid.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKSSZGET, &mut n as *mut libc::c_int) };
        if r == 0 && n > 0 {
            return n as u32;
        }
        return 4096;
    }
    // SAFETY: statx with an empty path and AT_EMPTY_PATH describes the descriptor; the
    // buffer is a valid, zeroed statx struct.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the path is a valid NUL-terminated string.
    let r = unsafe {
        libc::statx(
            f.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut st,
        )
    };
    if r == 0 && st.stx_mask & libc::STATX_DIOALIGN != 0 && st.stx_dio_offset_align > 0 {
        st.stx_dio_offset_align
    } else {
        4096
    }
}
