//! The bam-module check: bam_nvme loaded, its version, and for each of its device nodes
//! the ABI version and nvidia_p2p support the module reports.

use super::checks::{read_trim, Context};
use super::{ids, Check};
use crate::commands::list::Entry;
use bam_nvme::transport::kmod::{self, INFO_P2P_AVAILABLE, INFO_P2P_BUILT};
use std::path::Path;

/// How to build and load the module (the fix of the bam-module lines).
const LOAD_MODULE: &str = "make -C kernel-module && insmod kernel-module/bam_nvme.ko";

/// What opening a `/dev/bam-nvmeN` node told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Opened: the module's ABI version (equal to bam's, else the open fails) and its
    /// `INFO_*` flags.
    Opened {
        /// `BAM_NVME_ABI_VERSION` of the module.
        abi: u32,
        /// `INFO_*` flags.
        flags: u32,
    },
    /// Not opened: only root (or a changed node mode) may open it.
    NeedsRoot,
    /// Another process owns it (the module allows one owner).
    Busy(String),
    /// The module speaks another ABI version.
    AbiMismatch(String),
    /// Another error.
    Failed(String),
}

/// Opens a device node of the module (only when this process may read and write it)
/// and reads its facts. Closing it quiesces the controller, which nobody else owns
/// (the open is exclusive).
pub fn probe_node(node: &str) -> Probe {
    let Ok(c) = std::ffi::CString::new(node) else {
        return Probe::Failed("bad path".into());
    };
    // SAFETY: `c` is a valid NUL-terminated path; access only checks permissions.
    if unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) } != 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Probe::NeedsRoot,
            _ => Probe::Failed(e.to_string()),
        };
    }
    match kmod::KmodTransport::open(node) {
        Ok(t) => Probe::Opened {
            abi: t.info().abi_version,
            flags: t.info().flags,
        },
        Err(bam_nvme::Error::DeviceUnavailable { reason, .. }) => {
            if reason.contains("ABI version") {
                Probe::AbiMismatch(reason)
            } else if reason.contains("in use") {
                Probe::Busy(reason)
            } else if reason.contains("permission denied") {
                Probe::NeedsRoot
            } else {
                Probe::Failed(reason)
            }
        }
        Err(e) => Probe::Failed(e.to_string()),
    }
}

/// The module's version attributes: `version` when it declares one, else `srcversion`.
fn module_version(sys: &Path) -> String {
    let m = sys.join("module/bam_nvme");
    if let Some(v) = read_trim(&m.join("version")) {
        format!("version {v}")
    } else if let Some(v) = read_trim(&m.join("srcversion")) {
        format!("srcversion {v}")
    } else {
        "no version attribute".into()
    }
}

