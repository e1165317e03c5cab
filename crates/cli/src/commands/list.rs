//! `bam list`: the NVMe controllers of this machine, the driver each is bound to and the
//! device string that reaches it (`kmod:` for the bam kernel module, `vfio:` for
//! vfio-pci). Reads sysfs only.

use crate::error::{CliError, CliResult};
use crate::output::{print, print_json, Global};
use clap::Args;
use serde::Serialize;
use std::fs;
use std::path::Path;

/// PCI class code of an NVMe controller (mass storage, NVM, NVM Express).
pub const NVME_CLASS: &str = "0x010802";

/// Arguments of `bam list`.
#[derive(Args, Debug)]
pub struct ListArgs {}

/// One controller.
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct Entry {
    /// PCI address.
    pub bdf: String,
    /// `vendor:device` ids.
    pub id: String,
    /// Bound driver, if any.
    pub driver: Option<String>,
    /// The node to open: /dev/bam-nvmeN, /dev/vfio/G or /dev/nvmeN.
    pub node: Option<String>,
    /// IOMMU group, if the device has one.
    pub iommu_group: Option<u32>,
    /// The `--device` string for bam, when bam can use the device as bound.
    pub device: Option<String>,
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn link_name(p: &Path) -> Option<String> {
    fs::read_link(p)
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
}

fn first_child(dir: &Path, prefix: &str) -> Option<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names.into_iter().next()
}

/// The NVMe controllers under `sys` (normally `/sys`), sorted by address.
pub fn scan(sys: &Path) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for e in fs::read_dir(sys.join("bus/pci/devices"))? {
        let dir = e?.path();
        if read_trim(&dir.join("class")).as_deref() != Some(NVME_CLASS) {
            continue;
        }
        let bdf = dir.file_name().unwrap().to_string_lossy().into_owned();
        let id = format!(
            "{}:{}",
            read_trim(&dir.join("vendor"))
                .unwrap_or_default()
                .trim_start_matches("0x"),
            read_trim(&dir.join("device"))
                .unwrap_or_default()
                .trim_start_matches("0x")
        );
        let driver = link_name(&dir.join("driver"));
        let iommu_group = link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok());
        let (node, device) = match driver.as_deref() {
            Some("bam_nvme") => match first_child(&dir.join("bam-nvme"), "bam-nvme") {
                Some(n) => (Some(format!("/dev/{n}")), Some(format!("kmod:/dev/{n}"))),
                None => (None, None),
            },
            Some("vfio-pci") => (
                iommu_group.map(|g| format!("/dev/vfio/{g}")),
                Some(format!("vfio:{bdf}")),
            ),
            Some("nvme") => (
                first_child(&dir.join("nvme"), "nvme").map(|n| format!("/dev/{n}")),
                None,
            ),
            _ => (None, None),
        };
        out.push(Entry {
            bdf,
            id,
            driver,
            node,
            iommu_group,
            device,
        });
    }
    out.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(out)
}

/// Runs `bam list`.
pub fn run(_args: &ListArgs, g: &Global) -> CliResult<()> {
    let list = scan(Path::new("/sys")).map_err(|e| {
        CliError::new("cannot list PCI devices", e.to_string()).hint("is /sys mounted?")
    })?;
    if g.json {
        print_json(&list);
        return Ok(());
    }
    if list.is_empty() {
        g.note("no NVMe controllers found");
        return Ok(());
    }
    let mut s = format!(
        "{:<13} {:<10} {:<9} {:<16} {:<6} {}\n",
        "PCI", "ID", "DRIVER", "NODE", "GROUP", "BAM DEVICE"
    );
    for e in &list {
        s += &format!(
            "{:<13} {:<10} {:<9} {:<16} {:<6} {}\n",
            e.bdf,
            e.id,
            e.driver.as_deref().unwrap_or("-"),
            e.node.as_deref().unwrap_or("-"),
            e.iommu_group.map_or("-".into(), |g| g.to_string()),
            e.device
                .as_deref()
                .unwrap_or("- (bam bind BDF, or bam bind BDF --driver vfio-pci)")
        );
    }
    print(&s);
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake sysfs with three functions: NVMe on nvme, NVMe on bam_nvme, a bridge.
    pub(crate) fn fake_sysfs() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let s = t.path();
        for d in [
            "bus/pci/drivers/nvme",
            "bus/pci/drivers/bam_nvme",
            "bus/pci/drivers/vfio-pci",
        ] {
            fs::create_dir_all(s.join(d)).unwrap();
        }
        let dev = |bdf: &str, class: &str, driver: Option<&str>| {
            let d = s.join("bus/pci/devices").join(bdf);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("class"), format!("{class}\n")).unwrap();
            fs::write(d.join("vendor"), "0x1b36\n").unwrap();
            fs::write(d.join("device"), "0x0010\n").unwrap();
            fs::write(d.join("driver_override"), "(null)\n").unwrap();
            if let Some(drv) = driver {
                symlink(s.join("bus/pci/drivers").join(drv), d.join("driver")).unwrap();
            }
            symlink("../../../kernel/iommu_groups/7", d.join("iommu_group")).unwrap();
            d
        };
        let a = dev("0000:00:01.0", NVME_CLASS, Some("nvme"));
        fs::create_dir_all(a.join("nvme/nvme0")).unwrap();
        let b = dev("0000:00:02.0", NVME_CLASS, Some("bam_nvme"));
        fs::create_dir_all(b.join("bam-nvme/bam-nvme3")).unwrap();
        dev("0000:00:00.0", "0x060000", None);
        t
    }

    #[test]
    fn scan_finds_nvme_controllers_and_their_bindings() {
        let t = fake_sysfs();
        let l = scan(t.path()).unwrap();
        assert_eq!(l.len(), 2, "{l:?}");
        assert_eq!(l[0].bdf, "0000:00:01.0");
        assert_eq!(l[0].driver.as_deref(), Some("nvme"));
        assert_eq!(l[0].node.as_deref(), Some("/dev/nvme0"));
        assert_eq!(l[0].device, None);
        assert_eq!(l[0].id, "1b36:0010");
        assert_eq!(l[0].iommu_group, Some(7));
        assert_eq!(l[1].driver.as_deref(), Some("bam_nvme"));
        assert_eq!(l[1].device.as_deref(), Some("kmod:/dev/bam-nvme3"));
    }
}
