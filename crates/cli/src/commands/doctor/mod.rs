//! `bam doctor`: checks what GPU-initiated I/O on real NVMe SSDs needs on this machine
//! (an NVIDIA GPU and driver, nvidia_p2p, the bam_nvme module, bound controllers, IOMMU
//! mode, PCIe topology and ACS, the memlock limit) and says what is missing, in the
//! spirit of NVIDIA's `gdscheck -p`.
//!
//! Every check reads sysfs and procfs below a root it is given (`/sys`, `/proc` when
//! run), so the checks are unit-tested against small fake trees. Layout: this file has
//! the report, its text and JSON forms and the summary; `gpu.rs` the GPU check (through
//! the CUDA driver with the `gpu` feature); `nvidia.rs` the NVIDIA driver and its
//! nvidia_p2p exports; `module.rs` the bam_nvme module and its device nodes;
//! `checks.rs` the process context and the controller, IOMMU and memlock checks;
//! `topology.rs` the PCIe paths between GPUs and SSDs, and ACS.

mod checks;
mod gpu;
mod module;
mod nvidia;
mod topology;

use crate::commands::list;
use crate::error::{CliError, CliResult};
use crate::output::{print, print_json, Global};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;

/// `bam doctor --help`: what each check means and how to fix what it finds.
pub const LONG_ABOUT: &str = "\
Check what GPU-initiated I/O on real NVMe SSDs needs on this machine, and say what is
missing. Each line is OK, WARN, FAIL, INFO or SKIP (a check that cannot apply here), with
the fix under it. Nothing is changed. It runs without root, but some checks are only
complete as root (they say so). Without a GPU the CPU-side commands (model:, vfio:,
kmod:) still work; the summary at the end says what can run here.

Checks:
  gpu            NVIDIA GPUs seen by the CUDA driver: name, PCI address, compute
                 capability, memory, BAR1 size. FAIL without a GPU or driver (install
                 the NVIDIA driver). bam's GPU kernels need sm_90 or newer. WARN when BAR1
                 is smaller than the GPU's memory: queues and buffers mapped through
                 nvidia_p2p must fit in BAR1 (enable Resizable BAR / Above 4G decoding in
                 the firmware).
  nvidia-driver  The NVIDIA kernel driver's version (/proc/driver/nvidia/version).
  nvidia-p2p     Whether the nvidia module is loaded and exports nvidia_p2p_get_pages,
                 nvidia_p2p_dma_map_pages and the rest (/proc/kallsyms). FAIL when the bam
                 module cannot map GPU memory (load the NVIDIA driver: modprobe nvidia).
  bam-module     Whether bam_nvme is loaded, its version, and for each /dev/bam-nvmeN the
                 module's ABI version (must match bam's) and its nvidia_p2p support
                 (opening the node needs root). Fix: load it with
                   make -C kernel-module && insmod kernel-module/bam_nvme.ko
                 and on an ABI mismatch rebuild both from one source tree.
  controllers    Every NVMe controller (PCI class 010802), its driver and --device
                 string; for one on the kernel's nvme driver, what binding it would take
                 away (mounted namespaces and partitions, swap, dm/md holders). WARN when
                 none is bound to bam_nvme (bam bind BDF, which refuses one in use).
  iommu          IOMMUs, the kernel command line and each controller's IOMMU group type.
                 P2P DMA from an SSD to GPU BAR1 wants the IOMMU off or in passthrough:
                 WARN for translated DMA (DMA, DMA-FQ); fix: iommu=pt on the kernel
                 command line. Untranslated DMA needs the module's allow_unsafe_noiommu=1:
                 FAIL while the loaded module has it off (open would get EPERM), WARN with
                 it on (the controller's DMA, which any kernel of the CUDA context can aim,
                 reaches all physical memory), INFO when the module is not loaded.
  topology       The PCIe path between each GPU and each controller: one PCIe switch is
                 best; through the root complex works on most CPUs but is slower; across
                 root complexes or sockets (NUMA nodes) P2P may fail or be slow. WARN when
                 ACS on a bridge of the path redirects P2P requests or completions to the
                 root complex (setpci -s BDF ECAP_ACS+6.w=0, or a BIOS option); reading
                 ACS needs root.
  memlock        RLIMIT_MEMLOCK: the module pins host DMA buffers against it. WARN below
                 1 GiB without root or CAP_IPC_LOCK (ulimit -l unlimited, or memlock in
                 /etc/security/limits.conf).";

/// `bam doctor --help`, after the options: exit codes and examples.
pub const AFTER_HELP: &str = "\
Exit codes: 0 when no check FAILs, 1 when any does, 2 when the command line is wrong.
With --json the report (checks, summary, counts) is JSON on stdout.

