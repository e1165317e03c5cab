//! Creating a model image so that a crash at any step leaves no image or a valid one: the
//! steps, the temporary file beside the image, the rename that does not replace, and the
//! cleanup of what a crash left. [`super::medium::FileMedium`] opens images; this file
//! only makes new ones.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{Flock, FlockArg};

use super::image_header::ImageHeader;

/// The steps of creating an image, in order; a crash after any of them leaves no image
/// at the path (nothing, or the empty file that was there) or a valid one:
///
/// 1. a temporary file `.NAME.bam-new-PID-SEQ` is made beside the image (`O_EXCL`) and
///    locked; it is never opened as an image, and its lock tells a live creation from a
///    crashed one;
/// 2. the header is written into it;
/// 3. it is given the image's length (sparse);
/// 4. it is synced;
/// 5. it is given the image's name: renamed without replacing (`renameat2`
///    `RENAME_NOREPLACE`; where the file system has no such rename, hard-linked), so a file
///    that appeared at the name meanwhile is opened instead, never replaced; an empty
///    file that was there (locked and checked again first) is replaced by a plain rename;
/// 6. after a hard link, the temporary name is removed;
/// 7. the directory is synced, so the name is durable.
///
/// The creator holds the new file's lock from step 1 until the image is dropped, so the
/// new image is locked for writing from the moment it has its name. Temporary files that a
/// crash left (unlocked) are removed by the next read-write opening of the same name.
pub const CREATION_STEPS: usize = 7;

/// A hook into the creation of an image, for crash tests ([`FileMedium::open_with_hook`]).
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct CreationHook<'a> {
    /// Called after each step of [`CREATION_STEPS`] with its number (and with 0 before the
    /// first); `true` stops the creation there as a killed process would: files as they
    /// are, locks released, no temporary file removed.
    pub after_step: &'a dyn Fn(usize) -> bool,
    /// Commit by a hard link (step 5) even where `RENAME_NOREPLACE` works, to test the
    /// other way.
    pub by_link: bool,
}

pub(super) fn never(_: usize) -> bool {
    false
}

/// The hook of an ordinary opening: no stop, the no-replace rename where there is one.
pub(super) const NO_HOOK: CreationHook<'static> = CreationHook {
    after_step: &never,
    by_link: false,
};

/// How many times an opening looks at the path again after losing a race for it.
pub(super) const OPEN_ROUNDS: usize = 8;

/// Part of the temporary files' names after `.NAME`: `.NAME.bam-new-PID-SEQ`.
pub(super) const TEMP_INFIX: &str = ".bam-new-";

/// Tells the temporary files of one process apart (two threads creating one image).
pub(super) static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// How [`create_image`] ended.
pub(super) enum Created {
    /// The image, under its name, locked for writing.
    Image(Flock<File>),
    /// Another file took the name (or the empty file there changed) meanwhile: nothing was
    /// named; look at the path again.
    Raced,
    /// The hook stopped it.
    Stopped,
}

