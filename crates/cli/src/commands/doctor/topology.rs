//! PCIe topology between GPUs and NVMe controllers, and ACS on the bridges between
//! them. A device's place in the hierarchy is the realpath of its sysfs directory,
//! `/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0`: the host bridge
//! (root complex) `pci0000:00`, then every bridge down to the device.

use super::{ids, Check};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// Extended capability id of Access Control Services.
pub const ECAP_ACS: u16 = 0x000d;
/// ACS Control: P2P Request Redirect.
pub const ACS_RR: u16 = 1 << 2;
/// ACS Control: P2P Completion Redirect.
pub const ACS_CR: u16 = 1 << 3;

/// Where a device sits: its host bridge and the chain of PCI functions from the root
/// port (or the root bus) down to the device itself (last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciPath {
    /// Host bridge directory name, e.g. `pci0000:00`.
    pub host: String,
    /// Bridges from the top, then the device.
    pub chain: Vec<String>,
}

impl PciPath {
    /// The bridges above the device, top first.
    pub fn bridges(&self) -> &[String] {
        &self.chain[..self.chain.len().saturating_sub(1)]
    }
}

/// Whether `s` looks like a PCI address `DDDD:BB:DD.F` (any domain width).
pub fn is_bdf(s: &str) -> bool {
    // `n`: the exact number of digits, 0 for any.
    let hex = |p: &str, n: usize| {
        !p.is_empty() && (n == 0 || p.len() == n) && p.chars().all(|c| c.is_ascii_hexdigit())
    };
    let mut parts = s.split(':');
    let (Some(dom), Some(bus), Some(rest), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some((dev, func)) = rest.split_once('.') else {
        return false;
    };
    dom.len() >= 4
        && hex(dom, 0)
        && hex(bus, 2)
        && hex(dev, 2)
        && matches!(func.as_bytes(), [b'0'..=b'7'])
}

/// The path of a device from the components of its resolved sysfs directory: after the
/// last `pci*` host bridge component, every PCI address.
pub fn parse_path(resolved: &Path) -> Option<PciPath> {
    let comps: Vec<String> = resolved
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let at = comps
        .iter()
        .rposition(|c| c.starts_with("pci") && !is_bdf(c))?;
    let chain: Vec<String> = comps[at + 1..]
        .iter()
        .filter(|c| is_bdf(c))
        .cloned()
        .collect();
    if chain.is_empty() {
        return None;
    }
    Some(PciPath {
        host: comps[at].clone(),
        chain,
    })
}

/// The path of `bdf` under `sys` (normally `/sys`).
pub fn pci_path(sys: &Path, bdf: &str) -> Option<PciPath> {
    let p = fs::canonicalize(sys.join("bus/pci/devices").join(bdf)).ok()?;
    parse_path(&p).filter(|p| p.chain.last().map(String::as_str) == Some(bdf))
}

/// The NUMA node of `bdf`, `None` when the platform does not say (-1).
pub fn numa_node(sys: &Path, bdf: &str) -> Option<i32> {
    let s = fs::read_to_string(sys.join("bus/pci/devices").join(bdf).join("numa_node")).ok()?;
    s.trim().parse().ok().filter(|n: &i32| *n >= 0)
}

/// How two devices are connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relation {
    /// Below one PCIe switch: the lowest bridge they share, below the root port.
    SameSwitch(String),
    /// Below one root port, no switch in common.
    SameRootPort(String),
    /// Same root complex, different root ports (or the root bus, as in VMs).
    SameRootComplex(String),
    /// Different host bridges.
    CrossRootComplex(String, String),
}

