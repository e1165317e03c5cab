//! What uses an NVMe controller's namespaces and their partitions: mounted file systems,
//! swap, and the device-mapper / md devices stacked on them (LVM, dm-crypt, RAID).
//! `bam bind` refuses a controller in use and `bam doctor` names what binding it would
//! take away; both ask [`in_use`].
//!
//! Everything is read below two roots (`/sys` and `/proc` normally), so the tests run
//! it on fake trees. Not detected: a block device a process opened with `O_EXCL` (a
//! database on a raw partition, a running `mkfs`). sysfs does not show such opens; only
//! an exclusive open of the real `/dev` node would, which a fake tree cannot test.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A block device number, as `major:minor` in sysfs `dev` files and in mountinfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DeviceNumber {
    major: u32,
    minor: u32,
}

impl DeviceNumber {
    /// Parses `259:1`; `None` for anything else.
    fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DeviceNumber {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

/// A block device of a controller: a namespace (`nvme0n1`) or one of its partitions
/// (`nvme0n1p1`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct BlockDevice {
    /// Kernel name, e.g. `nvme0n1p1`.
    name: String,
    /// Its sysfs directory.
    dir: PathBuf,
    /// Its device number (the sysfs `dev` file), when readable.
    number: Option<DeviceNumber>,
}

impl BlockDevice {
    fn at(dir: PathBuf) -> Self {
        let name = file_name(&dir);
        let number = fs::read_to_string(dir.join("dev"))
            .ok()
            .and_then(|t| DeviceNumber::parse(&t));
        BlockDevice { name, dir, number }
    }

    /// The node user space names it by, e.g. `/dev/nvme0n1p1`.
    fn node(&self) -> String {
        format!("/dev/{}", self.name)
    }
}

/// How a block device is in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Usage {
    /// A file system on it is mounted.
    Mounted {
        /// Where, e.g. `/`.
        mount_point: String,
        /// Its type, e.g. `ext4`.
        fs_type: String,
    },
    /// It is active swap.
    Swap,
    /// Another block device is stacked on it (sysfs `holders/`).
    HeldBy {
        /// The holder's kernel name, e.g. `dm-0` or `md127`.
        holder: String,
        /// The device-mapper name (e.g. `vg0-root`), when it is a dm device.
        dm_name: Option<String>,
    },
}

/// One use of one of a controller's block devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The namespace or partition in use, e.g. `nvme0n1p1`.
    pub device: String,
    /// How it is used.
    pub usage: Usage,
}