Examples:
  bam doctor                     check this machine
  sudo bam doctor                complete results (device ABI, ACS)
  bam doctor --json | jq '.checks[] | select(.status == \"FAIL\")'
See docs/doctor.md.";

/// Arguments of `bam doctor` (none besides the global `--json`).
#[derive(Args, Debug)]
pub struct DoctorArgs {}

/// The verdict of one line of the report.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Fine.
    Ok,
    /// A fact worth knowing; nothing to fix.
    Info,
    /// The check cannot apply here (no GPU, not root, ...).
    Skip,
    /// Works, but slower or fragile; the fix says how to do better.
    Warn,
    /// Missing: the GPU path cannot work until it is fixed.
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Info => "INFO",
            Status::Skip => "SKIP",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// Names of the checks, as printed and in JSON.
pub mod ids {
    /// GPUs through the CUDA driver.
    pub const GPU: &str = "gpu";
    /// The NVIDIA kernel driver's version.
    pub const DRIVER: &str = "nvidia-driver";
    /// The nvidia module and its nvidia_p2p exports.
    pub const P2P: &str = "nvidia-p2p";
    /// The bam_nvme module and its device nodes.
    pub const MODULE: &str = "bam-module";
    /// NVMe controllers and their drivers.
    pub const CONTROLLERS: &str = "controllers";
    /// IOMMU mode.
    pub const IOMMU: &str = "iommu";
    /// PCIe paths between GPUs and controllers, and ACS.
    pub const TOPOLOGY: &str = "topology";
    /// RLIMIT_MEMLOCK.
    pub const MEMLOCK: &str = "memlock";
    /// Every check, in report order.
    #[cfg(test)]
    pub const ALL: [&str; 8] = [
        GPU,
        DRIVER,
        P2P,
        MODULE,
        CONTROLLERS,
        IOMMU,
        TOPOLOGY,
        MEMLOCK,
    ];
}

/// One line of the report.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Which check (see [`ids`]).
    pub check: &'static str,
    /// The verdict.
    pub status: Status,
    /// What was found.
    pub message: String,
    /// What to do about it (one sentence), for WARN and FAIL and some INFO lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The check is incomplete without root.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub needs_root: bool,
}

impl Check {
    /// A line with `status`.
    pub fn new(check: &'static str, status: Status, message: impl Into<String>) -> Self {
        Check {
            check,
            status,
            message: message.into(),
            fix: None,
            needs_root: false,
        }
    }
    /// An OK line.
    pub fn ok(check: &'static str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Ok, message)
    }
    /// An INFO line.
    pub fn info(check: &'static str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Info, message)
    }
    /// A SKIP line.
    pub fn skip(check: &'static str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Skip, message)
    }
    /// A WARN line.
    pub fn warn(check: &'static str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Warn, message)
    }
    /// A FAIL line.
    pub fn fail(check: &'static str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Fail, message)
    }
    /// Adds the fix.
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
    /// Marks the line as incomplete without root.
    pub fn needs_root(mut self) -> Self {
        self.needs_root = true;
        self
    }
}

/// Whether one kind of use can run here, and if not, why.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// It can run.
    pub available: bool,
    /// Why not (or a note), empty when it simply can.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
}

impl Verdict {
    fn yes() -> Self {
        Verdict {
            available: true,
            why: String::new(),
        }
    }
    fn no(why: impl Into<String>) -> Self {
        Verdict {
            available: false,
            why: why.into(),
        }
    }
}

/// What can run on this machine.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The simulated SSD array, `sim:` (needs a GPU).
    pub simulated_ssd_array: Verdict,
    /// The host-controller backend, `hostctl:` (needs a GPU).
    pub host_controller_backend: Verdict,
    /// Real SSDs driven from GPU threads through the bam module (`kmod:`).
    pub real_ssds_from_gpu: Verdict,
    /// The CPU-side commands (`model:`, `vfio:`, `kmod:`); always available.
    pub cpu_side_commands: Verdict,
}

/// The whole report (`bam doctor --json`).
#[derive(Serialize, Debug, Clone)]
pub struct Report {
    /// Every line, in check order.
    pub checks: Vec<Check>,
    /// What can run here.
    pub summary: Summary,
    /// Number of FAIL lines.
    pub failures: usize,
    /// Number of WARN lines.
    pub warnings: usize,
    /// The report was made as root (else lines with `needs_root` are incomplete).
    pub root: bool,
}

/// Where the checks read the system: `/sys` and `/proc` normally.
#[derive(Debug, Clone)]
pub struct Roots {
    /// sysfs.
    pub sys: PathBuf,
    /// procfs.
    pub proc: PathBuf,
}

