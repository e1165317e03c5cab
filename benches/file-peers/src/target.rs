//! The file under test (a regular file or a block device): opened, measured, warmed.

use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` for reading, with `O_DIRECT` when `direct`, and returns it with its size
/// (a block device's too).
pub fn open(path: &Path, direct: bool) -> Result<(File, u64)> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    if direct {
        opts.custom_flags(libc::O_DIRECT);
    }
    let mut file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => bail!(
            "{}: its file system does not support O_DIRECT (drop --direct to read \
             through the page cache)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let size = file
        .seek(SeekFrom::End(0))
        .with_context(|| format!("measuring {}", path.display()))?;
    Ok((file, size))
}

/// Reads the whole file once through the page cache with `threads` readers, so that a
/// page-cached run starts warm.
pub fn warm(path: &Path, threads: usize) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let (file, size) = open(path, false)?;
    let chunks = size.div_ceil(CHUNK);
    let threads = threads.max(1) as u64;
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..threads)
            .map(|t| {
                let file = &file;
                s.spawn(move || -> Result<()> {
                    let mut buf = vec![0u8; CHUNK as usize];
                    let mut c = t;
                    while c < chunks {
                        file.read_at(&mut buf, c * CHUNK)
                            .with_context(|| format!("warming at offset {}", c * CHUNK))?;
                        c += threads;
                    }
                    Ok(())
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|r| {
                r.join()
                    .unwrap_or_else(|_| bail!("a warming thread panicked"))
            })
            .collect::<Result<Vec<()>>>()
    })?;
    Ok(())
}
