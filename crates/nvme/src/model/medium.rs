//! The storage behind the controller model: RAM (sparse) or a file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use parking_lot::RwLock;

use super::image_creation::{
    create_image, names, remove_stale_temps, Created, NO_HOOK, OPEN_ROUNDS,
};
pub use super::image_creation::{CreationHook, CREATION_STEPS};
pub use super::image_header::{
    ImageHeader, ImageProblem, IMAGE_HEADER_BYTES, IMAGE_MAGIC, IMAGE_VERSION,
};
use std::collections::HashMap;

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
    /// Written data may sit in a volatile cache until [`Medium::flush`] (the model then
    /// reports a volatile write cache in Identify Controller, VWC bit 0).
    fn volatile_cache(&self) -> bool {
        false
    }
}

const CHUNK: usize = 1 << 20;

/// Shards of a [`RamMedium`]'s chunk table (chunk `c` in shard `c % SHARDS`), so that
/// threads touching different chunks rarely wait for each other.
const SHARDS: usize = 64;

/// A sparse in-memory medium: 1 MiB chunks, allocated on first write; unwritten bytes
/// read as zero. Nothing is allocated for the chunks not written, not even a table entry,
/// so a medium of any size costs nothing until it is written (a table of one lock per
/// chunk once made `model:ram:1024T` allocate 24 GiB up front and abort).
pub struct RamMedium {
    len: u64,
    shards: Vec<RwLock<HashMap<u64, Box<[u8]>>>>,
}

impl RamMedium {
    /// A medium of `len` bytes.
    pub fn new(len: u64) -> Self {
        RamMedium {
            len,
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, chunk: u64) -> &RwLock<HashMap<u64, Box<[u8]>>> {
        &self.shards[(chunk % SHARDS as u64) as usize]
    }

    fn for_each_chunk(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(u64, usize, std::ops::Range<usize>),
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
            let chunk = pos / CHUNK as u64;
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
            match self.shard(c).read().get(&c) {
                Some(data) => buf[range].copy_from_slice(&data[within..within + n]),
                None => buf[range].fill(0),
            }
        })
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.for_each_chunk(offset, data.len(), |c, within, range| {
            let n = range.len();
            let mut shard = self.shard(c).write();
            let chunk = shard
                .entry(c)
                .or_insert_with(|| vec![0u8; CHUNK].into_boxed_slice());
            chunk[within..within + n].copy_from_slice(&data[range]);
        })
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

/// How [`FileMedium::open`] opens an image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageOptions {
    /// Create a missing (or empty) image with this geometry; without it a missing image
    /// is [`ImageProblem::Missing`].
    pub create: Option<ImageHeader>,
    /// Open the file read-only under a shared lock (any number of readers, no writer);
    /// otherwise read-write under an exclusive lock.
    pub read_only: bool,
    /// An existing image must have this block size.
    pub lba_size: Option<u32>,
    /// An existing image must hold this many bytes of data.
    pub capacity_bytes: Option<u64>,
}

/// A medium stored in a model image file: a [`IMAGE_HEADER_BYTES`]-byte header
/// ([`ImageHeader`]), then the blocks. Positional reads and writes, safe for concurrent
/// use. The file is locked (`flock`) for as long as the medium lives: exclusively when
/// read-write, shared when read-only.
pub struct FileMedium {
    file: nix::fcntl::Flock<File>,
    header: ImageHeader,
    len: u64,
    read_only: bool,
}

