//! What a file-backed array is made of: the files, how they are read, the service's
//! threads and the forwarder's SMs.

use crate::io::IoConfig;
use serde::Serialize;
use std::path::PathBuf;

/// How the service threads reach the files' data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FileMode {
    /// Through the page cache (the default): repeated reads of hot data come from RAM.
    Buffered,
    /// `O_DIRECT`: every read goes to the device; blocks must be aligned as the device
    /// asks (the array's block size follows it).
    Direct,
}

/// Configuration of a file-backed array ([`super::FileArray`]).
#[derive(Clone, Debug, Serialize)]
pub struct FileConfig {
    /// One "SSD" per path: a regular file or a block device. Several are striped like
    /// several SSDs (each holds every `stripe` of the array's bytes).
    pub paths: Vec<PathBuf>,
    /// Page cache or `O_DIRECT`.
    pub mode: FileMode,
    /// Open for writing (an exclusive `flock` per file); otherwise read-only (a shared
    /// `flock`), and writes complete with an error.
    pub writable: bool,
    /// Create missing files, and grow shorter ones, to this many bytes (implies
    /// `writable`). Block devices keep their size.
    pub size: Option<u64>,
    /// CPU threads executing the requests (each with its own io_uring), per GPU the
    /// array serves.
    pub workers: u32,
    /// SMs the forwarder kernel keeps (one block of 8 warps each; a warp serves up to
    /// 32 queue pairs); 0: enough for the queue pairs, at least 4.
    pub sms: u32,
    /// Pinned host memory for staging, in bytes, shared by every queue pair (each gets
    /// a power of two of slots, at most its depth).
    pub staging_bytes: u64,
    /// Write the verification pattern over every file when the array is built (tests
    /// and `bam bench --verify`; implies `writable`).
    pub fill_pattern: bool,
    /// Logical block size of the namespaces (512 by default); with `O_DIRECT` at least
    /// the alignment the files need.
    pub lba_size: u32,
    /// Fault injection: reads and writes touching these LBAs of any file complete with
    /// the fault's status, without touching the file (lies are the simulator's alone).
    pub fault: Option<crate::storage::Fault>,
    /// The GPU I/O layer.
    pub io: IoConfig,
}

/// Defaults the device grammar leaves out.
pub(crate) const DEFAULT_WORKERS: u32 = 4;
pub(crate) const DEFAULT_SMS: u32 = 0;
pub(crate) const DEFAULT_STAGING: u64 = 256 << 20;

impl FileConfig {
    /// `paths` read through the page cache, read-only, 4 workers, SMs for the queues (at
    /// least 4), 256 MiB of staging, 16 queue pairs per file.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        FileConfig {
            paths,
            mode: FileMode::Buffered,
            writable: false,
            size: None,
            workers: DEFAULT_WORKERS,
            sms: DEFAULT_SMS,
            staging_bytes: DEFAULT_STAGING,
            fill_pattern: false,
            lba_size: 512,
            fault: None,
            io: IoConfig {
                queues: 16,
                depth: 1024,
                ..IoConfig::new()
            },
        }
    }

    /// Whether the files are opened for writing.
    pub fn opens_writable(&self) -> bool {
        self.writable || self.size.is_some() || self.fill_pattern
    }
}
