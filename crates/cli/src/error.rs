//! The command's error: one line that says what failed, on which device, why, and what
//! to do about it.
//!
//! ```text
//! bam: error: <what> (device <DEV>): <cause> — <what to do>
//! ```
//!
//! Usage errors (a malformed device string, contradictory flags) exit with code 2, like
//! clap's own; everything else exits with 1.

use bam_nvme::model::ImageProblem;
use bam_nvme::Error as NvmeError;
use serde::Serialize;
use std::fmt;

/// Exit code of a runtime error.
pub const EXIT_RUNTIME: i32 = 1;
/// Exit code of a usage error (the same as clap's).
pub const EXIT_USAGE: i32 = 2;
/// Exit code after Ctrl-C (128 + SIGINT, what a shell reports for a process it killed).
pub const EXIT_INTERRUPTED: i32 = 130;

/// A failure of a `bam` command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CliError {
    /// What was being done, e.g. "cannot read".
    pub what: String,
    /// The device, as the user named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Why it failed.
    pub cause: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// A usage error (exit code 2) rather than a runtime error (exit code 1).
    #[serde(skip)]
    pub usage: bool,
    /// Stopped by Ctrl-C (exit code 130).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The command already put this error in its JSON result on stdout (as `"error"`),
    /// so `main` prints no second JSON document.
    #[serde(skip)]
    pub in_json_output: bool,
}

/// Result alias of the commands.
pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// A runtime error.
    pub fn new(what: impl Into<String>, cause: impl Into<String>) -> Self {
        CliError {
            what: what.into(),
            device: None,
            cause: cause.into(),
            hint: None,
            usage: false,
            interrupted: false,
            in_json_output: false,
        }
    }

    /// A usage error (exit code 2).
    pub fn usage(what: impl Into<String>, cause: impl Into<String>) -> Self {
        CliError {
            usage: true,
            ..Self::new(what, cause)
        }
    }

    /// The command stopped at Ctrl-C (exit code 130); `cause` says how far it got.
    pub fn interrupted(what: impl Into<String>, cause: impl Into<String>) -> Self {
        CliError {
            interrupted: true,
            ..Self::new(what, cause)
        }
    }

    /// Names the device.
    pub fn on(mut self, device: impl Into<String>) -> Self {
        self.device = Some(device.into());
        self
    }

    /// Adds what to do.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Marks the error as already part of the command's JSON result on stdout.
    pub fn in_json_output(mut self) -> Self {
        self.in_json_output = true;
        self
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        if self.interrupted {
            EXIT_INTERRUPTED
        } else if self.usage {
            EXIT_USAGE
        } else {
            EXIT_RUNTIME
        }
    }

    /// A file-system error on `path`.
    pub fn file(what: impl Into<String>, path: &str, e: &std::io::Error) -> Self {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound => "check the path",
            std::io::ErrorKind::PermissionDenied => "check the file's permissions",
            std::io::ErrorKind::BrokenPipe => "the reader of the output went away",
            _ => "check the file and the file system",
        };
        CliError::new(what, format!("{path}: {}", one_line(&e.to_string()))).hint(hint)
    }

    /// An error of the NVMe layer, with a cause and a hint chosen by its variant.
    pub fn nvme(what: impl Into<String>, device: &str, e: &NvmeError) -> Self {
        if let NvmeError::ModelImage { path, problem } = e {
            return CliError::new(what, one_line(&e.to_string()))
                .on(device)
                .hint(image_hint(path, problem));
        }
        let (cause, hint) = describe(e);
        let mut err = CliError::new(what, one_line(&cause)).on(device);
        err.hint = hint.map(str::to_string).or_else(|| match e {
            NvmeError::DeviceUnavailable { .. } | NvmeError::Os { .. } => {
                Some(unavailable_hint(device).to_string())
            }
            _ => None,
        });
        err
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn unavailable_hint(device: &str) -> &'static str {
    if device.starts_with("vfio:") {
        "check the PCI address (`lspci -D`), that the device is bound to vfio-pci and that you may open /dev/vfio"
    } else if device.starts_with("kmod:") {
        "load the bam kernel module and check the permissions of the device node"
    } else if device.starts_with("model:") {
        "check that the image's directory exists and is writable, or pick another path"
    } else {
        "check that the device exists and that you may open it"
    }
}

