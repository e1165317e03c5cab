//! The process context the checks share, and the checks of the NVMe controllers, the
//! IOMMU mode and the memlock limit. Each takes the roots it reads, so the tests run it
//! on fake trees.

use super::{ids, Check};
use crate::commands::holders;
use crate::commands::list::Entry;
use crate::units::binary_bytes;
use std::fs;
use std::path::Path;

/// Memlock limits from this size up are enough for bam's host buffers.
pub const MEMLOCK_ENOUGH: u64 = 1 << 30;

/// Facts about this process the checks need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// Effective uid 0.
    pub root: bool,
    /// CAP_IPC_LOCK is effective (pinning is not limited by RLIMIT_MEMLOCK).
    pub cap_ipc_lock: bool,
    /// RLIMIT_MEMLOCK (soft) in bytes; `None` for unlimited.
    pub memlock: Option<u64>,
}

impl Context {
    /// This process's context; capabilities from `<proc>/self/status`.
    pub fn of_this_process(proc: &Path) -> Self {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into `lim`.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0;
        let memlock = if !ok || lim.rlim_cur == libc::RLIM_INFINITY {
            None
        } else {
            Some(lim.rlim_cur)
        };
        let cap_ipc_lock = fs::read_to_string(proc.join("self/status"))
            .map(|s| has_cap(&s, CAP_IPC_LOCK))
            .unwrap_or(false);
        Context {
            root,
            cap_ipc_lock,
            memlock,
        }
    }
}

/// Capability number of CAP_IPC_LOCK.
pub const CAP_IPC_LOCK: u32 = 14;

/// Whether capability `cap` is in the `CapEff:` line of a `/proc/<pid>/status` text.
pub fn has_cap(status: &str, cap: u32) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|mask| cap < 64 && mask & (1u64 << cap) != 0)
}

/// A sysfs/procfs file's text, trimmed; `None` when it cannot be read.
pub fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

// --- controllers ----------------------------------------------------------------------

/// Every NVMe controller, its driver and --device string; for one on the kernel's nvme
/// driver, what binding it would take away (read below `sys` and `proc`).
pub fn controllers(sys: &Path, proc: &Path, list: Result<&[Entry], &std::io::Error>) -> Vec<Check> {
    let id = ids::CONTROLLERS;
    let list = match list {
        Ok(l) => l,
        Err(e) => {
            return vec![
                Check::fail(id, format!("cannot list PCI devices: {e}")).fix("mount sysfs on /sys")
            ]
        }
    };
    if list.is_empty() {
        return vec![
            Check::fail(id, "no NVMe controller (PCI class 010802) found")
                .fix("install an NVMe SSD (check lspci -D), or use model: devices"),
        ];
    }
    let mut out = Vec::new();
    for e in list {
        let bdf = &e.bdf;
        out.push(match e.driver.as_deref() {
            Some("bam_nvme") => Check::ok(
                id,
                format!(
                    "{bdf} ({}) bound to bam_nvme: --device {}",
                    e.id,
                    e.device.as_deref().unwrap_or("(no device node yet)")
                ),
            ),
            Some("nvme") => on_kernel_driver(sys, proc, e),
            Some("vfio-pci") => Check::info(
                id,
                format!(
                    "{bdf} ({}) bound to vfio-pci: --device vfio:{bdf} (CPU side only: VFIO cannot map GPU memory)",
                    e.id
                ),
            )
            .fix(format!("for GPU threads: bam bind {bdf}")),
            Some(other) => Check::info(id, format!("{bdf} ({}) bound to {other}", e.id))
                .fix(format!("for GPU threads: bam bind {bdf}")),
            None => Check::info(id, format!("{bdf} ({}) bound to no driver", e.id))
                .fix(format!("bam bind {bdf}")),
        });
    }
    if !list.iter().any(|e| e.driver.as_deref() == Some("bam_nvme")) {
        out.push(
            Check::warn(
                id,
                "no controller is bound to bam_nvme: GPU threads have no SSD to drive",
            )
            .fix(format!("bam bind {} (after loading bam_nvme)", list[0].bdf)),
        );
    }
    out
}