/// The relation of two paths, and the bridges between them that route their P2P
/// traffic (the lowest common bridge and everything below it on both sides; all
/// bridges of both when they only share the root complex).
pub fn classify(a: &PciPath, b: &PciPath) -> (Relation, Vec<String>) {
    let (ab, bb) = (a.bridges(), b.bridges());
    let k = ab.iter().zip(bb).take_while(|(x, y)| x == y).count();
    let mut between: Vec<String> = Vec::new();
    if k > 0 {
        between.push(ab[k - 1].clone());
    }
    for x in ab[k..].iter().chain(&bb[k..]) {
        if !between.contains(x) {
            between.push(x.clone());
        }
    }
    let rel = if a.host != b.host {
        Relation::CrossRootComplex(a.host.clone(), b.host.clone())
    } else if k >= 2 {
        Relation::SameSwitch(ab[k - 1].clone())
    } else if k == 1 {
        Relation::SameRootPort(ab[0].clone())
    } else {
        Relation::SameRootComplex(a.host.clone())
    };
    (rel, between)
}

/// Where the ACS extended capability is in a config space image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acs {
    /// The config space read is no longer than the standard 256 bytes.
    Short,
    /// No ACS capability in the extended list.
    Absent,
    /// ACS found; its Control register.
    Control(u16),
}