impl fmt::Display for Holder {
    /// `nvme0n1p1 mounted on / (ext4)`, `nvme0n1p2 used as swap`, `nvme0n1 held by dm-0
    /// (vg0-root)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let device = &self.device;
        match &self.usage {
            Usage::Mounted {
                mount_point,
                fs_type,
            } => write!(f, "{device} mounted on {mount_point} ({fs_type})"),
            Usage::Swap => write!(f, "{device} used as swap"),
            Usage::HeldBy { holder, dm_name } => {
                write!(f, "{device} held by {holder}")?;
                match dm_name {
                    Some(name) => write!(f, " ({name})"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Why the uses of a controller's block devices could not be listed.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {source}", path.display())]
pub struct UnreadableTable {
    /// The procfs file (mountinfo or swaps).
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Every use of the namespaces of the controller at `bdf` (canonical, e.g.
/// `0000:01:00.0`) and of their partitions, in device order: mounts, then swap, then
/// holders. `sys` and `proc` are the sysfs and procfs roots. A controller with no block
/// device (not on the kernel's nvme driver, or without namespaces) is idle without
/// reading procfs.
pub fn in_use(sys: &Path, proc: &Path, bdf: &str) -> Result<Vec<Holder>, UnreadableTable> {
    let devices = block_devices(sys, bdf);
    if devices.is_empty() {
        return Ok(Vec::new());
    }
    let mounts = parse_mountinfo(&read_table(&proc.join("self/mountinfo"), false)?);
    let swaps = parse_swaps(&read_table(&proc.join("swaps"), true)?);
    let mut out = Vec::new();
    for dev in &devices {
        let node = dev.node();
        for m in &mounts {
            // btrfs reports an anonymous device number; its source still names the node.
            let same_number = dev.number.is_some() && m.number == dev.number;
            if same_number || m.source == node {
                out.push(Holder {
                    device: dev.name.clone(),
                    usage: Usage::Mounted {
                        mount_point: m.mount_point.clone(),
                        fs_type: m.fs_type.clone(),
                    },
                });
            }
        }
        if swaps.contains(&node) {
            out.push(Holder {
                device: dev.name.clone(),
                usage: Usage::Swap,
            });
        }
        for holder in sorted_names(&dev.dir.join("holders")) {
            let dm_name = read_trim(&dev.dir.join("holders").join(&holder).join("dm/name"));
            out.push(Holder {
                device: dev.name.clone(),
                usage: Usage::HeldBy { holder, dm_name },
            });
        }
    }
    out.dedup();
    Ok(out)
}

/// The namespaces of the controller at `bdf` and their partitions, sorted by name.
///
/// Without native multipath a namespace is a child of the controller's class device
/// (`BDF/nvme/nvme0/nvme0n1`); with it, the controller has a hidden path
/// (`nvme0c0n1`) and the namespace is the subsystem's head disk, which lists its paths
/// in `/sys/block/nvme0n1/multipath/`.
fn block_devices(sys: &Path, bdf: &str) -> Vec<BlockDevice> {
    let mut disks = Vec::new();
    let mut paths = Vec::new();
    for ctrl in subdirs(&sys.join("bus/pci/devices").join(bdf).join("nvme")) {
        // Skips `device`, `power`, `hwmon*` and the generic char devices (`ng0n1`).
        for child in subdirs(&ctrl)
            .into_iter()
            .filter(|c| file_name(c).starts_with("nvme"))
        {
            if child.join("dev").is_file() {
                disks.push(child);
            } else {
                paths.push(file_name(&child));
            }
        }
    }
    if !paths.is_empty() {
        for head in subdirs(&sys.join("block")) {
            if paths
                .iter()
                .any(|p| head.join("multipath").join(p).exists())
            {
                disks.push(head);
            }
        }
    }
    let mut out = Vec::new();
    for disk in disks {
        let partitions: Vec<PathBuf> = subdirs(&disk)
            .into_iter()
            .filter(|p| p.join("partition").is_file())
            .collect();
        out.push(BlockDevice::at(disk));
        out.extend(partitions.into_iter().map(BlockDevice::at));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// One line of mountinfo, the fields bam needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    number: Option<DeviceNumber>,
    mount_point: String,
    fs_type: String,
    source: String,
}

/// Parses `/proc/self/mountinfo` (proc(5)): `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS
/// [OPTIONAL...] - FS_TYPE SOURCE SUPER_OPTIONS`. Lines it cannot parse are skipped.
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            Some(Mount {
                number: DeviceNumber::parse(fields.get(2)?),
                mount_point: unescape(fields.get(4)?),
                fs_type: unescape(fields.get(dash + 1)?),
                source: unescape(fields.get(dash + 2)?),
            })
        })
        .collect()
}

/// The swap areas of `/proc/swaps` (its first column after the header).
fn parse_swaps(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .map(unescape)
        .collect()
}

/// Undoes the kernel's octal escapes of blanks and backslashes (`\040` is a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A procfs table's text; a missing one reads as empty when `optional` (`/proc/swaps`
/// on a kernel without swap support).
fn read_table(path: &Path, optional: bool) -> Result<String, UnreadableTable> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if optional && e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(UnreadableTable {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The entries of `dir` (following symlinks), sorted by name; none when unreadable.
fn sorted_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The subdirectories of `dir` (following symlinks), sorted by name.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    sorted_names(dir)
        .into_iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_dir())
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Makes `path`'s parent directories and writes `text`.
    fn put(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// Gives controller `ctrl` (e.g. `nvme0`) of `bdf` under `sys` namespace `ns` (e.g.
    /// `nvme0n1`, device 259:`minor`) with `partitions` partitions (259:`minor + i`);
    /// returns the namespace's directory.
    pub(crate) fn add_namespace(
        sys: &Path,
        bdf: &str,
        ctrl: &str,
        ns: &str,
        minor: u32,
        partitions: u32,
    ) -> PathBuf {
        let dir = sys
            .join("bus/pci/devices")
            .join(bdf)
            .join("nvme")
            .join(ctrl)
            .join(ns);
        put(&dir.join("dev"), &format!("259:{minor}\n"));
        fs::create_dir_all(dir.join("holders")).unwrap();
        fs::create_dir_all(dir.join("queue")).unwrap();
        for i in 1..=partitions {
            let p = dir.join(format!("{ns}p{i}"));
            put(&p.join("dev"), &format!("259:{}\n", minor + i));
            put(&p.join("partition"), &format!("{i}\n"));
            fs::create_dir_all(p.join("holders")).unwrap();
        }
        dir
    }

    /// Stacks device-mapper device `dm` (named `name`) on the block device at `dev`, as
    /// sysfs does: a `holders/` link to the dm device's directory.
    pub(crate) fn add_dm_holder(sys: &Path, dev: &Path, dm: &str, name: &str) {
        let target = sys.join("devices/virtual/block").join(dm);
        put(&target.join("dm/name"), &format!("{name}\n"));
        fs::create_dir_all(dev.join("holders")).unwrap();
        symlink(&target, dev.join("holders").join(dm)).unwrap();
    }

    /// Writes a procfs root with these mountinfo lines and swap areas.
    pub(crate) fn fake_proc(proc: &Path, mountinfo: &[&str], swaps: &[&str]) {
        let mut m = String::new();
        for line in mountinfo {
            m += line;
            m.push('\n');
        }
        put(&proc.join("self/mountinfo"), &m);
        let mut s = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n".to_string();
        for area in swaps {
            s += &format!("{area}                          partition\t8388604\t\t0\t\t-2\n");
        }
        put(&proc.join("swaps"), &s);
    }

    /// The root file system line of a mountinfo, with an optional field.
    pub(crate) const ROOT_ON_259_1: &str =
        "29 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,errors=remount-ro";
    const PROC_LINE: &str = "22 29 0:21 / /proc rw,nosuid - proc proc rw";

    fn names(h: &[Holder]) -> Vec<String> {
        h.iter().map(Holder::to_string).collect()
    }

    #[test]
    fn mountinfo_fields_with_optional_fields_and_escapes() {
        let m = parse_mountinfo(&format!(
            "{ROOT_ON_259_1}\n\
             40 29 259:3 /data /mnt/my\\040disk rw master:1 propagate_from:2 - xfs /dev/nvme0n1p3 rw\n\
             garbage line\n"
        ));
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(
            m[0].number,
            Some(DeviceNumber {
                major: 259,
                minor: 1
            })
        );
        assert_eq!(
            (m[0].mount_point.as_str(), m[0].fs_type.as_str()),
            ("/", "ext4")
        );
        assert_eq!(m[1].mount_point, "/mnt/my disk");
        assert_eq!(
            (m[1].fs_type.as_str(), m[1].source.as_str()),
            ("xfs", "/dev/nvme0n1p3")
        );
        assert_eq!(unescape("a\\134b\\011\\9"), "a\\b\t\\9");
        assert_eq!(
            parse_swaps("Filename Type\n/swap\\040file file 1 0 -2\n/dev/sda2 partition 1 0 -3\n"),
            ["/swap file", "/dev/sda2"]
        );
    }

    #[test]
    fn names_mounts_swap_and_holders_of_namespaces_and_partitions() {
        let t = tempfile::tempdir().unwrap();
        let (sys, proc) = (t.path().join("sys"), t.path().join("proc"));
        let bdf = "0000:01:00.0";
        let ns1 = add_namespace(&sys, bdf, "nvme0", "nvme0n1", 0, 3);
        let ns2 = add_namespace(&sys, bdf, "nvme0", "nvme0n2", 8, 0);
        add_dm_holder(&sys, &ns1.join("nvme0n1p3"), "dm-0", "vg0-root");
        add_dm_holder(&sys, &ns2, "md127", "");
        fs::remove_file(sys.join("devices/virtual/block/md127/dm/name")).unwrap();
        // The generic char device is no block device, whatever its number.
        put(&ns1.parent().unwrap().join("ng0n1/dev"), "259:1\n");
        // Another controller's partition is not this one's.
        add_namespace(&sys, "0000:02:00.0", "nvme1", "nvme1n1", 16, 1);
        fake_proc(
            &proc,
            &[
                ROOT_ON_259_1,
                PROC_LINE,
                "50 29 0:45 /@home /home rw - btrfs /dev/nvme0n1p1 rw",
                "51 29 259:17 / /other rw - ext4 /dev/nvme1n1p1 rw",
            ],
            &["/dev/nvme0n1p2"],
        );
        let h = in_use(&sys, &proc, bdf).unwrap();
        assert_eq!(
            names(&h),
            [
                "nvme0n1p1 mounted on / (ext4)",
                "nvme0n1p1 mounted on /home (btrfs)",
                "nvme0n1p2 used as swap",
                "nvme0n1p3 held by dm-0 (vg0-root)",
                "nvme0n2 held by md127",
            ]
        );
        assert_eq!(
            names(&in_use(&sys, &proc, "0000:02:00.0").unwrap()),
            ["nvme1n1p1 mounted on /other (ext4)"]
        );
    }

    #[test]
    fn a_multipath_head_is_the_namespace_of_its_paths() {
        let t = tempfile::tempdir().unwrap();
        let (sys, proc) = (t.path().join("sys"), t.path().join("proc"));
        let bdf = "0000:01:00.0";
        let ctrl = sys.join("bus/pci/devices").join(bdf).join("nvme/nvme0");
        fs::create_dir_all(ctrl.join("nvme0c0n1")).unwrap();
        let head = sys.join("devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1");
        put(&head.join("dev"), "259:0\n");
        fs::create_dir_all(head.join("multipath")).unwrap();
        symlink(ctrl.join("nvme0c0n1"), head.join("multipath/nvme0c0n1")).unwrap();
        fs::create_dir_all(sys.join("block")).unwrap();
        symlink(&head, sys.join("block/nvme0n1")).unwrap();
        put(&sys.join("block/sda/dev"), "8:0\n");
        fake_proc(
            &proc,
            &["60 29 259:0 / /scratch rw - xfs /dev/nvme0n1 rw"],
            &[],
        );
        assert_eq!(
            names(&in_use(&sys, &proc, bdf).unwrap()),
            ["nvme0n1 mounted on /scratch (xfs)"]
        );
    }

    #[test]
    fn idle_controllers_and_unreadable_tables() {
        let t = tempfile::tempdir().unwrap();
        let (sys, proc) = (t.path().join("sys"), t.path().join("proc"));
        let bdf = "0000:01:00.0";
        // No namespaces: idle, and procfs is not read at all.
        fs::create_dir_all(sys.join("bus/pci/devices").join(bdf).join("nvme/nvme0")).unwrap();
        assert!(in_use(&sys, &proc, bdf).unwrap().is_empty());
        // Namespaces but no mountinfo: the caller cannot tell, and is told so.
        add_namespace(&sys, bdf, "nvme0", "nvme0n1", 0, 1);
        let e = in_use(&sys, &proc, bdf).unwrap_err();
        assert!(e.to_string().contains("self/mountinfo"), "{e}");
        // Nothing mounted, no /proc/swaps (kernel without swap): idle.
        put(&proc.join("self/mountinfo"), &format!("{PROC_LINE}\n"));
        assert!(in_use(&sys, &proc, bdf).unwrap().is_empty());
    }
}
