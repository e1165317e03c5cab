//! The NVIDIA driver checks: the kernel driver's version, and whether the nvidia module
//! exports the nvidia_p2p functions the bam module needs to map GPU memory.

use super::{ids, Check};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// The nvidia_p2p functions the bam module resolves to map GPU memory (the
/// non-persistent set; see `kernel-module/bam_nvme_p2p.c`).
pub const P2P_SYMBOLS: [&str; 6] = [
    "nvidia_p2p_get_pages",
    "nvidia_p2p_put_pages",
    "nvidia_p2p_free_page_table",
    "nvidia_p2p_dma_map_pages",
    "nvidia_p2p_dma_unmap_pages",
    "nvidia_p2p_free_dma_mapping",
];
// --- nvidia-driver --------------------------------------------------------------------

/// The driver version from the text of `/proc/driver/nvidia/version`, e.g. "580.65.06"
/// (the first word of the first line made of digits and dots, with a dot).
pub fn parse_driver_version(text: &str) -> Option<String> {
    text.lines().next()?.split_whitespace().find_map(|w| {
        let ok = w.contains('.')
            && w.chars().all(|c| c.is_ascii_digit() || c == '.')
            && w.starts_with(|c: char| c.is_ascii_digit());
        ok.then(|| w.to_string())
    })
}

/// The NVIDIA kernel driver's version, from `<proc>/driver/nvidia/version`.
pub fn nvidia_driver(proc: &Path) -> Check {
    let id = ids::DRIVER;
    match fs::read_to_string(proc.join("driver/nvidia/version")) {
        Ok(text) => {
            let flavor = if text.contains("Open Kernel Module") {
                " (open kernel module)"
            } else {
                ""
            };
            match parse_driver_version(&text) {
                Some(v) => Check::info(id, format!("NVIDIA driver {v}{flavor}")),
                None => Check::info(
                    id,
                    format!(
                        "NVIDIA driver loaded, version not understood: {}",
                        text.lines().next().unwrap_or("").trim()
                    ),
                ),
            }
        }
        Err(_) => Check::info(
            id,
            "no NVIDIA kernel driver (/proc/driver/nvidia/version is missing)",
        ),
    }
}

// --- nvidia-p2p -----------------------------------------------------------------------

/// For each of `wanted`, the module that exports it according to a `/proc/kallsyms`
/// text (`""` for the kernel itself); names absent from the text are absent from the
/// map. Addresses read as zero without root, but the names are there.
pub fn kallsyms_exporters(text: &str, wanted: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let (Some(_addr), Some(_kind), Some(name)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        if !wanted.contains(&name) {
            continue;
        }
        let module = w
            .next()
            .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string())
            .unwrap_or_default();
        out.entry(name.to_string()).or_insert(module);
    }
    out
}

/// Whether the bam module will be able to map GPU memory through nvidia_p2p.
pub fn nvidia_p2p(sys: &Path, proc: &Path) -> Vec<Check> {
    let id = ids::P2P;
    let nvidia_loaded = sys.join("module/nvidia").is_dir();
    let load_nvidia = "load the NVIDIA driver (modprobe nvidia, or run nvidia-smi once)";
    let text = match fs::read_to_string(proc.join("kallsyms")) {
        Ok(t) => t,
        Err(e) => {
            let c = if nvidia_loaded {
                Check::warn(
                    id,
                    format!("the nvidia module is loaded; cannot read /proc/kallsyms to see its nvidia_p2p exports ({e})"),
                )
                .fix("run bam doctor where /proc/kallsyms is readable (not in a restricted container)")
            } else {
                Check::fail(
                    id,
                    "the nvidia module is not loaded: bam_nvme cannot map GPU memory",
                )
                .fix(load_nvidia)
            };
            return vec![c];
        }
    };
    let found = kallsyms_exporters(&text, &P2P_SYMBOLS);
    let missing: Vec<&str> = P2P_SYMBOLS
        .iter()
        .copied()
        .filter(|s| !found.contains_key(*s))
        .collect();
    let exporters: Vec<&str> = {
        let mut v: Vec<&str> = found.values().map(String::as_str).collect();
        v.sort();
        v.dedup();
        v
    };
    let from_stub = exporters.contains(&"bam_p2p_stub");
    if nvidia_loaded && missing.is_empty() && !from_stub {
        return vec![Check::ok(
            id,
            format!(
                "the nvidia module is loaded and exports nvidia_p2p_get_pages, nvidia_p2p_dma_map_pages and the rest (from [{}])",
                exporters.join(", ")
            ),
        )];
    }
    let c = if from_stub {
        Check::fail(
            id,
            "nvidia_p2p_* come from bam_p2p_stub, the test stand-in (host memory, not a GPU)",
        )
        .fix(format!("rmmod bam_p2p_stub, then {load_nvidia}"))
    } else if !nvidia_loaded {
        Check::fail(
            id,
            "the nvidia module is not loaded: bam_nvme cannot map GPU memory (MAP_GPU fails with EOPNOTSUPP)",
        )
        .fix(load_nvidia)
    } else {
        Check::fail(
            id,
            format!(
                "the nvidia module is loaded but does not export {}: bam_nvme cannot map GPU memory",
                missing.join(", ")
            ),
        )
        .fix("install an NVIDIA driver whose nvidia.ko exports nvidia_p2p_* (the standard and open kernel modules do)")
    };
    vec![c]
}