impl std::fmt::Debug for FileMedium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileMedium")
            .field("header", &self.header)
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl FileMedium {
    /// Opens the image at `path` (creating it if `opts.create` says so), locks it and
    /// checks its header against `opts`.
    ///
    /// A new image is written whole under a temporary name and only then given its name
    /// (see [`CREATION_STEPS`]), so a crash at any point leaves no image or a valid one,
    /// never a half-written file; an empty file at `path` is replaced the same way.
    ///
    /// Errors: [`Error::ModelImage`](crate::Error::ModelImage) for a missing, foreign,
    /// damaged, mismatched or locked image; [`Error::DeviceUnavailable`](crate::Error::DeviceUnavailable)
    /// when the file cannot be opened, read or created (permissions, no such directory).
    pub fn open(path: &Path, opts: &ImageOptions) -> crate::Result<Self> {
        match Self::open_with_hook(path, opts, NO_HOOK)? {
            Some(m) => Ok(m),
            // NO_HOOK never stops a creation.
            None => Err(crate::Error::DeviceUnavailable {
                device: format!("model:{}", path.display()),
                reason: "the image's creation was stopped".into(),
            }),
        }
    }

    /// [`FileMedium::open`] with a hook into creation, for crash tests: `None` when the
    /// hook stopped the creation (files left as a process killed there would leave them).
    #[doc(hidden)]
    pub fn open_with_hook(
        path: &Path,
        opts: &ImageOptions,
        hook: CreationHook<'_>,
    ) -> crate::Result<Option<Self>> {
        if opts.read_only && opts.create.is_some() {
            return Self::create_then_open_read_only(path, opts, hook);
        }
        // With creation: the geometry and the file length it gives.
        let create = match opts.create {
            Some(h) => Some((
                h,
                h.file_bytes().ok_or_else(|| {
                    image_err(
                        path,
                        ImageProblem::Corrupt(format!(
                            "{} blocks of {} bytes is too large",
                            h.blocks, h.lba_size
                        )),
                    )
                })?,
            )),
            None => None,
        };
        if !opts.read_only {
            remove_stale_temps(path);
        }
        let Some(file) = lock_or_create(path, opts, create, hook)? else {
            return Ok(None);
        };
        let (header, data) = check_image(path, &file, opts)?;
        Ok(Some(FileMedium {
            file,
            header,
            len: data,
            read_only: opts.read_only,
        }))
    }

    /// Asked to create, but opening read-only: makes the image first (read-write, where it
    /// is missing or empty), then opens it read-only.
    fn create_then_open_read_only(
        path: &Path,
        opts: &ImageOptions,
        hook: CreationHook<'_>,
    ) -> crate::Result<Option<Self>> {
        let absent = match std::fs::metadata(path) {
            Ok(m) => m.len() == 0,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        if absent {
            let rw = ImageOptions {
                read_only: false,
                ..*opts
            };
            if Self::open_with_hook(path, &rw, hook)?.is_none() {
                return Ok(None);
            }
        }
        let ro = ImageOptions {
            create: None,
            ..*opts
        };
        Self::open_with_hook(path, &ro, hook)
    }

    /// The image's header.
    pub fn header(&self) -> ImageHeader {
        self.header
    }

    /// Whether the file was opened read-only.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    fn at(&self, offset: u64, len: usize) -> io::Result<u64> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.len => Ok(offset + IMAGE_HEADER_BYTES),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "access beyond the medium",
            )),
        }
    }
}

/// The error of an image at `path` that cannot be used.
fn image_err(path: &Path, problem: ImageProblem) -> crate::Error {
    crate::Error::ModelImage {
        path: path.to_path_buf(),
        problem,
    }
}

/// The error of a file operation on the image at `path`: `what` could not be done, `e`
/// says why.
fn os_err(path: &Path, what: &str, e: io::Error) -> crate::Error {
    crate::Error::DeviceUnavailable {
        device: format!("model:{}", path.display()),
        reason: format!("cannot {what} the image file: {e}"),
    }
}

/// Opens the image at `path` and locks it as `opts` says (shared when read-only,
/// exclusive otherwise), creating it where it is missing or empty when `create` gives its
/// geometry and file length. `None` when the hook stopped a creation.
fn lock_or_create(
    path: &Path,
    opts: &ImageOptions,
    create: Option<(ImageHeader, u64)>,
    hook: CreationHook<'_>,
) -> crate::Result<Option<Flock<File>>> {
    let mut oo = OpenOptions::new();
    oo.read(true).write(!opts.read_only);
    let arg = if opts.read_only {
        FlockArg::LockSharedNonblock
    } else {
        FlockArg::LockExclusiveNonblock
    };
    let open_verb = if create.is_some() {
        "open or create"
    } else {
        "open"
    };
    // Another process may create the image, or replace an empty file, between our
    // looking and our locking: then look again.
    let mut rounds = 0;
    loop {
        rounds += 1;
        if rounds > OPEN_ROUNDS {
            return Err(os_err(
                path,
                open_verb,
                io::Error::other("it was replaced again and again while being opened"),
            ));
        }
        let made = match oo.open(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let Some((h, total)) = create else {
                    return Err(image_err(path, ImageProblem::Missing));
                };
                create_image(path, h, total, None, hook)
            }
            Err(e) => return Err(os_err(path, open_verb, e)),
            Ok(file) => {
                let file = match Flock::lock(file, arg) {
                    Ok(f) => f,
                    Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                        return Err(image_err(
                            path,
                            ImageProblem::InUse {
                                writer: opts.read_only,
                            },
                        ))
                    }
                    Err((_, e)) => return Err(os_err(path, "lock", io::Error::from(e))),
                };
                // Opened before a creation replaced an empty file: not the image.
                if !names(path, &file).map_err(|e| os_err(path, "inspect", e))? {
                    continue;
                }
                let inspected = file.metadata().map_err(|e| os_err(path, "inspect", e))?;
                match create {
                    Some((h, total)) if inspected.len() == 0 => {
                        create_image(path, h, total, Some(&file), hook)
                    }
                    _ => return Ok(Some(file)),
                }
            }
        };
        match made.map_err(|(what, e)| os_err(path, what, e))? {
            Created::Image(f) => return Ok(Some(f)),
            Created::Raced => continue,
            Created::Stopped => return Ok(None),
        }
    }
}

