//! Files the commands write (`read --output`, reports, plots): no command truncates or
//! deletes a file it did not create.
//!
//! An output is written to a new temporary file beside it (`.NAME.bam-PID.partial`) and
//! renamed over NAME only when it is complete, so a command that fails or is interrupted
//! leaves an existing NAME as it was, and removes only its own temporary file. An output
//! that is the same file (device and inode) as one the command reads, such as the model
//! image of `bam read --device model:IMG --output IMG`, is refused before anything is
//! written. An output that exists and is not a regular file (`/dev/null`, a FIFO) is
//! written in place, without truncation.

use crate::error::{CliError, CliResult};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// An output file being written: a temporary file until [`OutputFile::commit`].
pub struct OutputFile {
    target: PathBuf,
    /// The temporary file, removed on drop unless committed or kept.
    temp: Option<PathBuf>,
    file: File,
}

/// Whether `a` and `b` name the same existing file (device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// The temporary file beside `target`.
fn temp_beside(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    target.with_file_name(format!(".{name}.bam-{}.partial", std::process::id()))
}

/// Refuses `target` if it is the same file as one of `reads` (files the command reads).
fn refuse_same(target: &Path, reads: &[&Path]) -> CliResult<()> {
    if let Some(r) = reads.iter().find(|r| same_file(target, r)) {
        return Err(CliError::usage(
            "refusing to write the output",
            format!(
                "{} is the file the command reads ({}): writing it would destroy it",
                target.display(),
                r.display()
            ),
        )
        .hint("write the output to another file"));
    }
    Ok(())
}

impl OutputFile {
    /// Starts writing `target` (`what`: the error's headline), refusing it if it is one
    /// of the files in `reads`.
    pub fn create(target: &Path, reads: &[&Path], what: &str) -> CliResult<Self> {
        refuse_same(target, reads)?;
        let name = target.display().to_string();
        if let Ok(m) = std::fs::metadata(target) {
            if !m.is_file() {
                // A device or FIFO: written in place, never truncated or renamed over.
                let file = OpenOptions::new()
                    .write(true)
                    .open(target)
                    .map_err(|e| CliError::file(what, &name, &e))?;
                return Ok(OutputFile {
                    target: target.to_path_buf(),
                    temp: None,
                    file,
                });
            }
        }
        let temp = temp_beside(target);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| CliError::file(what, &temp.display().to_string(), &e))?;
        Ok(OutputFile {
            target: target.to_path_buf(),
            temp: Some(temp),
            file,
        })
    }

    /// Completes the output: its data on stable storage, then renamed over the target.
    pub fn commit(mut self, what: &str) -> CliResult<()> {
        let name = self.target.display().to_string();
        self.file
            .flush()
            .map_err(|e| CliError::file(what, &name, &e))?;
        let Some(temp) = self.temp.take() else {
            return Ok(());
        };
        let done = self
            .file
            .sync_all()
            .and_then(|()| std::fs::rename(&temp, &self.target));
        if let Err(e) = done {
            let _ = std::fs::remove_file(&temp);
            return Err(CliError::file(what, &name, &e));
        }
        Ok(())
    }

    /// Keeps what was written under the temporary name (an interrupted command says where
    /// it is) and leaves the target as it was; `None` for an output written in place.
    pub fn keep_partial(mut self) -> Option<PathBuf> {
        let _ = self.file.flush();
        self.temp.take()
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(t) = self.temp.take() {
            let _ = std::fs::remove_file(t);
        }
    }
}

/// Writes `bytes` to `target` through a temporary file (see the module's documentation).
#[cfg_attr(not(feature = "gpu"), allow(dead_code))] // the benchmarks' reports need the GPU feature
pub fn write_file(target: &Path, bytes: &[u8], what: &str) -> CliResult<()> {
    let mut f = OutputFile::create(target, &[], what)?;
    f.write_all(bytes)
        .map_err(|e| CliError::file(what, &target.display().to_string(), &e))?;
    f.commit(what)
}

