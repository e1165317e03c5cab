//! `bam bind BDF [--driver bam_nvme|vfio-pci]` and `bam unbind BDF`: hand an NVMe
//! controller to the bam kernel module (or to vfio-pci) and back to the kernel's nvme
//! driver, through sysfs `driver_override`. Binding takes the controller (and every
//! file system on it) away from the kernel: unmount first.

use super::list::NVME_CLASS;
use crate::error::{CliError, CliResult};
use crate::output::{print, print_json, Global};
use bam_nvme::transport::vfio::parse_bdf;
use clap::Args;
use serde::Serialize;
use std::fs;
use std::path::Path;

/// Arguments of `bam bind`.
#[derive(Args, Debug)]
pub struct BindArgs {
    /// PCI address of the controller, e.g. 0000:01:00.0 (see `bam list`)
    #[arg(value_name = "BDF")]
    pub bdf: String,
    /// Driver to bind it to
    #[arg(long, value_name = "DRIVER", default_value = "bam_nvme", value_parser = ["bam_nvme", "vfio-pci"])]
    pub driver: String,
}

/// Arguments of `bam unbind`.
#[derive(Args, Debug)]
pub struct UnbindArgs {
    /// PCI address of the controller
    #[arg(value_name = "BDF")]
    pub bdf: String,
    /// Unbind even while a process has the bam_nvme device open (its mappings are
    /// revoked; a BAR it registered into a GPU stays reachable until it closes the
    /// device, and the kernel's nvme driver cannot bind until then)
    #[arg(long)]
    pub force: bool,
}

/// The outcome, for JSON output.
#[derive(Serialize, Debug)]
pub struct Outcome {
    /// PCI address.
    pub bdf: String,
    /// Driver before.
    pub was: Option<String>,
    /// Driver now.
    pub now: Option<String>,
    /// `--device` string to use, if bam can use the device now.
    pub device: Option<String>,
}

fn driver_of(dev: &Path) -> Option<String> {
    fs::read_link(dev.join("driver"))
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
}

fn write(p: &Path, v: &str) -> Result<(), String> {
    fs::write(p, v).map_err(|e| format!("writing `{}` to {}: {e}", v.trim(), p.display()))
}

/// Binds `bdf` to `driver` under `sys` (normally `/sys`).
pub fn bind(sys: &Path, bdf: &str, driver: &str) -> Result<Outcome, CliError> {
    let what = "cannot bind the controller";
    let bdf = parse_bdf(bdf).map_err(|e| CliError::usage(what, e.to_string()))?;
    let dev = sys.join("bus/pci/devices").join(&bdf);
    let class = fs::read_to_string(dev.join("class"))
        .map_err(|_| CliError::new(what, format!("no PCI device {bdf}")).hint("see `bam list`"))?;
    if class.trim() != NVME_CLASS {
        return Err(CliError::new(
            what,
            format!("{bdf} is not an NVMe controller (class {})", class.trim()),
        ));
    }
    let drv_dir = sys.join("bus/pci/drivers").join(driver);
    if !drv_dir.is_dir() {
        let hint = if driver == "bam_nvme" {
            "load the module: insmod kernel-module/bam_nvme.ko (see docs/kernel-module.md)"
        } else {
            "load it: modprobe vfio-pci"
        };
        return Err(CliError::new(what, format!("driver {driver} is not loaded")).hint(hint));
    }
    let was = driver_of(&dev);
    let fail = |e: String| CliError::new(what, e).hint("run as root");
    write(&dev.join("driver_override"), driver).map_err(fail)?;
    if let Some(cur) = was.as_deref().filter(|c| *c != driver) {
        write(&sys.join("bus/pci/drivers").join(cur).join("unbind"), &bdf).map_err(fail)?;
    }
    if driver_of(&dev).as_deref() != Some(driver) {
        write(&drv_dir.join("bind"), &bdf)
            .map_err(|e| CliError::new(what, e).hint("see dmesg; the driver refused the device"))?;
    }
    let now = driver_of(&dev);
    if now.as_deref() != Some(driver) {
        return Err(CliError::new(
            what,
            format!(
                "{bdf} is bound to {} after binding",
                now.as_deref().unwrap_or("nothing")
            ),
        ));
    }
    let device = super::list::scan(sys)
        .ok()
        .and_then(|l| l.into_iter().find(|e| e.bdf == bdf))
        .and_then(|e| e.device);
    Ok(Outcome {
        bdf,
        was,
        now,
        device,
    })
}

/// The pid that has the bam_nvme device of `dev` open (sysfs `owner_pid` of its class
/// device), if any.
fn bam_owner(dev: &Path) -> Option<u32> {
    fs::read_dir(dev.join("bam-nvme"))
        .ok()?
        .flatten()
        .filter_map(|e| fs::read_to_string(e.path().join("owner_pid")).ok())
        .filter_map(|s| s.trim().parse::<u32>().ok())
        .find(|&pid| pid != 0)
}

