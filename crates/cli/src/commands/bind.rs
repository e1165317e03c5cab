//! `bam bind BDF [--driver bam_nvme|vfio-pci]` and `bam unbind BDF`: hand an NVMe
//! controller to the bam kernel module (or to vfio-pci) and back to the kernel's nvme
//! driver, through sysfs `driver_override`. Binding takes the controller (and every
//! file system on it) away from the kernel, so `bam bind` refuses a controller whose
//! namespaces are mounted, swap or held by dm/md, unless `--force` and a confirmation.

use super::holders::{self, Holder};
use super::list::NVME_CLASS;
use crate::error::{CliError, CliResult};
use crate::output::{print, print_json, Global};
use bam_nvme::transport::vfio::parse_bdf;
use clap::Args;
use serde::Serialize;
use std::fs;
use std::io::{BufRead, Write};
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
    /// Bind even while its namespaces are mounted, swap or held by dm/md: their file
    /// systems and volumes stop working at once. Asks you to type the BDF first
    #[arg(long)]
    pub force: bool,
    /// With --force: do not ask (for scripts); the warning is still printed
    #[arg(long, requires = "force")]
    pub yes: bool,
}

/// `--force`: how `bind` gets the user's consent to take a controller in use.
pub struct Force<'a> {
    /// `--yes`: go on without asking (the warning is still written).
    pub yes: bool,
    /// Where the user types the BDF (stdin).
    pub answer: &'a mut dyn BufRead,
    /// Where the warning goes (stderr).
    pub warning: &'a mut dyn Write,
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

/// The refusal to bind `bdf` while `in_use` lists what uses its namespaces.
fn in_use_error(what: &str, bdf: &str, in_use: &[Holder]) -> CliError {
    let list: Vec<String> = in_use.iter().map(Holder::to_string).collect();
    CliError::new(what, format!("{bdf} is in use: {}", list.join(", "))).hint(
        "unmount them, swapoff, stop their dm/md devices (vgchange -an, dmsetup remove, \
         mdadm --stop) first; or pass --force to bind anyway (they stop working)",
    )
}

/// Asks for consent to take `bdf`, whose namespaces `in_use` lists, from the kernel:
/// writes what will be lost to `warning`, then wants the BDF typed as the first line of
/// `answer` (unless `yes`). A wrong or missing answer is a refusal.
pub fn confirm_loss(
    bdf: &str,
    driver: &str,
    in_use: &[Holder],
    yes: bool,
    mut answer: impl BufRead,
    mut warning: impl Write,
) -> CliResult<()> {
    let what = "cannot bind the controller";
    let mut text = format!(
        "bam: warning: binding {bdf} to {driver} takes these from the kernel at once; \
         their file systems and volumes stop working and unwritten data is lost:\n"
    );
    for h in in_use {
        text += &format!("  {h}\n");
    }
    text += &if yes {
        "bam: --yes: binding anyway\n".to_string()
    } else {
        format!("Type {bdf} to bind it anyway: ")
    };
    warning
        .write_all(text.as_bytes())
        .and_then(|()| warning.flush())
        .map_err(|e| CliError::new(what, format!("cannot write the warning: {e}")))?;
    if yes {
        return Ok(());
    }
    let mut line = String::new();
    answer
        .read_line(&mut line)
        .map_err(|e| CliError::new(what, format!("cannot read the answer: {e}")))?;
    if line.trim() == bdf {
        return Ok(());
    }
    let cause = if line.is_empty() {
        "not confirmed: no answer on stdin".to_string()
    } else {
        format!("not confirmed: the answer was not {bdf}")
    };
    Err(CliError::new(what, cause).hint(format!(
        "type {bdf} exactly, or pass --yes with --force in scripts"
    )))
}

