//! The crate's error type. Every failure a caller can act on has its own variant.

use crate::spec::Status;
use std::time::Duration;

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of NVMe bring-up, admin commands, I/O and transports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The controller completed a command with an error status.
    #[error("{command} failed on queue {qid} (cid {cid}): {status}")]
    Command {
        /// The command's name.
        command: &'static str,
        /// Submission queue id.
        qid: u16,
        /// Command id.
        cid: u16,
        /// The status the controller returned.
        status: Status,
    },
    /// An I/O command failed; names the LBA range.
    #[error("{command} of {blocks} block(s) at LBA {lba} (namespace {nsid}) failed: {status}")]
    Io {
        /// The command's name.
        command: &'static str,
        /// Namespace.
        nsid: u32,
        /// Starting LBA.
        lba: u64,
        /// Number of blocks.
        blocks: u32,
        /// The status the controller returned.
        status: Status,
    },
    /// A bounded wait ran out.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was being waited for.
        what: String,
        /// How long we waited.
        after: Duration,
    },
    /// The controller reported Controller Fatal Status (CSTS.CFS = 1).
    #[error("controller reports a fatal error (CSTS.CFS=1) {during}; reset or power-cycle it")]
    ControllerFatal {
        /// What was happening when it was noticed.
        during: String,
    },
    /// An LBA range reaches beyond the namespace. Nothing was sent to the device.
    #[error("LBA range {lba}..{end} is beyond namespace {nsid}, which has {capacity} blocks", end = lba.saturating_add(*blocks))]
    LbaOutOfRange {
        /// Namespace.
        nsid: u32,
        /// Starting LBA.
        lba: u64,
        /// Number of blocks asked for.
        blocks: u64,
        /// Namespace size in blocks.
        capacity: u64,
    },
    /// A transfer of zero bytes or blocks was asked for.
    #[error("zero-length transfer: {what}")]
    ZeroLength {
        /// Which transfer.
        what: String,
    },
    /// A single command would move more than the controller's MDTS.
    #[error("transfer of {bytes} bytes exceeds the controller's maximum data transfer size of {max} bytes; split it")]
    TransferTooLarge {
        /// Bytes asked for.
        bytes: usize,
        /// The controller's limit.
        max: usize,
    },
    /// A buffer or length is not aligned as required.
    #[error("{what} = {value:#x} is not a multiple of {align}")]
    Misaligned {
        /// What is misaligned.
        what: &'static str,
        /// The value.
        value: u64,
        /// The alignment required.
        align: u64,
    },
    /// A buffer is too small for the transfer.
    #[error("buffer of {have} bytes is too small for {need} bytes")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// More I/O queues were asked for than the controller grants.
    #[error(
        "asked for I/O queue pair number {requested}, but the controller grants only {granted}"
    )]
    TooManyQueues {
        /// Queue pairs asked for.
        requested: usize,
        /// Queue pairs granted.
        granted: usize,
    },
    /// A queue depth outside 2..=CAP.MQES.
    #[error("queue depth {depth} is invalid: it must be between 2 and {max} (CAP.MQES)")]
    InvalidQueueDepth {
        /// Depth asked for.
        depth: u32,
        /// Controller maximum.
        max: u32,
    },
    /// The namespace does not exist on the controller.
    #[error("namespace {nsid} does not exist (active namespaces: {active:?})")]
    NoSuchNamespace {
        /// Namespace asked for.
        nsid: u32,
        /// Namespaces that exist.
        active: Vec<u32>,
    },
    /// The device could not be opened or is absent.
    #[error("{device}: {reason}")]
    DeviceUnavailable {
        /// The device as the user named it.
        device: String,
        /// What went wrong and what to do.
        reason: String,
    },
    /// A controller model's image file cannot be used: missing, not an image, damaged,
    /// of another version or geometry, or in use by another process.
    #[error("model image {}: {problem}", path.display())]
    ModelImage {
        /// The image file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        problem: crate::model::ImageProblem,
    },
    /// A system call failed.
    #[error("{context}: {source}")]
    Os {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The transport cannot do this.
    #[error("{transport} does not support {what}")]
    Unsupported {
        /// The transport.
        transport: String,
        /// What was asked for.
        what: String,
    },
    /// An argument was out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The controller broke the protocol (e.g. a completion for an unknown command) or
    /// reported a value outside what the specification allows.
    #[error("protocol violation by the controller: {0}")]
    Protocol(String),
    /// An I/O queue pair was poisoned by an earlier timeout or protocol violation: commands
    /// may still be outstanding on it (their buffers are quarantined), so it takes no new
    /// ones. Drop it (which deletes the queues on the controller) and create another.
    #[error("I/O queue pair {qid} is unusable after {reason}; drop it and create a new one")]
    QueuePoisoned {
        /// Queue id.
        qid: u16,
        /// The error that poisoned it.
        reason: String,
    },
    /// The admin queue is unusable after an admin command timed out, the controller broke
    /// the admin protocol or was shut down: the controller must be reset
    /// ([`crate::Controller::reset`]).
    #[error("the admin queue is unusable after {reason}: the controller must be reset")]
    ControllerNeedsReset {
        /// The error that made it unusable.
        reason: String,
    },
    /// The controller reports it is no longer ready (CSTS.RDY=0) while the driver has it
    /// enabled: it was reset or disabled behind the driver's back. Reset it
    /// ([`crate::Controller::reset`]).
    #[error("controller is no longer ready (CSTS.RDY=0) {during}; reset it")]
    ControllerNotReady {
        /// What was happening when it was noticed.
        during: String,
    },
    /// An I/O queue pair created before [`crate::Controller::reset`]: the reset deleted
    /// its queues on the controller (and released the buffers of its timed-out commands),
    /// so it takes no commands. Drop it and create a new one.
    #[error(
        "I/O queue pair {qid} was deleted by a controller reset; drop it and create a new one"
    )]
    QueueInvalidated {
        /// Queue id.
        qid: u16,
    },
}

impl Error {
    /// Wraps an OS error with what was being done.
    pub fn os(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Os {
            context: context.into(),
            source,
        }
    }

    /// The NVMe status, if the error is a command failure.
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Command { status, .. } | Error::Io { status, .. } => Some(*status),
            _ => None,
        }
    }
}