/// Whether bam_nvme is loaded, and for each of its device nodes the ABI and p2p flags
/// (`probe` opens a node).
pub fn bam_module(
    sys: &Path,
    controllers: Result<&[Entry], &std::io::Error>,
    ctx: &Context,
    probe: &dyn Fn(&str) -> Probe,
) -> Vec<Check> {
    let id = ids::MODULE;
    if !sys.join("module/bam_nvme").is_dir() {
        return vec![Check::fail(id, "the bam_nvme kernel module is not loaded").fix(LOAD_MODULE)];
    }
    let mut out = vec![Check::ok(
        id,
        format!("bam_nvme is loaded ({})", module_version(sys)),
    )];
    let nodes: Vec<(&str, &str)> = controllers
        .unwrap_or(&[])
        .iter()
        .filter(|c| c.driver.as_deref() == Some("bam_nvme"))
        .filter_map(|c| c.node.as_deref().map(|n| (n, c.bdf.as_str())))
        .collect();
    let rebuild =
        format!("rebuild bam and the module from one source tree: rmmod bam_nvme; {LOAD_MODULE}");
    for (node, bdf) in nodes {
        let what = format!("{node} ({bdf})");
        out.push(match probe(node) {
            Probe::Opened { abi, flags } => {
                let built = flags & INFO_P2P_BUILT != 0;
                let avail = flags & INFO_P2P_AVAILABLE != 0;
                if abi != kmod::ABI_VERSION {
                    Check::fail(id, format!("{what}: module ABI {abi}, bam speaks {}", kmod::ABI_VERSION))
                        .fix(rebuild.clone())
                } else if !built {
                    Check::fail(
                        id,
                        format!("{what}: ABI {abi} matches; the module was built without nvidia_p2p (P2P=0)"),
                    )
                    .fix(format!("rebuild it with GPU support: rmmod bam_nvme; {LOAD_MODULE}"))
                } else if !avail {
                    Check::fail(
                        id,
                        format!("{what}: ABI {abi} matches; nvidia_p2p built in but its symbols do not resolve"),
                    )
                    .fix("load the NVIDIA driver (see nvidia-p2p)")
                } else {
                    Check::ok(id, format!("{what}: ABI {abi} matches; nvidia_p2p built and available"))
                }
            }
            Probe::NeedsRoot => {
                let c = Check::skip(id, format!("{what}: run as root to check the ABI and nvidia_p2p support"));
                if ctx.root {
                    c
                } else {
                    c.needs_root()
                }
            }
            Probe::Busy(why) => Check::info(id, format!("{what}: not checked, {why}")),
            Probe::AbiMismatch(why) => Check::fail(id, format!("{what}: {why}")).fix(rebuild.clone()),
            Probe::Failed(why) => Check::warn(id, format!("{what}: cannot open: {why}"))
                .fix("check dmesg and the node (ls -l /dev/bam-nvme*)"),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{entry, put, test_ctx as ctx, Status};
    use super::*;

    #[test]
    fn module_lines_by_probe() {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path();
        let list = vec![
            entry("0000:01:00.0", Some("bam_nvme"), Some("/dev/bam-nvme0")),
            entry("0000:02:00.0", Some("nvme"), Some("/dev/nvme0")),
        ];
        let none = |_: &str| -> Probe { unreachable!() };
        let c = bam_module(sys, Ok(&list), &ctx(false), &none);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].status, Status::Fail);
        assert!(c[0]
            .fix
            .as_deref()
            .unwrap()
            .contains("insmod kernel-module/bam_nvme.ko"));

        put(&sys.join("module/bam_nvme/srcversion"), "ABCDEF0123\n");
        let all = INFO_P2P_BUILT | INFO_P2P_AVAILABLE;
        let case = |p: Probe, root: bool| -> Check {
            let c = bam_module(sys, Ok(&list), &ctx(root), &|n: &str| {
                assert_eq!(n, "/dev/bam-nvme0");
                p.clone()
            });
            assert_eq!(c.len(), 2, "{c:?}");
            assert_eq!(c[0].status, Status::Ok);
            assert!(c[0].message.contains("srcversion ABCDEF0123"), "{c:?}");
            c[1].clone()
        };
        let c = case(
            Probe::Opened {
                abi: kmod::ABI_VERSION,
                flags: all,
            },
            true,
        );
        assert_eq!(c.status, Status::Ok);
        assert!(c.message.contains("(0000:01:00.0)"), "{c:?}");
        let c = case(
            Probe::Opened {
                abi: kmod::ABI_VERSION,
                flags: INFO_P2P_BUILT,
            },
            true,
        );
        assert_eq!(c.status, Status::Fail);
        assert!(c.message.contains("do not resolve"));
        let c = case(
            Probe::Opened {
                abi: kmod::ABI_VERSION,
                flags: 0,
            },
            true,
        );
        assert!(c.message.contains("P2P=0"));
        let c = case(
            Probe::Opened {
                abi: 99,
                flags: all,
            },
            true,
        );
        assert_eq!(c.status, Status::Fail);
        let c = case(
            Probe::AbiMismatch("module speaks ABI version 2".into()),
            true,
        );
        assert_eq!(c.status, Status::Fail);
        let c = case(Probe::NeedsRoot, false);
        assert_eq!((c.status, c.needs_root), (Status::Skip, true));
        assert!(c.message.contains("run as root to check the ABI"));
        let c = case(
            Probe::Busy("in use by another process (pid 7)".into()),
            true,
        );
        assert_eq!(c.status, Status::Info);
        let c = case(Probe::Failed("boom".into()), true);
        assert_eq!(c.status, Status::Warn);
    }
}