/// Binds `bdf` to `driver` under `sys` (normally `/sys`). Refuses while its namespaces
/// are in use (read below `sys` and `proc`), unless `force` and the user confirms.
pub fn bind(
    sys: &Path,
    proc: &Path,
    bdf: &str,
    driver: &str,
    force: Option<Force<'_>>,
) -> Result<Outcome, CliError> {
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
    let in_use = holders::in_use(sys, proc, &bdf).map_err(|e| {
        CliError::new(what, format!("cannot tell whether {bdf} is in use: {e}"))
            .hint("mount procfs on /proc")
    })?;
    if !in_use.is_empty() {
        match force {
            None => return Err(in_use_error(what, &bdf, &in_use)),
            Some(f) => confirm_loss(&bdf, driver, &in_use, f.yes, f.answer, f.warning)?,
        }
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
    let (mut stdin, mut stderr) = (std::io::stdin().lock(), std::io::stderr());
    let force = a.force.then_some(Force {
        yes: a.yes,
        answer: &mut stdin,
        warning: &mut stderr,
    });
    let (sys, proc) = (Path::new("/sys"), Path::new("/proc"));
    report(&bind(sys, proc, &a.bdf, &a.driver, force)?, g);
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
    use crate::commands::holders::tests::{add_dm_holder, add_namespace, fake_proc, ROOT_ON_259_1};
    use crate::commands::list::tests::fake_sysfs;

    /// The nvme-bound controller of `fake_sysfs`.
    const ON_NVME: &str = "0000:00:01.0";

    /// `bind` to bam_nvme without --force.
    fn bind_plain(sys: &Path, proc: &Path, bdf: &str) -> Result<Outcome, CliError> {
        bind(sys, proc, bdf, "bam_nvme", None)
    }

    /// `bind` of [`ON_NVME`] with --force, `answer` on stdin; returns the result and
    /// the warning.
    fn bind_forced(
        sys: &Path,
        proc: &Path,
        yes: bool,
        answer: &str,
    ) -> (CliResult<Outcome>, String) {
        let mut warning = Vec::new();
        let force = Force {
            yes,
            answer: &mut answer.as_bytes(),
            warning: &mut warning,
        };
        let r = bind(sys, proc, ON_NVME, "bam_nvme", Some(force));
        (r, String::from_utf8(warning).unwrap())
    }

    /// The driver_override of [`ON_NVME`]: `(null)` until bind writes it.
    fn override_of(sys: &Path) -> String {
        let dev = sys.join("bus/pci/devices").join(ON_NVME);
        fs::read_to_string(dev.join("driver_override")).unwrap()
    }

    /// The fake sysfs with namespace nvme0n1 (partitions p1, p2) on [`ON_NVME`], and an
    /// empty procfs.
    fn with_namespace() -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf) {
        let (sys, proc) = (fake_sysfs(), tempfile::tempdir().unwrap());
        let ns = add_namespace(sys.path(), ON_NVME, "nvme0", "nvme0n1", 0, 2);
        fake_proc(proc.path(), &[], &[]);
        (sys, proc, ns)
    }

    #[test]
    fn refuses_non_nvme_and_absent_devices() {
        let t = fake_sysfs();
        let e = bind_plain(t.path(), t.path(), "0000:00:00.0").unwrap_err();
        assert!(e.to_string().contains("not an NVMe controller"), "{e}");
        let e = bind_plain(t.path(), t.path(), "0000:00:09.0").unwrap_err();
        assert!(e.to_string().contains("no PCI device"), "{e}");
        let e = bind_plain(t.path(), t.path(), "zz").unwrap_err();
        assert!(e.usage);
    }

    #[test]
    fn missing_driver_gets_a_hint() {
        let t = fake_sysfs();
        fs::remove_dir(t.path().join("bus/pci/drivers/vfio-pci")).unwrap();
        let e = bind(t.path(), t.path(), "0000:00:01.0", "vfio-pci", None).unwrap_err();
        assert!(e.to_string().contains("modprobe vfio-pci"), "{e}");
    }

    #[test]
    fn bind_writes_override_unbind_and_bind() {
        // sysfs files are plain files here: the writes land, the binding cannot happen,
        // so bind reports that the device is still on its old driver.
        let t = fake_sysfs();
        let e = bind_plain(t.path(), t.path(), "00:01.0").unwrap_err();
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
        let o = bind_plain(t.path(), t.path(), "0000:00:02.0").unwrap();
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

    #[test]
    fn refuses_a_mounted_partition_and_names_it() {
        let (sys, proc, _) = with_namespace();
        fake_proc(proc.path(), &[ROOT_ON_259_1], &[]);
        let e = bind_plain(sys.path(), proc.path(), ON_NVME).unwrap_err();
        assert_eq!(
            e.cause,
            "0000:00:01.0 is in use: nvme0n1p1 mounted on / (ext4)"
        );
        assert!(e.hint.as_deref().unwrap().contains("--force"), "{e}");
        assert_eq!(override_of(sys.path()), "(null)\n");
    }

    #[test]
    fn refuses_a_partition_used_as_swap() {
        let (sys, proc, _) = with_namespace();
        fake_proc(proc.path(), &[], &["/dev/nvme0n1p2"]);
        let e = bind_plain(sys.path(), proc.path(), ON_NVME).unwrap_err();
        assert!(e.cause.ends_with("in use: nvme0n1p2 used as swap"), "{e}");
        assert_eq!(override_of(sys.path()), "(null)\n");
    }

    #[test]
    fn refuses_a_namespace_held_by_dm_and_lists_every_holder() {
        let (sys, proc, ns) = with_namespace();
        add_dm_holder(sys.path(), &ns, "dm-0", "vg0-data");
        fake_proc(proc.path(), &[ROOT_ON_259_1], &["/dev/nvme0n1p2"]);
        let e = bind_plain(sys.path(), proc.path(), ON_NVME).unwrap_err();
        assert_eq!(
            e.cause,
            "0000:00:01.0 is in use: nvme0n1 held by dm-0 (vg0-data), \
             nvme0n1p1 mounted on / (ext4), nvme0n1p2 used as swap"
        );
        assert_eq!(override_of(sys.path()), "(null)\n");
    }

    #[test]
    fn an_idle_controller_binds() {
        // Namespaces, none in use: bind goes on to the sysfs writes (which cannot move
        // the fake driver link, hence the final error).
        let (sys, proc, _) = with_namespace();
        fake_proc(proc.path(), &["22 29 0:21 / /proc rw - proc proc rw"], &[]);
        let e = bind_plain(sys.path(), proc.path(), ON_NVME).unwrap_err();
        assert!(e.cause.contains("bound to nvme after binding"), "{e}");
        assert_eq!(override_of(sys.path()), "bam_nvme");
    }

    #[test]
    fn force_binds_after_the_bdf_is_typed() {
        let (sys, proc, _) = with_namespace();
        fake_proc(proc.path(), &[ROOT_ON_259_1], &[]);
        let (r, warning) = bind_forced(sys.path(), proc.path(), false, "0000:00:01.0\n");
        assert!(r.unwrap_err().cause.contains("bound to nvme after binding"));
        assert!(
            warning.contains("  nvme0n1p1 mounted on / (ext4)\n"),
            "{warning}"
        );
        assert!(
            warning.ends_with("Type 0000:00:01.0 to bind it anyway: "),
            "{warning}"
        );
        assert_eq!(override_of(sys.path()), "bam_nvme");
    }

    #[test]
    fn force_refuses_a_wrong_or_missing_answer() {
        let (sys, proc, _) = with_namespace();
        fake_proc(proc.path(), &[ROOT_ON_259_1], &[]);
        for (answer, cause) in [
            (
                "00:01.0\n",
                "not confirmed: the answer was not 0000:00:01.0",
            ),
            ("yes\n", "not confirmed: the answer was not 0000:00:01.0"),
            ("", "not confirmed: no answer on stdin"),
        ] {
            let (r, warning) = bind_forced(sys.path(), proc.path(), false, answer);
            assert_eq!(r.unwrap_err().cause, cause, "answer {answer:?}");
            assert!(warning.contains("nvme0n1p1 mounted on /"), "{warning}");
            assert_eq!(override_of(sys.path()), "(null)\n", "answer {answer:?}");
        }
    }

    #[test]
    fn force_yes_binds_without_asking_but_still_warns() {
        let (sys, proc, _) = with_namespace();
        fake_proc(proc.path(), &[], &["/dev/nvme0n1p2"]);
        let (r, warning) = bind_forced(sys.path(), proc.path(), true, "");
        assert!(r.unwrap_err().cause.contains("bound to nvme after binding"));
        assert!(warning.contains("  nvme0n1p2 used as swap\n"), "{warning}");
        assert!(warning.contains("--yes: binding anyway"), "{warning}");
        assert_eq!(override_of(sys.path()), "bam_nvme");
    }

    #[test]
    fn yes_needs_force() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bind: BindArgs,
        }
        assert!(Cli::try_parse_from(["bam", ON_NVME, "--yes"]).is_err());
        let c = Cli::try_parse_from(["bam", ON_NVME, "--force", "--yes"]).unwrap();
        assert!(c.bind.force && c.bind.yes);
    }
}