/// Lets `make` write a file at a temporary path beside `target` (a writer that takes a
/// path, such as the plot's), then renames it over `target`; on an error the temporary
/// file is removed and `target` left as it was.
pub fn write_via_path(
    target: &Path,
    make: impl FnOnce(&Path) -> Result<(), String>,
    fail: impl FnOnce(String) -> CliError,
) -> CliResult<()> {
    let temp = temp_beside(target);
    let r = make(&temp).and_then(|()| std::fs::rename(&temp, target).map_err(|e| e.to_string()));
    if let Err(e) = r {
        let _ = std::fs::remove_file(&temp);
        return Err(fail(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn leftovers(d: &Path) -> Vec<String> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".partial"))
            .collect()
    }

    #[test]
    fn commit_replaces_the_target_and_leaves_no_temporary_file() {
        let d = dir();
        let t = d.path().join("out.bin");
        std::fs::write(&t, b"old").unwrap();
        let mut f = OutputFile::create(&t, &[], "w").unwrap();
        f.write_all(b"new data").unwrap();
        assert_eq!(
            std::fs::read(&t).unwrap(),
            b"old",
            "target touched before commit"
        );
        f.commit("w").unwrap();
        assert_eq!(std::fs::read(&t).unwrap(), b"new data");
        assert!(leftovers(d.path()).is_empty());
    }

    #[test]
    fn a_failed_output_leaves_an_existing_target_as_it_was() {
        let d = dir();
        let t = d.path().join("out.bin");
        std::fs::write(&t, b"keep me").unwrap();
        {
            let mut f = OutputFile::create(&t, &[], "w").unwrap();
            f.write_all(b"half").unwrap();
            // dropped without commit: the command failed
        }
        assert_eq!(std::fs::read(&t).unwrap(), b"keep me");
        assert!(leftovers(d.path()).is_empty());
    }

    #[test]
    fn the_file_the_command_reads_is_refused_also_through_a_hard_link() {
        let d = dir();
        let img = d.path().join("disk.img");
        std::fs::write(&img, b"image").unwrap();
        let link = d.path().join("alias.img");
        std::fs::hard_link(&img, &link).unwrap();
        for t in [&img, &link] {
            let e = OutputFile::create(t, &[&img], "w").err().unwrap();
            assert!(e.usage, "{e}");
            assert!(e.to_string().contains("destroy"), "{e}");
        }
        assert_eq!(std::fs::read(&img).unwrap(), b"image");
        assert!(leftovers(d.path()).is_empty());
    }

    #[test]
    fn an_interrupted_output_is_kept_under_its_temporary_name() {
        let d = dir();
        let t = d.path().join("out.bin");
        std::fs::write(&t, b"old").unwrap();
        let mut f = OutputFile::create(&t, &[], "w").unwrap();
        f.write_all(b"part").unwrap();
        let p = f.keep_partial().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"part");
        assert_eq!(std::fs::read(&t).unwrap(), b"old");
    }

    #[test]
    fn a_device_is_written_in_place() {
        let mut f = OutputFile::create(Path::new("/dev/null"), &[], "w").unwrap();
        f.write_all(b"x").unwrap();
        assert!(f.keep_partial().is_none());
    }

    #[test]
    fn write_via_path_renames_only_a_complete_file() {
        let d = dir();
        let t = d.path().join("plot.svg");
        std::fs::write(&t, b"old").unwrap();
        let r = write_via_path(
            &t,
            |p| {
                std::fs::write(p, b"half").unwrap();
                Err("render failed".into())
            },
            |e| CliError::new("plot", e),
        );
        assert!(r.is_err());
        assert_eq!(std::fs::read(&t).unwrap(), b"old");
        assert!(leftovers(d.path()).is_empty());
        write_via_path(
            &t,
            |p| std::fs::write(p, b"<svg/>").map_err(|e| e.to_string()),
            |e| CliError::new("plot", e),
        )
        .unwrap();
        assert_eq!(std::fs::read(&t).unwrap(), b"<svg/>");
    }
}
