//! The storage behind the controller model: RAM (sparse) or a file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use parking_lot::RwLock;

/// Byte-addressed backing store of a namespace. Concurrent calls on disjoint ranges are
/// allowed; overlapping writes land in some order, as on a real drive.
pub trait Medium: Send + Sync {
    /// Size in bytes.
    fn len(&self) -> u64;
    /// Whether the medium has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Reads `buf.len()` bytes at `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `data` at `offset`.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Zeroes `len` bytes at `offset`.
    fn zero(&self, offset: u64, len: u64) -> io::Result<()> {
        let zeros = vec![0u8; len.min(1 << 20) as usize];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeros.len() as u64);
            self.write_at(offset + done, &zeros[..n as usize])?;
            done += n;
        }
        Ok(())
    }
    /// Makes written data durable.
    fn flush(&self) -> io::Result<()>;
}

const CHUNK: usize = 1 << 20;

/// A sparse in-memory medium: 1 MiB chunks, allocated on first write; unwritten bytes
/// read as zero.
pub struct RamMedium {
    len: u64,
    chunks: Vec<RwLock<Option<Box<[u8]>>>>,
}

impl RamMedium {
    /// A medium of `len` bytes.
    pub fn new(len: u64) -> Self {
        let n = len.div_ceil(CHUNK as u64) as usize;
        RamMedium {
            len,
            chunks: (0..n).map(|_| RwLock::new(None)).collect(),
        }
    }

    fn for_each_chunk(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(usize, usize, std::ops::Range<usize>),
    ) -> io::Result<()> {
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "access beyond the medium",
            ));
        }
        let mut done = 0usize;
        while done < len {
            let pos = offset + done as u64;
            let chunk = (pos / CHUNK as u64) as usize;
            let within = (pos % CHUNK as u64) as usize;
            let n = (CHUNK - within).min(len - done);
            f(chunk, within, done..done + n);
            done += n;
        }
        Ok(())
    }
}

impl Medium for RamMedium {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let len = buf.len();
        self.for_each_chunk(offset, len, |c, within, range| {
            let n = range.len();
            match &*self.chunks[c].read() {
                Some(data) => buf[range].copy_from_slice(&data[within..within + n]),
                None => buf[range].fill(0),
            }
        })
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.for_each_chunk(offset, data.len(), |c, within, range| {
            let n = range.len();
            let mut slot = self.chunks[c].write();
            let chunk = slot.get_or_insert_with(|| vec![0u8; CHUNK].into_boxed_slice());
            chunk[within..within + n].copy_from_slice(&data[range]);
        })
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

/// A medium stored in a file (positional reads and writes, safe for concurrent use).
pub struct FileMedium {
    file: File,
    len: u64,
}

impl FileMedium {
    /// Opens `path`, creating it with `create_len` bytes (sparse) if it does not exist.
    /// An existing file keeps its size.
    pub fn open(path: &Path, create_len: u64) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut len = file.metadata()?.len();
        if len == 0 {
            file.set_len(create_len)?;
            len = create_len;
        }
        Ok(FileMedium { file, len })
    }
}

impl Medium for FileMedium {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_is_sparse_and_spans_chunks() {
        let m = RamMedium::new(3 * CHUNK as u64 + 100);
        let mut buf = vec![1u8; 10];
        m.read_at(5, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let data: Vec<u8> = (0..CHUNK + 50).map(|i| i as u8).collect();
        m.write_at(CHUNK as u64 - 25, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        m.read_at(CHUNK as u64 - 25, &mut back).unwrap();
        assert_eq!(back, data);
        assert!(m.read_at(3 * CHUNK as u64 + 95, &mut buf).is_err());
        assert!(m.write_at(u64::MAX - 2, &buf).is_err());
    }

    #[test]
    fn file_medium_creates_and_keeps_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("disk.img");
        let m = FileMedium::open(&p, 1 << 20).unwrap();
        assert_eq!(m.len(), 1 << 20);
        m.write_at(4096, b"hello").unwrap();
        m.zero(4097, 2).unwrap();
        drop(m);
        let m = FileMedium::open(&p, 1 << 30).unwrap();
        assert_eq!(m.len(), 1 << 20, "existing file keeps its size");
        let mut b = [0u8; 5];
        m.read_at(4096, &mut b).unwrap();
        assert_eq!(&b, b"h\0\0lo");
    }
}