/// The GPU facts the other checks and the summary need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuFacts {
    /// PCI addresses of the GPUs the driver sees.
    pub bdfs: Vec<String>,
    /// `None` when a GPU bam's kernels run on is there, else why not ("needs a GPU").
    pub unusable: Option<String>,
}

/// Builds the report: runs every check against `roots`, with `probe` opening device
/// nodes of the bam module and `gpu` the GPU check's lines and facts.
pub fn report(
    roots: &Roots,
    ctx: &checks::Context,
    gpu: (Vec<Check>, GpuFacts),
    probe: &dyn Fn(&str) -> module::Probe,
) -> Report {
    let (mut lines, facts) = gpu;
    lines.push(nvidia::nvidia_driver(&roots.proc));
    lines.extend(nvidia::nvidia_p2p(&roots.sys, &roots.proc));
    let controllers = list::scan(&roots.sys);
    lines.extend(module::bam_module(
        &roots.sys,
        controllers.as_deref(),
        ctx,
        probe,
    ));
    lines.extend(checks::controllers(
        &roots.sys,
        &roots.proc,
        controllers.as_deref(),
    ));
    let controllers = controllers.unwrap_or_default();
    lines.extend(checks::iommu(&roots.sys, &roots.proc, &controllers));
    // GPUs for the topology: those CUDA sees, and NVIDIA display/3D functions in sysfs
    // (so the topology is checked without libcuda too).
    let mut gpus = facts.bdfs.clone();
    gpus.extend(topology::nvidia_gpus(&roots.sys));
    gpus.sort();
    gpus.dedup();
    let nvme: Vec<String> = controllers.iter().map(|c| c.bdf.clone()).collect();
    lines.extend(topology::check(&roots.sys, &gpus, &nvme, ctx.root));
    lines.push(checks::memlock(ctx));
    let summary = summarize(&lines, &facts, &controllers);
    Report {
        failures: lines.iter().filter(|c| c.status == Status::Fail).count(),
        warnings: lines.iter().filter(|c| c.status == Status::Warn).count(),
        checks: lines,
        summary,
        root: ctx.root,
    }
}

/// What can run, from the lines and the GPU facts.
fn summarize(lines: &[Check], gpu: &GpuFacts, controllers: &[list::Entry]) -> Summary {
    let gpu_verdict = match &gpu.unusable {
        None => Verdict::yes(),
        Some(why) => Verdict::no(why.clone()),
    };
    // The first FAIL blocks the GPU path; failing that, an unusable GPU (e.g. a build
    // without GPU support) or no controller on bam_nvme does.
    let blocking = lines
        .iter()
        .find(|c| c.status == Status::Fail)
        .map(|c| format!("{}: {}", c.check, c.message))
        .or_else(|| gpu.unusable.as_ref().map(|why| format!("gpu: {why}")))
        .or_else(|| {
            (!controllers
                .iter()
                .any(|c| c.driver.as_deref() == Some("bam_nvme")))
            .then(|| "controllers: none is bound to bam_nvme (bam bind BDF)".to_string())
        });
    Summary {
        simulated_ssd_array: gpu_verdict.clone(),
        host_controller_backend: gpu_verdict,
        real_ssds_from_gpu: match blocking {
            None => Verdict::yes(),
            Some(why) => Verdict::no(why),
        },
        cpu_side_commands: Verdict::yes(),
    }
}

/// The report as text: one line per check (status, check, message) with the fix
/// indented under it, then the summary.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    if !r.root && r.checks.iter().any(|c| c.needs_root) {
        s += "(not root: lines marked [needs root] are incomplete; sudo bam doctor completes them)\n";
    }
    for c in &r.checks {
        s += &format!("{:<5} {:<14} {}", c.status.label(), c.check, c.message);
        if c.needs_root && !r.root {
            s += " [needs root]";
        }
        s.push('\n');
        if let Some(fix) = &c.fix {
            s += &format!("{:<20} fix: {fix}\n", "");
        }
    }
    let line = |what: &str, v: &Verdict| -> String {
        let answer = match (v.available, v.why.is_empty()) {
            (true, _) => "yes".to_string(),
            (false, true) => "no".to_string(),
            (false, false) if what.starts_with("real") => format!("no — {}", v.why),
            (false, false) => format!("no ({})", v.why),
        };
        format!("  {what:<42} {answer}\n")
    };
    s += &format!(
        "\nSummary: {} FAIL, {} WARN. What can run here:\n",
        r.failures, r.warnings
    );
    let m = &r.summary;
    s += &line("simulated SSD array (sim:):", &m.simulated_ssd_array);
    s += &line(
        "host-controller backend (hostctl:):",
        &m.host_controller_backend,
    );
    s += &line("real SSDs from GPU threads (kmod:):", &m.real_ssds_from_gpu);
    s += &line(
        "CPU-side commands (model:, vfio:, kmod:):",
        &m.cpu_side_commands,
    );
    s
}