/// A controller on the kernel's nvme driver, and what uses its namespaces.
fn on_kernel_driver(sys: &Path, proc: &Path, e: &Entry) -> Check {
    let (bdf, id) = (&e.bdf, ids::CONTROLLERS);
    let held = format!(
        "{bdf} ({}) held by the kernel nvme driver ({})",
        e.id,
        e.node.as_deref().unwrap_or("no block device")
    );
    match holders::in_use(sys, proc, bdf) {
        Ok(in_use) if in_use.is_empty() => Check::info(
            id,
            format!("{held}; no namespace of it is mounted, swap or held by dm/md"),
        )
        .fix(format!("to use it: bam bind {bdf}")),
        Ok(in_use) => {
            let list: Vec<String> = in_use.iter().map(ToString::to_string).collect();
            Check::info(id, format!("{held}: binding it loses {}", list.join(", "))).fix(format!(
                "to use it: unmount, swapoff or stop those first, then bam bind {bdf}"
            ))
        }
        Err(err) => Check::info(id, format!("{held}: cannot tell what uses it ({err})")).fix(
            format!("to use it: bam bind {bdf} (it refuses while in use)"),
        ),
    }
}

// --- iommu ----------------------------------------------------------------------------

/// The IOMMU options of a kernel command line, in order.
pub fn iommu_cmdline(cmdline: &str) -> Vec<String> {
    cmdline
        .split_whitespace()
        .filter(|w| {
            let key = w.split('=').next().unwrap_or("");
            matches!(
                key,
                "intel_iommu" | "amd_iommu" | "iommu" | "iommu.passthrough" | "iommu.strict"
            )
        })
        .map(str::to_string)
        .collect()
}

/// The IOMMU group type of `bdf` (`DMA`, `DMA-FQ`, `identity`, `unmanaged`, ...):
/// `Ok(None)` when the device has no group (no IOMMU), `Err(group)` when it has one but
/// the kernel does not say its type (before 5.11).
pub fn group_type(sys: &Path, bdf: &str) -> Result<Option<String>, String> {
    let g = sys.join("bus/pci/devices").join(bdf).join("iommu_group");
    if fs::symlink_metadata(&g).is_err() {
        return Ok(None);
    }
    match read_trim(&g.join("type")) {
        Some(t) => Ok(Some(t)),
        None => Err(fs::read_link(&g)
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "?".into())),
    }
}