/// Gives `bdf` back to the kernel's default driver. Refuses while a process has the
/// bam_nvme device open, unless `force`.
pub fn unbind(sys: &Path, bdf: &str, force: bool) -> Result<Outcome, CliError> {
    let what = "cannot unbind the controller";
    let bdf = parse_bdf(bdf).map_err(|e| CliError::usage(what, e.to_string()))?;
    let dev = sys.join("bus/pci/devices").join(&bdf);
    if !dev.is_dir() {
        return Err(CliError::new(what, format!("no PCI device {bdf}")).hint("see `bam list`"));
    }
    let was = driver_of(&dev);
    if was.as_deref() == Some("bam_nvme") && !force {
        if let Some(pid) = bam_owner(&dev) {
            return Err(CliError::new(
                what,
                format!(
                    "{bdf} is open by pid {pid}: unbinding revokes its mappings, and a BAR it \
                     registered into a GPU stays reachable until it closes the device"
                ),
            )
            .hint("stop that process first (or pass --force)"));
        }
    }
    let fail = |e: String| CliError::new(what, e).hint("run as root; close the programs using it");
    write(&dev.join("driver_override"), "\n").map_err(fail)?;
    if let Some(cur) = &was {
        write(&sys.join("bus/pci/drivers").join(cur).join("unbind"), &bdf).map_err(fail)?;
    }
    // let the kernel pick its own driver again (nvme)
    write(&sys.join("bus/pci/drivers_probe"), &bdf).map_err(fail)?;
    Ok(Outcome {
        bdf,
        was,
        now: driver_of(&dev),
        device: None,
    })
}

fn report(o: &Outcome, g: &Global) {
    if g.json {
        print_json(o);
        return;
    }
    print(&format!(
        "{}: {} -> {}{}\n",
        o.bdf,
        o.was.as_deref().unwrap_or("no driver"),
        o.now.as_deref().unwrap_or("no driver"),
        o.device
            .as_deref()
            .map_or(String::new(), |d| format!(" (use --device {d})"))
    ));
}

/// Runs `bam bind`.
pub fn run_bind(a: &BindArgs, g: &Global) -> CliResult<()> {
    report(&bind(Path::new("/sys"), &a.bdf, &a.driver)?, g);
    Ok(())
}

/// Runs `bam unbind`.
pub fn run_unbind(a: &UnbindArgs, g: &Global) -> CliResult<()> {
    report(&unbind(Path::new("/sys"), &a.bdf, a.force)?, g);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::list::tests::fake_sysfs;

    #[test]
    fn refuses_non_nvme_and_absent_devices() {
        let t = fake_sysfs();
        let e = bind(t.path(), "0000:00:00.0", "bam_nvme").unwrap_err();
        assert!(e.to_string().contains("not an NVMe controller"), "{e}");
        let e = bind(t.path(), "0000:00:09.0", "bam_nvme").unwrap_err();
        assert!(e.to_string().contains("no PCI device"), "{e}");
        let e = bind(t.path(), "zz", "bam_nvme").unwrap_err();
        assert!(e.usage);
    }

    #[test]
    fn missing_driver_gets_a_hint() {
        let t = fake_sysfs();
        fs::remove_dir(t.path().join("bus/pci/drivers/vfio-pci")).unwrap();
        let e = bind(t.path(), "0000:00:01.0", "vfio-pci").unwrap_err();
        assert!(e.to_string().contains("modprobe vfio-pci"), "{e}");
    }

    #[test]
    fn bind_writes_override_unbind_and_bind() {
        // sysfs files are plain files here: the writes land, the binding cannot happen,
        // so bind reports that the device is still on its old driver.
        let t = fake_sysfs();
        let e = bind(t.path(), "00:01.0", "bam_nvme").unwrap_err();
        let dev = t.path().join("bus/pci/devices/0000:00:01.0");
        assert_eq!(
            fs::read_to_string(dev.join("driver_override")).unwrap(),
            "bam_nvme"
        );
        let unbind = t.path().join("bus/pci/drivers/nvme/unbind");
        assert_eq!(fs::read_to_string(unbind).unwrap(), "0000:00:01.0");
        let bind = t.path().join("bus/pci/drivers/bam_nvme/bind");
        assert_eq!(fs::read_to_string(bind).unwrap(), "0000:00:01.0");
        assert!(e.to_string().contains("bound to nvme after binding"), "{e}");
    }

    #[test]
    fn already_bound_is_success() {
        let t = fake_sysfs();
        let o = bind(t.path(), "0000:00:02.0", "bam_nvme").unwrap();
        assert_eq!(o.now.as_deref(), Some("bam_nvme"));
        assert_eq!(o.device.as_deref(), Some("kmod:/dev/bam-nvme3"));
    }

    #[test]
    fn unbind_clears_override_and_reprobes() {
        let t = fake_sysfs();
        let o = unbind(t.path(), "0000:00:02.0", false).unwrap();
        assert_eq!(o.was.as_deref(), Some("bam_nvme"));
        let dev = t.path().join("bus/pci/devices/0000:00:02.0");
        assert_eq!(
            fs::read_to_string(dev.join("driver_override")).unwrap(),
            "\n"
        );
        assert_eq!(
            fs::read_to_string(t.path().join("bus/pci/drivers_probe")).unwrap(),
            "0000:00:02.0"
        );
    }

    #[test]
    fn unbind_refuses_an_open_device_unless_forced() {
        let t = fake_sysfs();
        let dev = t.path().join("bus/pci/devices/0000:00:02.0");
        fs::write(dev.join("bam-nvme/bam-nvme3/owner_pid"), "1234\n").unwrap();
        let e = unbind(t.path(), "0000:00:02.0", false).unwrap_err();
        assert!(e.to_string().contains("open by pid 1234"), "{e}");
        assert!(!t.path().join("bus/pci/drivers_probe").exists());
        fs::write(dev.join("bam-nvme/bam-nvme3/owner_pid"), "0\n").unwrap();
        unbind(t.path(), "0000:00:02.0", false).unwrap();
        fs::write(dev.join("bam-nvme/bam-nvme3/owner_pid"), "1234\n").unwrap();
        let o = unbind(t.path(), "0000:00:02.0", true).unwrap();
        assert_eq!(o.was.as_deref(), Some("bam_nvme"));
    }
}