fn le32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Finds ACS in the extended capability list of a config space image (from offset
/// 0x100: a 32-bit header, id in bits 0-15, next offset in bits 20-31) and reads its
/// Control register (header + 6). A broken or looping list reads as `Absent`.
pub fn acs_control(config: &[u8]) -> Acs {
    if config.len() <= 0x100 {
        return Acs::Short;
    }
    let mut off = 0x100usize;
    let mut seen = BTreeSet::new();
    while seen.insert(off) {
        let Some(h) = le32(config, off) else {
            return Acs::Absent;
        };
        if h == 0 || h == u32::MAX {
            return Acs::Absent;
        }
        if (h & 0xffff) as u16 == ECAP_ACS {
            return match config.get(off + 6..off + 8) {
                Some(c) => Acs::Control(u16::from_le_bytes([c[0], c[1]])),
                None => Acs::Absent,
            };
        }
        let next = ((h >> 20) & 0xffc) as usize;
        if next < 0x100 {
            return Acs::Absent;
        }
        off = next;
    }
    Acs::Absent
}

/// NVIDIA GPUs in sysfs: vendor 0x10de, class 0x03xxxx (display or 3D controller).
pub fn nvidia_gpus(sys: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(sys.join("bus/pci/devices")) else {
        return out;
    };
    for e in rd.flatten() {
        let d = e.path();
        let read = |f: &str| fs::read_to_string(d.join(f)).unwrap_or_default();
        if read("vendor").trim() == "0x10de" && read("class").trim().starts_with("0x03") {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

/// The topology lines for every GPU and controller pair, and the ACS lines of the
/// bridges between them (each bridge once). `root`: config space beyond 64 bytes is
/// readable (else reading ACS needs root).
pub fn check(sys: &Path, gpus: &[String], nvme: &[String], root: bool) -> Vec<Check> {
    let id = ids::TOPOLOGY;
    if gpus.is_empty() || nvme.is_empty() {
        let what = match (gpus.is_empty(), nvme.is_empty()) {
            (true, true) => "no GPU and no NVMe controller",
            (true, false) => "no NVIDIA GPU in sysfs",
            _ => "no NVMe controller",
        };
        return vec![Check::skip(
            id,
            format!("{what}: no GPU-to-SSD path to check"),
        )];
    }
    let mut out = Vec::new();
    let mut bridges: Vec<String> = Vec::new();
    for g in gpus {
        for n in nvme {
            let pair = format!("GPU {g} <-> NVMe {n}");
            let (Some(pg), Some(pn)) = (pci_path(sys, g), pci_path(sys, n)) else {
                out.push(Check::skip(
                    id,
                    format!("{pair}: cannot resolve their PCI paths in sysfs"),
                ));
                continue;
            };
            let (rel, between) = classify(&pg, &pn);
            for b in between {
                if !bridges.contains(&b) {
                    bridges.push(b);
                }
            }
            out.push(match rel {
                Relation::SameSwitch(b) => Check::ok(id, format!("{pair}: same PCIe switch (below {b}): best for P2P")),
                Relation::SameRootPort(p) => Check::ok(id, format!("{pair}: same root port {p}")),
                Relation::SameRootComplex(h) => Check::warn(
                    id,
                    format!("{pair}: P2P through the root complex ({h}): works on most modern CPUs, but slower than through a switch"),
                )
                .fix("for the best bandwidth use an SSD and a GPU under one PCIe switch"),
                Relation::CrossRootComplex(a, b) => {
                    let nodes = match (numa_node(sys, g), numa_node(sys, n)) {
                        (Some(x), Some(y)) if x != y => format!(", NUMA nodes {x} and {y}: across sockets"),
                        (Some(x), Some(_)) => format!(", both on NUMA node {x}"),
                        _ => String::new(),
                    };
                    Check::warn(
                        id,
                        format!("{pair}: different root complexes ({a}, {b}){nodes}: P2P may fail or be slow"),
                    )
                    .fix("use an SSD and a GPU under the same root complex (the same socket)")
                }
            });
        }
    }
    let mut unreadable = Vec::new();
    for b in &bridges {
        let cfg = fs::read(sys.join("bus/pci/devices").join(b).join("config")).unwrap_or_default();
        match acs_control(&cfg) {
            Acs::Short if !root => unreadable.push(b.clone()),
            Acs::Short | Acs::Absent => {}
            Acs::Control(ctrl) if ctrl & (ACS_RR | ACS_CR) != 0 => out.push(
                Check::warn(
                    id,
                    format!("ACS on bridge {b} redirects P2P to the root complex (ACS control {ctrl:#06x})"),
                )
                .fix(format!("disable it: setpci -s {b} ECAP_ACS+6.w=0 (until reboot), or turn ACS off in the BIOS")),
            ),
            Acs::Control(ctrl) => out.push(Check::ok(
                id,
                format!("ACS on bridge {b} does not redirect P2P (ACS control {ctrl:#06x})"),
            )),
        }
    }
    if !unreadable.is_empty() {
        out.push(
            Check::skip(
                id,
                format!(
                    "ACS of bridge(s) {} not checked: config space beyond 64 bytes is root-only",
                    unreadable.join(", ")
                ),
            )
            .fix("run as root to check ACS")
            .needs_root(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{put, Status};
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    fn path(host: &str, chain: &[&str]) -> PciPath {
        PciPath {
            host: host.into(),
            chain: chain.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn bdf_shapes() {
        assert!(is_bdf("0000:00:01.0"));
        assert!(is_bdf("10000:e1:1f.7"));
        assert!(!is_bdf("pci0000:00"));
        assert!(!is_bdf("0000:00:01.8"));
        assert!(!is_bdf("0000:00:01"));
        assert!(!is_bdf("0000:0:01.0"));
        assert!(!is_bdf("nvme0"));
    }

    #[test]
    fn paths_from_realpaths() {
        let p = parse_path(Path::new(
            "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0",
        ))
        .unwrap();
        assert_eq!(
            p,
            path(
                "pci0000:00",
                &["0000:00:01.0", "0000:01:00.0", "0000:02:00.0"]
            )
        );
        assert_eq!(p.bridges(), ["0000:00:01.0", "0000:01:00.0"]);
        // Hyper-V style: the host bridge deep under other buses.
        let p = parse_path(Path::new(
            "/sys/devices/LNXSYSTM:00/VMBUS:00/abc/pci7870:00/7870:00:00.0",
        ))
        .unwrap();
        assert_eq!(p, path("pci7870:00", &["7870:00:00.0"]));
        assert_eq!(parse_path(Path::new("/sys/devices/platform/foo")), None);
        assert_eq!(parse_path(Path::new("/sys/devices/pci0000:00")), None);
    }

    #[test]
    fn relations() {
        let rp = "0000:00:01.0";
        let usp = "0000:01:00.0";
        let gpu = path("pci0000:00", &[rp, usp, "0000:02:00.0", "0000:03:00.0"]);
        let ssd = path("pci0000:00", &[rp, usp, "0000:02:01.0", "0000:04:00.0"]);
        let (r, between) = classify(&gpu, &ssd);
        assert_eq!(r, Relation::SameSwitch(usp.into()));
        assert_eq!(between, [usp, "0000:02:00.0", "0000:02:01.0"]);
        // Two root ports of one root complex.
        let ssd2 = path("pci0000:00", &["0000:00:1d.0", "0000:05:00.0"]);
        let (r, between) = classify(&gpu, &ssd2);
        assert_eq!(r, Relation::SameRootComplex("pci0000:00".into()));
        assert_eq!(between, [rp, usp, "0000:02:00.0", "0000:00:1d.0"]);
        // Both on the root bus (a VM): nothing between them.
        let (r, between) = classify(
            &path("pci0000:00", &["0000:00:04.0"]),
            &path("pci0000:00", &["0000:00:05.0"]),
        );
        assert_eq!(r, Relation::SameRootComplex("pci0000:00".into()));
        assert!(between.is_empty());
        // Same root port, no switch.
        let (r, _) = classify(
            &path("pci0000:00", &[rp, "0000:01:00.0"]),
            &path("pci0000:00", &[rp, "0000:01:00.1"]),
        );
        assert_eq!(r, Relation::SameRootPort(rp.into()));
        // Different host bridges.
        let far = path("pci0000:80", &["0000:80:01.0", "0000:81:00.0"]);
        let (r, between) = classify(&gpu, &far);
        assert_eq!(
            r,
            Relation::CrossRootComplex("pci0000:00".into(), "pci0000:80".into())
        );
        assert_eq!(between.len(), 4);
    }

    /// A config space image with an extended capability list: AER at 0x100, then ACS.
    fn config_with_acs(ctrl: u16) -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        let hdr = |id: u32, ver: u32, next: u32| (id | ver << 16 | next << 20).to_le_bytes();
        c[0x100..0x104].copy_from_slice(&hdr(0x0001, 2, 0x148));
        c[0x148..0x14c].copy_from_slice(&hdr(ECAP_ACS as u32, 1, 0));
        c[0x14c..0x14e].copy_from_slice(&0x005fu16.to_le_bytes()); // ACS capability
        c[0x14e..0x150].copy_from_slice(&ctrl.to_le_bytes());
        c
    }

    #[test]
    fn acs_from_config_space() {
        assert_eq!(acs_control(&[0u8; 64]), Acs::Short);
        assert_eq!(acs_control(&[0u8; 256]), Acs::Short);
        assert_eq!(acs_control(&[0u8; 4096]), Acs::Absent);
        assert_eq!(acs_control(&config_with_acs(0x001d)), Acs::Control(0x001d));
        assert_eq!(acs_control(&config_with_acs(0)), Acs::Control(0));
        // A list that loops back on itself, one that points below 0x100, a truncated
        // image, and all-ones (a device that fell off the bus).
        let mut c = config_with_acs(0);
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | 0x100 << 20).to_le_bytes());
        assert_eq!(acs_control(&c), Acs::Absent);
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | 0x40 << 20).to_le_bytes());
        assert_eq!(acs_control(&c), Acs::Absent);
        let c = config_with_acs(0x1c);
        assert_eq!(acs_control(&c[..0x14d]), Acs::Absent);
        assert_eq!(acs_control(&[0xffu8; 4096]), Acs::Absent);
    }

    /// A fake sysfs: a GPU and an SSD under one switch, another SSD on a second root
    /// port, one on another root complex (NUMA node 1).
    fn fake(acs_ctrl: Option<u16>) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let s = t.path();
        let devices = s.join("devices");
        let add = |chain: &[&str], vendor: &str, class: &str, numa: i32| -> PathBuf {
            let mut d = devices.clone();
            for c in chain {
                d = d.join(c);
            }
            put(&d.join("vendor"), &format!("{vendor}\n"));
            put(&d.join("class"), &format!("{class}\n"));
            put(&d.join("numa_node"), &format!("{numa}\n"));
            let bdf = chain.last().unwrap();
            fs::create_dir_all(s.join("bus/pci/devices")).unwrap();
            symlink(&d, s.join("bus/pci/devices").join(bdf)).unwrap();
            d
        };
        let h0 = "pci0000:00";
        let rp = add(&[h0, "0000:00:01.0"], "0x8086", "0x060400", 0);
        fs::write(rp.join("config"), [0u8; 64]).unwrap();
        add(
            &[h0, "0000:00:01.0", "0000:01:00.0"],
            "0x10b5",
            "0x060400",
            0,
        );
        let dsp = add(
            &[h0, "0000:00:01.0", "0000:01:00.0", "0000:02:00.0"],
            "0x10b5",
            "0x060400",
            0,
        );
        if let Some(ctrl) = acs_ctrl {
            fs::write(dsp.join("config"), config_with_acs(ctrl)).unwrap();
        }
        add(
            &[h0, "0000:00:01.0", "0000:01:00.0", "0000:02:01.0"],
            "0x10b5",
            "0x060400",
            0,
        );
        add(
            &[
                h0,
                "0000:00:01.0",
                "0000:01:00.0",
                "0000:02:00.0",
                "0000:03:00.0",
            ],
            "0x10de",
            "0x030200",
            0,
        );
        add(
            &[
                h0,
                "0000:00:01.0",
                "0000:01:00.0",
                "0000:02:01.0",
                "0000:04:00.0",
            ],
            "0x144d",
            "0x010802",
            0,
        );
        add(&[h0, "0000:00:1d.0"], "0x8086", "0x060400", 0);
        add(
            &[h0, "0000:00:1d.0", "0000:05:00.0"],
            "0x144d",
            "0x010802",
            0,
        );
        add(&["pci0000:80", "0000:80:01.0"], "0x8086", "0x060400", 1);
        add(
            &["pci0000:80", "0000:80:01.0", "0000:81:00.0"],
            "0x144d",
            "0x010802",
            1,
        );
        t
    }

    #[test]
    fn topology_lines_from_a_fake_tree() {
        let t = fake(Some(ACS_RR | ACS_CR | 1));
        let s = t.path();
        assert_eq!(nvidia_gpus(s), ["0000:03:00.0"]);
        let gpu = vec!["0000:03:00.0".to_string()];
        let nvme: Vec<String> = ["0000:04:00.0", "0000:05:00.0", "0000:81:00.0"]
            .map(String::from)
            .to_vec();
        let c = check(s, &gpu, &nvme, false);
        let find = |needle: &str| {
            c.iter()
                .find(|c| c.message.contains(needle))
                .unwrap_or_else(|| panic!("no line with {needle}: {c:#?}"))
        };
        let l = find("NVMe 0000:04:00.0");
        assert_eq!(l.status, Status::Ok);
        assert!(
            l.message.contains("same PCIe switch (below 0000:01:00.0)"),
            "{l:?}"
        );
        let l = find("NVMe 0000:05:00.0");
        assert_eq!(l.status, Status::Warn);
        assert!(l.message.contains("root complex (pci0000:00)"), "{l:?}");
        let l = find("NVMe 0000:81:00.0");
        assert_eq!(l.status, Status::Warn);
        assert!(
            l.message.contains("NUMA nodes 0 and 1: across sockets"),
            "{l:?}"
        );
        let l = find("ACS on bridge 0000:02:00.0");
        assert_eq!(l.status, Status::Warn);
        assert!(l
            .fix
            .as_deref()
            .unwrap()
            .contains("setpci -s 0000:02:00.0 ECAP_ACS+6.w=0"));
        // The root port's config space is 64 bytes: not root.
        let l = find("not checked");
        assert!(l.needs_root && l.message.contains("0000:00:01.0"), "{l:?}");
        // As root a short config space just has no extended capabilities.
        let c = check(s, &gpu, &nvme, true);
        assert!(!c.iter().any(|c| c.needs_root), "{c:#?}");
        // ACS present but not redirecting.
        let t = fake(Some(0x0001));
        let c = check(t.path(), &gpu, &nvme[..1], true);
        assert!(
            c.iter()
                .any(|c| c.status == Status::Ok && c.message.contains("does not redirect")),
            "{c:#?}"
        );
        // Nothing to pair.
        let c = check(s, &[], &nvme, true);
        assert_eq!((c.len(), c[0].status), (1, Status::Skip));
        let c = check(s, &gpu, &["0000:09:00.0".to_string()], true);
        assert!(c[0].message.contains("cannot resolve"), "{c:?}");
    }
}