/// IOMMU mode: the IOMMUs, the command line, and each controller's domain type.
pub fn iommu(sys: &Path, proc: &Path, controllers: &[Entry]) -> Vec<Check> {
    let id = ids::IOMMU;
    let mut units: Vec<String> = fs::read_dir(sys.join("class/iommu"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    units.sort();
    let cmdline = read_trim(&proc.join("cmdline")).unwrap_or_default();
    let opts = iommu_cmdline(&cmdline);
    let opts_text = if opts.is_empty() {
        "no IOMMU options on the kernel command line".to_string()
    } else {
        format!("kernel command line: {}", opts.join(" "))
    };
    let mut out = vec![if units.is_empty() {
        Check::ok(
            id,
            format!("no IOMMU is active: DMA addresses are physical ({opts_text})"),
        )
    } else {
        Check::info(id, format!("IOMMU {} ({opts_text})", units.join(", ")))
    }];
    let fix = "add iommu=pt to the kernel command line (identity mappings for devices) and reboot; \
               the module then opens the controller only with allow_unsafe_noiommu=1 (see docs/real-hardware.md)";
    // Untranslated DMA (no IOMMU, or passthrough): the module opens such a controller only
    // with allow_unsafe_noiommu=1, which gives every kernel of the CUDA context (they can
    // write the SQEs and PRP lists in GPU memory) the controller's reach into all of
    // physical memory.
    let allowed = read_trim(&sys.join("module/bam_nvme/parameters/allow_unsafe_noiommu"));
    let untranslated = |bdf: &str, what: String| match allowed.as_deref() {
        Some("Y") | Some("1") => Check::warn(
            id,
            format!(
                "{bdf}: {what}: bam_nvme opens it (allow_unsafe_noiommu=1, the kernel is tainted); \
                 its DMA, which any kernel in the CUDA context can aim through the SQEs and PRP \
                 lists in GPU memory, reaches all physical memory"
            ),
        ),
        Some(_) => Check::fail(
            id,
            format!(
                "{bdf}: {what}: bam_nvme refuses to open it (EPERM) while allow_unsafe_noiommu=0"
            ),
        )
        .fix(
            "reload the module with allow_unsafe_noiommu=1 (sudo rmmod bam_nvme; sudo insmod \
             kernel-module/bam_nvme.ko allow_unsafe_noiommu=1), knowing that the controller's DMA \
             then reaches all physical memory (docs/real-hardware.md)",
        ),
        None => Check::info(
            id,
            format!(
                "{bdf}: {what}: bam_nvme will open it only with allow_unsafe_noiommu=1 (the \
                 controller's DMA then reaches all physical memory)"
            ),
        ),
    };
    for e in controllers {
        let bdf = &e.bdf;
        if let Ok(Some(t)) = group_type(sys, bdf) {
            if t == "DMA" || t == "DMA-FQ" {
                out.extend(shared_group(sys, bdf));
            }
        }
        out.push(match group_type(sys, bdf) {
            Ok(None) => untranslated(bdf, "not behind an IOMMU".into()),
            Ok(Some(t)) => match t.as_str() {
                "identity" => untranslated(bdf, "passthrough (IOMMU group type identity)".into()),
                "DMA" | "DMA-FQ" => Check::warn(
                    id,
                    format!("{bdf}: translated DMA (IOMMU group type {t}): P2P DMA to GPU BAR1 may fault or be slow"),
                )
                .fix(fix),
                "unmanaged" => Check::info(id, format!("{bdf}: IOMMU domain managed by user space (vfio)")),
                other => Check::warn(id, format!("{bdf}: IOMMU group type {other}")).fix(fix),
            },
            Err(group) => {
                // Kernels before 5.11 do not say; the module's own view helps for ours.
                let module_view = e
                    .node
                    .as_deref()
                    .and_then(|n| n.strip_prefix("/dev/"))
                    .and_then(|n| read_trim(&sys.join("class/bam-nvme").join(n).join("iommu")));
                match module_view.as_deref() {
                    Some("dma") => Check::warn(id, format!("{bdf}: translated DMA (bam_nvme reports dma)")).fix(fix),
                    Some(v) => untranslated(bdf, format!("bam_nvme reports {v}")),
                    None => Check::info(id, format!("{bdf}: IOMMU group {group}; this kernel does not report its type")),
                }
            }
        });
    }
    out
}

/// The devices of `bdf`'s IOMMU group that another driver drives: bound to a driver other
/// than bam_nvme, bridges left out (they forward, they own no buffers), "BDF (driver)".
/// The module refuses to open the controller while one exists, unless
/// allow_shared_iommu_group=1: they share its DMA translations.
pub fn group_foreigners(sys: &Path, bdf: &str) -> Vec<String> {
    let devices = sys
        .join("bus/pci/devices")
        .join(bdf)
        .join("iommu_group/devices");
    let mut out: Vec<String> = fs::read_dir(&devices)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let other = e.file_name().to_string_lossy().into_owned();
                    if other == bdf {
                        return None;
                    }
                    let dir = sys.join("bus/pci/devices").join(&other);
                    let driver = fs::read_link(dir.join("driver")).ok()?;
                    let driver = driver.file_name()?.to_string_lossy().into_owned();
                    let bridge =
                        read_trim(&dir.join("class")).is_some_and(|c| c.starts_with("0x0604"));
                    (driver != "bam_nvme" && !bridge).then(|| format!("{other} ({driver})"))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A translated controller whose IOMMU group another driver shares: FAIL while the loaded
/// module would refuse to open it, WARN when allow_shared_iommu_group=1 lets it, INFO
/// when the module is not loaded. Nothing when the group is the controller's alone.
fn shared_group(sys: &Path, bdf: &str) -> Option<Check> {
    let id = ids::IOMMU;
    let others = group_foreigners(sys, bdf);
    if others.is_empty() {
        return None;
    }
    let who = others.join(", ");
    let param = read_trim(&sys.join("module/bam_nvme/parameters/allow_shared_iommu_group"));
    let fix = "unbind those devices or bind them to bam_nvme or vfio-pci (ls \
               /sys/bus/pci/devices/BDF/iommu_group/devices lists the group), or reload the \
               module with allow_shared_iommu_group=1, knowing that they can then reach the \
               controller's buffers and it theirs (docs/kernel-module.md)";
    Some(match param.as_deref() {
        Some("Y") | Some("1") => Check::warn(
            id,
            format!(
                "{bdf}: its IOMMU group is shared with {who}: bam_nvme opens it \
                 (allow_shared_iommu_group=1), and they share its DMA translations"
            ),
        ),
        Some(_) => Check::fail(
            id,
            format!(
                "{bdf}: its IOMMU group is shared with {who}: bam_nvme refuses to open it \
                 (EPERM) while allow_shared_iommu_group=0"
            ),
        )
        .fix(fix),
        None => Check::info(
            id,
            format!(
                "{bdf}: its IOMMU group is shared with {who}: bam_nvme will open it only \
                 while they are unbound or with allow_shared_iommu_group=1"
            ),
        )
        .fix(fix),
    })
}

// --- memlock --------------------------------------------------------------------------

/// RLIMIT_MEMLOCK against what the module pins.
pub fn memlock(ctx: &Context) -> Check {
    let id = ids::MEMLOCK;
    let Some(limit) = ctx.memlock else {
        return Check::ok(id, "RLIMIT_MEMLOCK is unlimited");
    };
    let shown = binary_bytes(limit);
    if limit >= MEMLOCK_ENOUGH {
        Check::ok(id, format!("RLIMIT_MEMLOCK is {shown}"))
    } else if ctx.root || ctx.cap_ipc_lock {
        Check::ok(
            id,
            format!("RLIMIT_MEMLOCK is {shown}, but CAP_IPC_LOCK (or root) lifts it"),
        )
    } else {
        Check::warn(
            id,
            format!("RLIMIT_MEMLOCK is {shown}: the module pins host DMA buffers against it, so large queues and buffers fail"),
        )
        .fix("ulimit -l unlimited (or a memlock line in /etc/security/limits.conf), or run as root")
    }
}

#[cfg(test)]
mod tests {
    use super::super::{entry, put, test_ctx as ctx, Status};
    use super::*;
    use crate::commands::holders::tests::{add_dm_holder, add_namespace, fake_proc, ROOT_ON_259_1};
    use std::os::unix::fs::symlink;

    #[test]
    fn controller_lines() {
        let t = tempfile::tempdir().unwrap();
        let controllers = |l| controllers(t.path(), t.path(), l);
        let e = std::io::Error::other("no sysfs");
        assert_eq!(controllers(Err(&e))[0].status, Status::Fail);
        assert_eq!(controllers(Ok(&[]))[0].status, Status::Fail);
        let list = vec![
            entry("0000:01:00.0", Some("nvme"), Some("/dev/nvme0")),
            entry("0000:02:00.0", None, None),
            entry("0000:03:00.0", Some("vfio-pci"), Some("/dev/vfio/5")),
        ];
        let c = controllers(Ok(&list));
        assert_eq!(c.len(), 4);
        assert!(c[..3].iter().all(|c| c.status == Status::Info), "{c:?}");
        assert!(
            c[0].message.contains("no namespace of it is mounted"),
            "{c:?}"
        );
        assert_eq!(c[3].status, Status::Warn);
        assert_eq!(
            c[3].fix.as_deref(),
            Some("bam bind 0000:01:00.0 (after loading bam_nvme)")
        );
        let list = vec![entry(
            "0000:01:00.0",
            Some("bam_nvme"),
            Some("/dev/bam-nvme0"),
        )];
        let c = controllers(Ok(&list));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].status, Status::Ok);
        assert!(c[0].message.contains("kmod:/dev/bam-nvme0"));
    }

    #[test]
    fn controller_line_names_what_binding_loses() {
        let t = tempfile::tempdir().unwrap();
        let (sys, proc) = (t.path().join("sys"), t.path().join("proc"));
        let bdf = "0000:01:00.0";
        let ns = add_namespace(&sys, bdf, "nvme0", "nvme0n1", 0, 2);
        add_dm_holder(&sys, &ns.join("nvme0n1p2"), "dm-1", "vg0-swap");
        fake_proc(&proc, &[ROOT_ON_259_1], &[]);
        let list = vec![entry(bdf, Some("nvme"), Some("/dev/nvme0"))];
        let c = controllers(&sys, &proc, Ok(&list));
        assert_eq!(c[0].status, Status::Info);
        assert_eq!(
            c[0].message,
            "0000:01:00.0 (144d:a80a) held by the kernel nvme driver (/dev/nvme0): binding it \
             loses nvme0n1p1 mounted on / (ext4), nvme0n1p2 held by dm-1 (vg0-swap)"
        );
        assert!(c[0]
            .fix
            .as_deref()
            .unwrap()
            .ends_with("then bam bind 0000:01:00.0"));
        fs::remove_file(proc.join("self/mountinfo")).unwrap();
        let c = controllers(&sys, &proc, Ok(&list));
        assert!(c[0].message.contains("cannot tell what uses it"), "{c:?}");
    }

    #[test]
    fn iommu_modes_from_a_fake_tree() {
        let t = tempfile::tempdir().unwrap();
        let (sys, proc) = (t.path().join("sys"), t.path().join("proc"));
        put(
            &proc.join("cmdline"),
            "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt quiet\n",
        );
        fs::create_dir_all(sys.join("class/iommu/dmar0")).unwrap();
        let group = |n: u32, ty: Option<&str>| {
            let g = sys.join("kernel/iommu_groups").join(n.to_string());
            fs::create_dir_all(&g).unwrap();
            if let Some(ty) = ty {
                put(&g.join("type"), &format!("{ty}\n"));
            }
            g
        };
        let dev = |bdf: &str, g: Option<&Path>| {
            let d = sys.join("bus/pci/devices").join(bdf);
            fs::create_dir_all(&d).unwrap();
            if let Some(g) = g {
                symlink(g, d.join("iommu_group")).unwrap();
            }
        };
        dev("0000:01:00.0", Some(&group(1, Some("identity"))));
        dev("0000:02:00.0", Some(&group(2, Some("DMA-FQ"))));
        dev("0000:03:00.0", Some(&group(3, Some("unmanaged"))));
        dev("0000:04:00.0", None);
        dev("0000:05:00.0", Some(&group(5, None)));
        put(&sys.join("class/bam-nvme/bam-nvme1/iommu"), "dma\n");
        let list = vec![
            entry("0000:01:00.0", Some("bam_nvme"), Some("/dev/bam-nvme0")),
            entry("0000:02:00.0", Some("nvme"), None),
            entry("0000:03:00.0", Some("vfio-pci"), None),
            entry("0000:04:00.0", None, None),
            entry("0000:05:00.0", Some("bam_nvme"), Some("/dev/bam-nvme1")),
        ];
        let c = iommu(&sys, &proc, &list);
        assert_eq!(c.len(), 6, "{c:#?}");
        assert_eq!(c[0].status, Status::Info);
        assert!(c[0].message.contains("dmar0"));
        assert!(c[0].message.contains("intel_iommu=on iommu=pt"), "{c:?}");
        // Passthrough and no IOMMU, with the module not loaded: they need the parameter.
        assert_eq!(c[1].status, Status::Info);
        assert!(
            c[1].message.contains("allow_unsafe_noiommu=1"),
            "{:?}",
            c[1]
        );
        assert_eq!(c[2].status, Status::Warn);
        assert!(c[2].fix.as_deref().unwrap().contains("iommu=pt"));
        assert!(c[2]
            .fix
            .as_deref()
            .unwrap()
            .contains("allow_unsafe_noiommu=1"));
        assert_eq!(c[3].status, Status::Info);
        assert_eq!(c[4].status, Status::Info);
        assert_eq!(c[5].status, Status::Warn, "{:?}", c[5]);
        assert!(c[5].message.contains("bam_nvme reports dma"));
        // The module loaded without the parameter: passthrough fails (the documented
        // setup would end in EPERM); with it, a warning that says what it gives up.
        let param = sys.join("module/bam_nvme/parameters/allow_unsafe_noiommu");
        put(&param, "N\n");
        let c = iommu(&sys, &proc, &list);
        assert_eq!(c[1].status, Status::Fail, "{:?}", c[1]);
        assert!(c[1]
            .fix
            .as_deref()
            .unwrap()
            .contains("allow_unsafe_noiommu=1"));
        assert_eq!(c[4].status, Status::Fail);
        put(&param, "Y\n");
        let c = iommu(&sys, &proc, &list);
        assert_eq!(c[1].status, Status::Warn, "{:?}", c[1]);
        assert!(c[1].message.contains("all physical memory"), "{:?}", c[1]);
        // No IOMMU at all.
        let t2 = tempfile::tempdir().unwrap();
        let c = iommu(t2.path(), t2.path(), &[]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].status, Status::Ok);
        assert!(c[0].message.contains("no IOMMU options"));
        assert_eq!(
            iommu_cmdline("amd_iommu=off iommu.passthrough=1 iommu.strict=0 iommufd=1 x"),
            ["amd_iommu=off", "iommu.passthrough=1", "iommu.strict=0"]
        );
    }

    #[test]
    fn shared_iommu_group_from_a_fake_tree() {
        let t = tempfile::tempdir().unwrap();
        let (sys, proc) = (t.path().join("sys"), t.path().join("proc"));
        put(&proc.join("cmdline"), "intel_iommu=on\n");
        fs::create_dir_all(sys.join("class/iommu/dmar0")).unwrap();
        let g = sys.join("kernel/iommu_groups/7");
        fs::create_dir_all(g.join("devices")).unwrap();
        put(&g.join("type"), "DMA\n");
        let dev = |bdf: &str, class: &str, driver: Option<&str>| {
            let d = sys.join("bus/pci/devices").join(bdf);
            fs::create_dir_all(&d).unwrap();
            put(&d.join("class"), &format!("{class}\n"));
            symlink(&g, d.join("iommu_group")).unwrap();
            symlink(&d, g.join("devices").join(bdf)).unwrap();
            if let Some(drv) = driver {
                let dd = sys.join("bus/pci/drivers").join(drv);
                fs::create_dir_all(&dd).unwrap();
                symlink(&dd, d.join("driver")).unwrap();
            }
        };
        dev("0000:02:00.0", "0x060400", Some("pcieport"));
        dev("0000:03:01.0", "0x010802", Some("bam_nvme"));
        dev("0000:03:02.0", "0x010802", Some("nvme"));
        dev("0000:03:03.0", "0x020000", None);
        let list = vec![entry(
            "0000:03:01.0",
            Some("bam_nvme"),
            Some("/dev/bam-nvme0"),
        )];
        assert_eq!(
            group_foreigners(&sys, "0000:03:01.0"),
            ["0000:03:02.0 (nvme)"]
        );
        let find = |c: &[Check]| {
            c.iter()
                .find(|c| c.message.contains("IOMMU group is shared"))
                .cloned()
        };
        let c = find(&iommu(&sys, &proc, &list)).expect("a shared-group line");
        assert_eq!(c.status, Status::Info, "{c:?}");
        assert!(c.message.contains("0000:03:02.0 (nvme)"), "{c:?}");
        let param = sys.join("module/bam_nvme/parameters/allow_shared_iommu_group");
        put(&param, "N\n");
        let c = find(&iommu(&sys, &proc, &list)).unwrap();
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c
            .fix
            .as_deref()
            .unwrap()
            .contains("allow_shared_iommu_group=1"));
        put(&param, "Y\n");
        assert_eq!(
            find(&iommu(&sys, &proc, &list)).unwrap().status,
            Status::Warn
        );
        // The other controller unbound: the group is viable, nothing is said.
        fs::remove_file(sys.join("bus/pci/devices/0000:03:02.0/driver")).unwrap();
        assert!(group_foreigners(&sys, "0000:03:01.0").is_empty());
        assert!(find(&iommu(&sys, &proc, &list)).is_none());
    }

    #[test]
    fn memlock_verdicts() {
        let mut c = ctx(false);
        assert_eq!(memlock(&c).status, Status::Warn);
        assert!(memlock(&c).message.contains("8.00 MiB"));
        assert!(memlock(&c).fix.unwrap().contains("ulimit -l unlimited"));
        c.cap_ipc_lock = true;
        assert_eq!(memlock(&c).status, Status::Ok);
        let c = Context {
            memlock: None,
            ..ctx(false)
        };
        assert!(memlock(&c).message.contains("unlimited"));
        let c = Context {
            memlock: Some(2 << 30),
            ..ctx(false)
        };
        assert_eq!(memlock(&c).status, Status::Ok);
        assert_eq!(memlock(&ctx(true)).status, Status::Ok);
    }

    #[test]
    fn capabilities_from_status() {
        let s = "Name:\tbam\nCapInh:\t0000000000000000\nCapEff:\t0000000000004000\n";
        assert!(has_cap(s, CAP_IPC_LOCK));
        assert!(!has_cap(s, 21));
        assert!(!has_cap("CapEff:\tzz\n", CAP_IPC_LOCK));
        assert!(!has_cap("", CAP_IPC_LOCK));
        assert!(has_cap("CapEff:\t000001fffeffffff\n", CAP_IPC_LOCK));
    }
}
