//! Typed errors of the GPU runtime, including the device-side error log's entries.

use std::fmt;

/// What went wrong with one I/O, as recorded by the device library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoErrorKind {
    /// The completion carried this NVMe status field ((SCT << 8) | SC with CRD/M/DNR).
    Nvme(bam_nvme::spec::Status),
    /// A wait ran past the configured timeout.
    Timeout,
    /// The request was invalid on the GPU side (bad range, buffer outside the region...).
    Invalid,
    /// The controller broke the protocol (unknown CID, bad SQ head).
    Protocol,
    /// The queue had failed (timed out) before.
    Aborted,
    /// Data read back differed from the expected pattern (benchmarks and tests).
    Verify {
        /// Mismatching 4-byte words.
        words: u32,
    },
    /// An unknown kind code.
    Unknown(u8),
}

/// One entry of the device-side error log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoError {
    /// What happened.
    pub kind: IoErrorKind,
    /// SSD index in the array.
    pub ssd: u16,
    /// NVMe queue id.
    pub qid: u16,
    /// Command id (0xffff when no command was built).
    pub cid: u16,
    /// NVMe opcode.
    pub opcode: u8,
    /// Starting LBA of the request.
    pub lba: u64,
    /// Blocks of the request.
    pub nlb: u32,
    /// GPU global timer at the time of the error, ns.
    pub time_ns: u64,
    /// The entry's raw status word: the NVMe status field, or for errors the GPU side
    /// raised itself a detail code (e.g. the cache's 0xC001 "no free slot" and 0xC002
    /// "line stayed busy" for cache timeouts, which have CID 0xffff).
    pub detail: u32,
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.kind {
            IoErrorKind::Nvme(s) => format!("NVMe status {s}"),
            IoErrorKind::Timeout => match (self.cid, self.detail) {
                (0xffff, crate::abi::BAM_CACHE_ERR_NO_SLOT) => {
                    "cache timeout (no free slot)".into()
                }
                (0xffff, crate::abi::BAM_CACHE_ERR_LINE_BUSY) => {
                    "cache timeout (line stayed busy)".into()
                }
                (0xffff, crate::abi::BAM_CACHE_ERR_QUARANTINED) => {
                    "write-back not settled: an earlier write of this line timed out, so the \
                     line stays quarantined in its slot (data kept in GPU memory, not written; \
                     Cache::recover gives it back and the next flush writes it)"
                        .into()
                }
                _ => "timeout".into(),
            },
            IoErrorKind::Invalid => match (self.cid, self.detail) {
                (0xffff, crate::abi::BAM_CACHE_ERR_READ_ONLY) => {
                    "write-back refused: the line belongs to a read-only array (written by a kernel; \
                     not stored)"
                        .into()
                }
                (0xffff, crate::abi::BAM_CACHE_ERR_RANGE) => "element index out of range".into(),
                _ => "invalid request".into(),
            },
            IoErrorKind::Protocol => "controller protocol violation".into(),
            IoErrorKind::Aborted if self.detail == crate::abi::BAM_SCAN_ERR_QUEUE_FAILED => {
                "scan not started: a queue pair has failed, and a read that did not settle may \
                 still land in the scan's slots (IoArray::recover gives the queues back)"
                    .into()
            }
            IoErrorKind::Aborted => {
                "queue failed earlier (IoArray::recover or Cache::recover gives it back)".into()
            }
            IoErrorKind::Verify { words } => format!("data mismatch ({words} words)"),
            IoErrorKind::Unknown(k) => format!("unknown error kind {k}"),
        };
        if let IoErrorKind::Protocol = self.kind {
            // The opcode field says why (abi.h, BAM_PROTO_*); the status field holds the
            // CQE's DW3.
            use crate::abi::{BAM_PROTO_CQ_FLOOD, BAM_PROTO_NO_COMMAND, BAM_PROTO_SQ_HEAD};
            let why = match self.opcode {
                BAM_PROTO_NO_COMMAND => format!(
                    "the CQE names no command in flight; the queue's words for its slot: mark {} seq {} cpl {:#x}",
                    self.lba >> 32,
                    self.lba & 0xffff_ffff,
                    self.nlb
                ),
                BAM_PROTO_SQ_HEAD => format!("the CQE's SQ head {} lies outside the queue", self.nlb),
                BAM_PROTO_CQ_FLOOD => format!("{} CQEs posted at once, more than the queue holds", self.lba),
                other => format!("reason {other}"),
            };
            return write!(
                f,
                "{what}: ssd {} qid {} cid {} (CQE DW3 {:#010x}): {why}",
                self.ssd, self.qid, self.cid, self.detail
            );
        }
        write!(
            f,
            "{what}: ssd {} qid {} cid {} opcode {:#04x} lba {} nlb {}",
            self.ssd, self.qid, self.cid, self.opcode, self.lba, self.nlb
        )
    }
}