/// Runs `bam doctor`: prints the report; an error (exit code 1) when any check FAILs.
pub fn run(_args: &DoctorArgs, g: &Global) -> CliResult<()> {
    let roots = Roots {
        sys: PathBuf::from("/sys"),
        proc: PathBuf::from("/proc"),
    };
    let ctx = checks::Context::of_this_process(&roots.proc);
    let r = report(&roots, &ctx, gpu::check(&roots.sys), &module::probe_node);
    if g.json {
        print_json(&r);
    } else {
        print(&render(&r));
    }
    if r.failures == 0 {
        return Ok(());
    }
    let failed: Vec<&str> = {
        let mut v: Vec<&str> = r
            .checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.check)
            .collect();
        v.dedup();
        v
    };
    let err = CliError::new(
        "this machine cannot run the GPU path yet",
        format!("{} check(s) failed: {}", r.failures, failed.join(", ")),
    )
    .hint("fix the FAIL lines of the report (bam doctor --help explains each)");
    Err(if g.json { err.in_json_output() } else { err })
}

/// Makes `path`'s parent directories and writes `text` (for the tests' fake trees).
#[cfg(test)]
pub(crate) fn put(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A controller of `bam list` (for the tests).
#[cfg(test)]
pub(crate) fn entry(bdf: &str, driver: Option<&str>, node: Option<&str>) -> list::Entry {
    list::Entry {
        bdf: bdf.into(),
        id: "144d:a80a".into(),
        driver: driver.map(str::to_string),
        node: node.map(str::to_string),
        iommu_group: None,
        device: node
            .filter(|_| driver == Some("bam_nvme"))
            .map(|n| format!("kmod:{n}")),
    }
}

/// A process context with an 8 MiB memlock limit and no capabilities (for the tests).
#[cfg(test)]
pub(crate) fn test_ctx(root: bool) -> checks::Context {
    checks::Context {
        root,
        cap_ipc_lock: false,
        memlock: Some(8 << 20),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use module::Probe;

    fn ctx() -> checks::Context {
        test_ctx(false)
    }

    #[test]
    fn empty_machine_has_a_line_for_every_check_and_fails() {
        let t = tempfile::tempdir().unwrap();
        let roots = Roots {
            sys: t.path().join("sys"),
            proc: t.path().join("proc"),
        };
        std::fs::create_dir_all(roots.sys.join("bus/pci/devices")).unwrap();
        let gpu = (
            vec![Check::fail(ids::GPU, "no NVIDIA GPU/driver")],
            GpuFacts {
                bdfs: vec![],
                unusable: Some("needs a GPU".into()),
            },
        );
        let r = report(&roots, &ctx(), gpu, &|_| Probe::NeedsRoot);
        for id in ids::ALL {
            assert!(
                r.checks.iter().any(|c| c.check == id),
                "no {id} line: {r:#?}"
            );
        }
        assert!(r.failures >= 3, "{r:#?}");
        assert!(!r.summary.simulated_ssd_array.available);
        assert!(r.summary.cpu_side_commands.available);
        assert!(r
            .summary
            .real_ssds_from_gpu
            .why
            .starts_with("gpu: no NVIDIA GPU"));
        let text = render(&r);
        assert!(text.contains("FAIL  gpu"), "{text}");
        assert!(
            text.contains("real SSDs from GPU threads (kmod:):"),
            "{text}"
        );
        assert!(text.contains("no — gpu: no NVIDIA GPU/driver"), "{text}");
        assert!(text.contains("simulated SSD array (sim:):"), "{text}");
        assert!(text.contains("no (needs a GPU)"), "{text}");
        assert!(text.contains("fix: "), "{text}");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["checks"][0]["status"], "FAIL");
        assert_eq!(v["summary"]["cpu_side_commands"]["available"], true);
    }

    #[test]
    fn summary_without_failures_needs_a_bound_controller() {
        let lines = vec![Check::ok(ids::GPU, "GPU 0")];
        let facts = GpuFacts::default();
        let s = summarize(&lines, &facts, &[]);
        assert!(s.simulated_ssd_array.available);
        assert!(!s.real_ssds_from_gpu.available);
        assert!(s.real_ssds_from_gpu.why.contains("bam bind"));
        let bound = list::Entry {
            bdf: "0000:01:00.0".into(),
            id: "1b36:0010".into(),
            driver: Some("bam_nvme".into()),
            node: Some("/dev/bam-nvme0".into()),
            iommu_group: None,
            device: Some("kmod:/dev/bam-nvme0".into()),
        };
        let s = summarize(&lines, &facts, &[bound]);
        assert!(s.real_ssds_from_gpu.available, "{s:?}");
    }
}