/// What to do about an unusable model image.
fn image_hint(path: &std::path::Path, problem: &ImageProblem) -> String {
    let p = path.display();
    match problem {
        ImageProblem::Missing => format!(
            "check the path; to create the image, give its size once: --device model:{p},size=1G \
             (or use a throwaway model:ram:1G)"
        ),
        ImageProblem::Empty => format!("give its size to make it an image: --device model:{p},size=1G"),
        ImageProblem::NotAnImage { .. } => format!(
            "to use it as a disk image, import it: bam load {p} --device model:NEW.img,size=SIZE"
        ),
        ImageProblem::InUse { .. } => {
            "another bam command is using the image; wait for it to finish, or use another image".into()
        }
        ImageProblem::UnsupportedVersion { .. } => {
            "open it with the bam that wrote it, or create a new image".into()
        }
        ImageProblem::LbaMismatch { .. } => {
            "drop lba= to use the image's block size, or create a new image with this one".into()
        }
        ImageProblem::CapacityMismatch { .. } => {
            "drop size= to open the image at its own size, or create a new image of this size".into()
        }
        _ => "the image is damaged: create a new one (model:NEW.img,size=SIZE) and load the data again".into(),
    }
}

/// The cause (a sentence) and what to do, for each typed error of `bam-nvme`.
fn describe(e: &NvmeError) -> (String, Option<&'static str>) {
    use NvmeError::*;
    match e {
        LbaOutOfRange {
            nsid,
            lba,
            blocks,
            capacity,
        } => (
            format!(
                "the range of {blocks} block(s) at LBA {lba} (LBA {lba}..{}) is beyond namespace {nsid}, which has {capacity} blocks",
                lba.checked_add(*blocks)
                    .map_or_else(|| "2^64 and past".to_string(), |end| end.to_string())
            ),
            Some("use a smaller --lba or a larger device"),
        ),
        DeviceUnavailable { reason, .. } => (reason.clone(), None),
        Timeout { what, after } => (
            format!("timed out after {after:?} waiting for {what}"),
            Some("the device stopped answering; check it with `bam info`, then reset or power-cycle it"),
        ),
        ControllerFatal { during } => (
            format!("the controller reports a fatal error (CSTS.CFS=1) {during}"),
            Some("reset or power-cycle the controller"),
        ),
        Io { .. } => (
            e.to_string(),
            Some("the device failed the command; check its health and error log, and retry"),
        ),
        Command { .. } => (
            e.to_string(),
            Some("the controller refused an admin command; check that it is healthy and supported"),
        ),
        TooManyQueues { .. } => (e.to_string(), Some("use fewer --queues")),
        InvalidQueueDepth { .. } => (e.to_string(), Some("pick a --qdepth in that range")),
        NoSuchNamespace { .. } => (
            e.to_string(),
            Some("pick an active namespace with --nsid (see `bam info`)"),
        ),
        ZeroLength { .. } => (e.to_string(), Some("give a non-zero length")),
        TransferTooLarge { .. } | Misaligned { .. } | BufferTooSmall { .. } => (
            e.to_string(),
            Some("this is a bug in bam; please report it with the command line"),
        ),
        Os { .. } => (e.to_string(), None),
        Unsupported { .. } => (
            e.to_string(),
            Some("use a device whose transport supports it"),
        ),
        InvalidArgument(msg) => (
            msg.clone(),
            Some("fix the device options (see `bam --help`)"),
        ),
        Protocol(_) => (
            e.to_string(),
            Some("the controller misbehaved; rerun with -vv and report it"),
        ),
        _ => (e.to_string(), None),
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.what)?;
        if let Some(d) = &self.device {
            write!(f, " (device {d})")?;
        }
        write!(f, ": {}", self.cause)?;
        if let Some(h) = &self.hint {
            write!(f, " — {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CliError {}

/// Attaches what was being done and the device to a `bam-nvme` result.
pub trait NvmeContext<T> {
    /// Converts the error with [`CliError::nvme`].
    fn during(self, what: &str, device: &str) -> CliResult<T>;
}

impl<T> NvmeContext<T> for bam_nvme::Result<T> {
    fn during(self, what: &str, device: &str) -> CliResult<T> {
        self.map_err(|e| CliError::nvme(what, device, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_format() {
        let e = CliError::nvme(
            "cannot read",
            "model:x.img",
            &NvmeError::LbaOutOfRange {
                nsid: 1,
                lba: 10,
                blocks: 5,
                capacity: 12,
            },
        );
        let s = e.to_string();
        assert!(s.starts_with("cannot read (device model:x.img): the range"));
        assert!(s.contains("LBA 10..15"));
        assert!(s.ends_with("— use a smaller --lba or a larger device"));
        assert!(!s.contains('\n'));
        assert_eq!(e.exit_code(), EXIT_RUNTIME);
        assert_eq!(CliError::usage("x", "y").exit_code(), EXIT_USAGE);
    }

    #[test]
    fn unavailable_gets_a_hint_by_transport() {
        let e = CliError::nvme(
            "cannot open",
            "vfio:0000:01:00.0",
            &NvmeError::DeviceUnavailable {
                device: "vfio:0000:01:00.0".into(),
                reason: "no such\ndevice".into(),
            },
        );
        assert_eq!(e.cause, "no such device");
        assert!(e.hint.unwrap().contains("vfio-pci"));
    }
}