/// A creation error: what could not be done, and why.
pub(super) type CreateError = (&'static str, io::Error);

/// Creates the image at `path` with header `h` and length `total` by the steps of
/// [`CREATION_STEPS`]. `replacing`: the empty file at `path`, locked by the caller, that
/// the new image replaces; otherwise `path` must stay absent.
pub(super) fn create_image(
    path: &Path,
    h: ImageHeader,
    total: u64,
    replacing: Option<&File>,
    hook: CreationHook<'_>,
) -> Result<Created, CreateError> {
    let stop = |step| (hook.after_step)(step);
    if stop(0) {
        return Ok(Created::Stopped);
    }
    let (temp, file) = new_temp(path).map_err(|e| ("open or create", e))?;
    let mut temp = TempFile(Some(temp));
    // A stop leaves the temporary file, as a crash would.
    let mut crash_after = |step| stop(step) && temp.keep().is_some();
    if crash_after(1) {
        return Ok(Created::Stopped);
    }
    let init = |e| ("initialize", e);
    file.write_all_at(&h.encode(), 0).map_err(init)?;
    if crash_after(2) {
        return Ok(Created::Stopped);
    }
    file.set_len(total).map_err(init)?;
    if crash_after(3) {
        return Ok(Created::Stopped);
    }
    file.sync_all().map_err(init)?;
    if crash_after(4) {
        return Ok(Created::Stopped);
    }
    let from = temp.path();
    let linked = match replacing {
        Some(empty) => {
            let unchanged =
                names(path, empty).map_err(init)? && empty.metadata().map_err(init)?.len() == 0;
            if !unchanged {
                return Ok(Created::Raced);
            }
            std::fs::rename(from, path).map_err(|e| ("name", e))?;
            false
        }
        None => match name_no_replace(from, path, hook.by_link) {
            Ok(linked) => linked,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(Created::Raced),
            Err(e) => return Err(("name", e)),
        },
    };
    let temp = temp.keep();
    if stop(5) {
        return Ok(Created::Stopped);
    }
    if let (true, Some(temp)) = (linked, temp) {
        // The image has its name; a second name left here is removed by a later opening.
        if let Err(e) = std::fs::remove_file(&temp) {
            tracing::warn!("cannot remove {}: {e}", temp.display());
        }
    }
    if stop(6) {
        return Ok(Created::Stopped);
    }
    sync_dir(path).map_err(|e| ("sync the directory of", e))?;
    if stop(7) {
        return Ok(Created::Stopped);
    }
    Ok(Created::Image(file))
}

/// A temporary file, removed on drop unless kept (given its final name, or left as a
/// crash would leave it).
pub(super) struct TempFile(Option<PathBuf>);

impl TempFile {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }

    fn keep(&mut self) -> Option<PathBuf> {
        self.0.take()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The directory holding `path` (`.` for a bare name).
pub(super) fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// `.NAME.bam-new-`: how the temporary files of the image at `path` begin.
pub(super) fn temp_prefix(path: &Path) -> io::Result<OsString> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(TEMP_INFIX);
    Ok(prefix)
}

/// Makes and locks a new temporary file beside `path` (step 1 of [`CREATION_STEPS`]).
pub(super) fn new_temp(path: &Path) -> io::Result<(PathBuf, Flock<File>)> {
    let prefix = temp_prefix(path)?;
    for _ in 0..OPEN_ROUNDS {
        let mut name = prefix.clone();
        let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        name.push(format!("{}-{seq}", std::process::id()));
        let temp = path.with_file_name(name);
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(f) => f,
            // Left by a dead process of the same id and still locked by a sweep.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        // Blocking: a sweep of stale files (remove_stale_temps) holds a lock for a moment.
        let file =
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))?;
        // A sweep that locked it before we did took it for stale and removed it.
        if file.metadata()?.nlink() > 0 {
            return Ok((temp, file));
        }
    }
    Err(io::Error::other(
        "no temporary file could be made beside it",
    ))
}

/// Gives the file at `temp` the name `path` unless `path` exists (then `AlreadyExists`):
/// a no-replace rename, or where the file system has none (or `by_link`), a hard link.
/// Returns whether it was linked (`temp` still names the file).
pub(super) fn name_no_replace(temp: &Path, path: &Path, by_link: bool) -> io::Result<bool> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !by_link {
        use nix::errno::Errno;
        use nix::fcntl::{renameat2, RenameFlags};
        match renameat2(None, temp, None, path, RenameFlags::RENAME_NOREPLACE) {
            Ok(()) => return Ok(false),
            Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = by_link;
    std::fs::hard_link(temp, path)?;
    Ok(true)
}

/// Whether `path` names the open `file` now (`false` if it names nothing or another).
pub(super) fn names(path: &Path, file: &File) -> io::Result<bool> {
    let f = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(p) => Ok(p.dev() == f.dev() && p.ino() == f.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Syncs the directory holding `path`, so that a name given in it is durable.
pub(super) fn sync_dir(path: &Path) -> io::Result<()> {
    match File::open(dir_of(path)).and_then(|d| d.sync_all()) {
        // The file system cannot sync a directory (some network and FUSE ones).
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r,
    }
}

/// Removes the temporary files that crashed creations of the image at `path` left: those
/// named `.NAME.bam-new-PID-SEQ` that no one holds locked (a live creation holds its lock).
/// Best effort: what cannot be looked at is left.
pub(super) fn remove_stale_temps(path: &Path) {
    let Ok(prefix) = temp_prefix(path) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir_of(path)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.as_bytes().strip_prefix(prefix.as_bytes()) else {
            continue;
        };
        let ours = rest.split(|&b| b == b'-').count() == 2
            && rest
                .split(|&b| b == b'-')
                .all(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit));
        if !ours || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let p = entry.path();
        let Ok(f) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&p)
        else {
            continue;
        };
        // Locked: a creation in progress (or, after a hard link, an image in use).
        let Ok(f) = Flock::lock(f, FlockArg::LockExclusiveNonblock) else {
            continue;
        };
        if names(&p, &f).unwrap_or(false) {
            let _ = std::fs::remove_file(&p);
        }
    }
}