impl IoError {
    pub(crate) fn from_entry(e: &crate::abi::ErrorEntry) -> Self {
        use crate::abi::*;
        let kind = match e.kind {
            BAM_ERR_NVME => IoErrorKind::Nvme(bam_nvme::spec::Status::from_field(e.status as u16)),
            BAM_ERR_TIMEOUT => IoErrorKind::Timeout,
            BAM_ERR_INVALID => IoErrorKind::Invalid,
            BAM_ERR_PROTOCOL => IoErrorKind::Protocol,
            BAM_ERR_ABORTED => IoErrorKind::Aborted,
            BAM_ERR_VERIFY => IoErrorKind::Verify { words: e.status },
            k => IoErrorKind::Unknown(k),
        };
        IoError {
            kind,
            ssd: e.ssd,
            qid: e.qid,
            cid: e.cid,
            opcode: e.opcode,
            lba: e.lba,
            nlb: e.nlb,
            time_ns: e.time_ns,
            detail: e.status,
        }
    }
}

/// Errors of the GPU runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No CUDA driver or no GPU.
    #[error("no usable GPU: {0}")]
    NoGpu(String),
    /// A CUDA driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(cudarc::driver::DriverError),
    /// The NVMe layer failed (bring-up, admin commands, opening a device).
    #[error(transparent)]
    Nvme(#[from] bam_nvme::Error),
    /// An argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// I/O errors recorded on the GPU during a kernel (`count` may exceed the entries kept).
    #[error("{count} I/O error(s) on the GPU, first: {}", .errors.first().map(|e| e.to_string()).unwrap_or_default())]
    Io {
        /// Errors recorded in total.
        count: u32,
        /// The entries the log could hold.
        errors: Vec<IoError>,
    },
    /// Dirty cache lines were not written back (`Cache::flush`, `Array::close`,
    /// `Cache::close`). `what` says what was attempted and what became of the lines: a
    /// line whose write-back failed stays valid and dirty in the cache, where the next
    /// `Cache::flush` retries it, until the cache itself goes away.
    #[error("{what}{}", first_io_error(*.count, .errors))]
    WriteBack {
        /// What failed and what became of the lines (a sentence).
        what: String,
        /// Lines whose write-back failed.
        failed: u64,
        /// Lines skipped because they were pinned or busy (a kernel still uses them).
        pinned: u64,
        /// I/O errors the device logged meanwhile (`count` may exceed the entries kept).
        count: u32,
        /// The entries the log could hold.
        errors: Vec<IoError>,
    },
    /// The platform cannot do what the backend needs (no nvidia_p2p, an IOMMU mode that
    /// breaks peer-to-peer DMA, a BAR1 too small, ...): what is missing and how to fix it.
    #[error("{what}: {fix}")]
    Platform {
        /// What cannot be done, and why.
        what: String,
        /// What the user can do about it.
        fix: String,
    },
    /// A GPU operation did not finish in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// A failed queue pair could not be recovered (`IoArray::recover`): its controller did
    /// not confirm the deletion, or the backend's side did not go quiet. The queue pair
    /// stays failed and the buffers of its commands stay quarantined.
    #[error(
        "recovery of queue pair {qp} (queue {qid} of SSD {ssd}) failed; it stays failed and          its buffers quarantined: {source}"
    )]
    Recovery {
        /// Index of the queue pair in `IoArray::queue_pairs`.
        qp: usize,
        /// Its NVMe queue id.
        qid: u16,
        /// Its SSD.
        ssd: u16,
        /// What went wrong.
        source: Box<Error>,
    },
    /// Host I/O (files).
    #[error(transparent)]
    Os(#[from] std::io::Error),
}

// By hand rather than `#[from]`: the message already holds the driver's error, and a
// `source` too would print it twice in error chains ("CUDA driver: X: X").
impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::Driver(e)
    }
}

fn first_io_error(count: u32, errors: &[IoError]) -> String {
    match errors.first() {
        Some(e) => format!("; {count} I/O error(s) on the GPU, first: {e}"),
        None if count > 0 => format!("; {count} I/O error(s) on the GPU"),
        None => String::new(),
    }
}

/// Result of the GPU runtime.
pub type Result<T> = std::result::Result<T, Error>;