#[cfg(test)]
mod tests {
    use super::super::{put, Status};
    use super::*;

    #[test]
    fn driver_version_from_proc() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(
            parse_driver_version(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 07:09:39 UTC 2025\nGCC version:  gcc version 12.2.0"
            )
            .as_deref(),
            Some("580.65.06")
        );
        assert_eq!(
            parse_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023").as_deref(),
            Some("535.104.05")
        );
        assert_eq!(parse_driver_version(""), None);
        assert_eq!(parse_driver_version("garbage 1 2.x"), None);
        let c = nvidia_driver(t.path());
        assert_eq!(c.status, Status::Info);
        assert!(c.message.contains("missing"));
        put(
            &t.path().join("driver/nvidia/version"),
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n",
        );
        let c = nvidia_driver(t.path());
        assert_eq!(c.message, "NVIDIA driver 580.65.06 (open kernel module)");
    }

    const KALLSYMS: &str = "\
0000000000000000 T _text
0000000000000000 r __ksymtab_nvidia_p2p_get_pages\t[nvidia]
0000000000000000 T nvidia_p2p_get_pages\t[nvidia]
0000000000000000 T nvidia_p2p_put_pages\t[nvidia]
0000000000000000 T nvidia_p2p_free_page_table\t[nvidia]
0000000000000000 T nvidia_p2p_dma_map_pages\t[nvidia]
0000000000000000 T nvidia_p2p_dma_unmap_pages\t[nvidia]
0000000000000000 T nvidia_p2p_free_dma_mapping\t[nvidia]
bad line
";

    #[test]
    fn kallsyms_names_and_their_modules() {
        let m = kallsyms_exporters(KALLSYMS, &P2P_SYMBOLS);
        assert_eq!(m.len(), 6, "{m:?}");
        assert_eq!(m["nvidia_p2p_get_pages"], "nvidia");
        let m = kallsyms_exporters("ffff T nvidia_p2p_get_pages\n", &["nvidia_p2p_get_pages"]);
        assert_eq!(m["nvidia_p2p_get_pages"], "");
        assert!(kallsyms_exporters("", &P2P_SYMBOLS).is_empty());
    }

    #[test]
    fn p2p_verdicts() {
        let t = tempfile::tempdir().unwrap();
        let (sys, proc) = (t.path().join("sys"), t.path().join("proc"));
        // No kallsyms, no nvidia.
        let c = &nvidia_p2p(&sys, &proc)[0];
        assert_eq!(c.status, Status::Fail);
        // nvidia loaded and exporting everything.
        fs::create_dir_all(sys.join("module/nvidia")).unwrap();
        put(&proc.join("kallsyms"), KALLSYMS);
        let c = &nvidia_p2p(&sys, &proc)[0];
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(c.message.contains("[nvidia]"));
        // nvidia loaded, one export missing.
        put(
            &proc.join("kallsyms"),
            &KALLSYMS.replace("nvidia_p2p_dma_map_pages", "x"),
        );
        let c = &nvidia_p2p(&sys, &proc)[0];
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.message
                .contains("does not export nvidia_p2p_dma_map_pages"),
            "{c:?}"
        );
        // The test stub exports them; nvidia is gone.
        fs::remove_dir(sys.join("module/nvidia")).unwrap();
        put(
            &proc.join("kallsyms"),
            &KALLSYMS.replace("[nvidia]", "[bam_p2p_stub]"),
        );
        let c = &nvidia_p2p(&sys, &proc)[0];
        assert_eq!(c.status, Status::Fail);
        assert!(c.message.contains("bam_p2p_stub"), "{c:?}");
        // Nothing exports them.
        put(&proc.join("kallsyms"), "0 T _text\n");
        let c = &nvidia_p2p(&sys, &proc)[0];
        assert_eq!(c.status, Status::Fail);
        assert!(c.message.contains("not loaded"));
        assert!(c.fix.as_deref().unwrap().contains("modprobe nvidia"));
    }
}