/// Reads the header of the opened image `file` at `path` and checks it against `opts`:
/// returns the header and the bytes of data after it.
fn check_image(
    path: &Path,
    file: &Flock<File>,
    opts: &ImageOptions,
) -> crate::Result<(ImageHeader, u64)> {
    let len = file
        .metadata()
        .map_err(|e| os_err(path, "inspect", e))?
        .len();
    let mut head = vec![0u8; len.min(IMAGE_HEADER_BYTES) as usize];
    file.read_exact_at(&mut head, 0)
        .map_err(|e| os_err(path, "read", e))?;
    let header = ImageHeader::decode(&head, len).map_err(|p| image_err(path, p))?;
    if let Some(asked) = opts.lba_size {
        if asked != header.lba_size {
            return Err(image_err(
                path,
                ImageProblem::LbaMismatch {
                    image: header.lba_size,
                    asked,
                },
            ));
        }
    }
    let data = len - IMAGE_HEADER_BYTES;
    if let Some(asked) = opts.capacity_bytes {
        if asked != data {
            return Err(image_err(
                path,
                ImageProblem::CapacityMismatch { image: data, asked },
            ));
        }
    }
    Ok((header, data))
}

impl Medium for FileMedium {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, self.at(offset, buf.len())?)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the image is open read-only",
            ));
        }
        self.file.write_all_at(data, self.at(offset, data.len())?)
    }
    fn flush(&self) -> io::Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.file.sync_data()
    }
    /// Writes land in the page cache until `sync_data`.
    fn volatile_cache(&self) -> bool {
        !self.read_only
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

    fn create(lba_size: u32, blocks: u64) -> ImageOptions {
        ImageOptions {
            create: Some(ImageHeader { lba_size, blocks }),
            ..ImageOptions::default()
        }
    }

    fn problem(r: crate::Result<FileMedium>) -> ImageProblem {
        match r {
            Err(crate::Error::ModelImage { problem, .. }) => problem,
            Err(e) => panic!("not an image error: {e}"),
            Ok(m) => panic!("opened: {m:?}"),
        }
    }

    #[test]
    fn file_medium_creates_with_a_header_and_keeps_its_geometry() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("disk.img");
        let m = FileMedium::open(&p, &create(512, 2048)).unwrap();
        assert_eq!(m.len(), 1 << 20);
        assert_eq!(
            m.header(),
            ImageHeader {
                lba_size: 512,
                blocks: 2048
            }
        );
        m.write_at(4096, b"hello").unwrap();
        m.zero(4097, 2).unwrap();
        assert!(
            m.write_at((1 << 20) - 2, b"abc").is_err(),
            "beyond the data"
        );
        drop(m);
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len() as u64, IMAGE_HEADER_BYTES + (1 << 20));
        assert_eq!(&raw[..8], b"BAMMODEL");
        assert_eq!(&raw[4096 + 4096..4096 + 4101], b"h\0\0lo");
        // Reopened with other creation sizes: the image keeps its own.
        let m = FileMedium::open(&p, &create(512, 1 << 30)).unwrap();
        assert_eq!(m.len(), 1 << 20, "an existing image keeps its size");
        let mut b = [0u8; 5];
        m.read_at(4096, &mut b).unwrap();
        assert_eq!(&b, b"h\0\0lo");
        drop(m);
        // Opened without creation, as it is.
        let m = FileMedium::open(&p, &ImageOptions::default()).unwrap();
        assert_eq!(m.header().blocks, 2048);
    }

    #[test]
    fn missing_empty_and_raw_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("none.img");
        assert_eq!(
            problem(FileMedium::open(&p, &ImageOptions::default())),
            ImageProblem::Missing
        );
        let ro = ImageOptions {
            read_only: true,
            ..ImageOptions::default()
        };
        assert_eq!(problem(FileMedium::open(&p, &ro)), ImageProblem::Missing);
        assert!(!p.exists(), "nothing created");

        std::fs::write(&p, b"").unwrap();
        assert_eq!(
            problem(FileMedium::open(&p, &ImageOptions::default())),
            ImageProblem::Empty
        );
        // An empty file is made an image when creation is asked for.
        assert_eq!(FileMedium::open(&p, &create(4096, 4)).unwrap().len(), 16384);

        let raw = dir.path().join("raw.img");
        std::fs::write(&raw, vec![7u8; 1000]).unwrap();
        let e = problem(FileMedium::open(&raw, &create(512, 8)));
        assert_eq!(e, ImageProblem::NotAnImage { len: 1000 });
        assert!(e.to_string().contains("bam load FILE"), "{e}");
        assert_eq!(std::fs::read(&raw).unwrap(), vec![7u8; 1000], "untouched");
    }

    #[test]
    fn geometry_checks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("g.img");
        drop(FileMedium::open(&p, &create(4096, 16)).unwrap());
        let e = problem(FileMedium::open(
            &p,
            &ImageOptions {
                lba_size: Some(512),
                ..ImageOptions::default()
            },
        ));
        assert_eq!(
            e,
            ImageProblem::LbaMismatch {
                image: 4096,
                asked: 512
            }
        );
        let e = problem(FileMedium::open(
            &p,
            &ImageOptions {
                capacity_bytes: Some(1 << 20),
                ..ImageOptions::default()
            },
        ));
        assert_eq!(
            e,
            ImageProblem::CapacityMismatch {
                image: 65536,
                asked: 1 << 20
            }
        );
        let ok = ImageOptions {
            lba_size: Some(4096),
            capacity_bytes: Some(65536),
            ..ImageOptions::default()
        };
        assert_eq!(FileMedium::open(&p, &ok).unwrap().header().blocks, 16);
        // Truncated or extended files.
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(4096 + 65535).unwrap();
        assert_eq!(
            problem(FileMedium::open(&p, &ImageOptions::default())),
            ImageProblem::LengthMismatch {
                expected: 4096 + 65536,
                actual: 4096 + 65535
            }
        );
        f.set_len(100).unwrap();
        assert_eq!(
            problem(FileMedium::open(&p, &ImageOptions::default())),
            ImageProblem::TruncatedHeader { len: 100 }
        );
    }

    #[test]
    fn one_writer_or_many_readers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.img");
        let ro = ImageOptions {
            read_only: true,
            ..ImageOptions::default()
        };
        let w = FileMedium::open(&p, &create(512, 8)).unwrap();
        assert_eq!(
            problem(FileMedium::open(&p, &ImageOptions::default())),
            ImageProblem::InUse { writer: false }
        );
        assert_eq!(
            problem(FileMedium::open(&p, &ro)),
            ImageProblem::InUse { writer: true }
        );
        drop(w);
        let r1 = FileMedium::open(&p, &ro).unwrap();
        let r2 = FileMedium::open(&p, &ro).unwrap();
        assert!(r1.read_only() && r2.read_only());
        assert!(r1.write_at(0, b"x").is_err(), "read-only");
        let mut b = [1u8; 4];
        r2.read_at(0, &mut b).unwrap();
        assert_eq!(b, [0; 4]);
        assert!(matches!(
            problem(FileMedium::open(&p, &ImageOptions::default())),
            ImageProblem::InUse { .. }
        ));
        drop((r1, r2));
        FileMedium::open(&p, &ImageOptions::default()).unwrap();
    }

    #[test]
    fn read_only_opening_may_create() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.img");
        let opts = ImageOptions {
            read_only: true,
            ..create(512, 8)
        };
        let m = FileMedium::open(&p, &opts).unwrap();
        assert!(m.read_only());
        assert_eq!(m.len(), 4096);
    }
}
