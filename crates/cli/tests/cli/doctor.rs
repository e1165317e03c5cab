//! `bam doctor`: its help and its report on a machine without a GPU.

use super::*;

/// Every check `bam doctor` makes, as its lines name them.
const DOCTOR_CHECKS: [&str; 8] = [
    "gpu",
    "nvidia-driver",
    "nvidia-p2p",
    "bam-module",
    "controllers",
    "iommu",
    "topology",
    "memlock",
];

#[test]
fn doctor_help_teaches_each_check_and_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    assert!(stdout(&ok(bam(dir.path(), &["--help"]))).contains("bam doctor"));
    let h = stdout(&ok(bam(dir.path(), &["doctor", "--help"])));
    for s in DOCTOR_CHECKS.iter().copied().chain([
        "OK, WARN, FAIL",
        "Exit codes: 0 when no check FAILs, 1 when any does, 2",
        "Resizable BAR",
        "modprobe nvidia",
        "insmod kernel-module/bam_nvme.ko",
        "bam bind BDF",
        "iommu=pt",
        "setpci -s BDF ECAP_ACS+6.w=0",
        "ulimit -l unlimited",
        "needs root",
        "--json",
    ]) {
        assert!(h.contains(s), "doctor --help lacks {s}: {h}");
    }
    assert_eq!(
        bam(dir.path(), &["doctor", "--bogus"]).status.code(),
        Some(2)
    );
}

/// On this machine (no GPU, no bam module): a line for every check, FAIL for the GPU,
/// exit code 1; with --json one valid JSON document with the same content.
#[test]
fn doctor_reports_every_check_and_fails_without_a_gpu() {
    #[cfg(feature = "gpu")]
    if bam::gpu_available() {
        eprintln!("skipped: this machine has a GPU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = bam(dir.path(), &["doctor"]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}\n{}", stderr(&o));
    let line = fails(&o, 1);
    assert!(line.contains("check(s) failed"), "{line}");
    for id in DOCTOR_CHECKS {
        let found = text.lines().any(|l| {
            let mut w = l.split_whitespace();
            matches!(w.next(), Some("OK" | "INFO" | "SKIP" | "WARN" | "FAIL"))
                && w.next() == Some(id)
        });
        assert!(found, "no line for {id}:\n{text}");
    }
    if cfg!(feature = "gpu") {
        assert!(
            text.contains("FAIL  gpu            no NVIDIA GPU/driver"),
            "{text}"
        );
    } else {
        assert!(
            text.contains("SKIP  gpu            built without GPU support"),
            "{text}"
        );
    }
    assert!(text.contains("fix: "), "{text}");
    assert!(text.contains("simulated SSD array (sim:):"), "{text}");
    assert!(
        text.contains("real SSDs from GPU threads (kmod:):"),
        "{text}"
    );
    assert!(
        text.contains("CPU-side commands (model:, vfio:, kmod:):  yes"),
        "{text}"
    );
    assert!(!text.contains("panicked"), "{text}");

    for args in [&["--json", "doctor"][..], &["doctor", "--json"][..]] {
        let o = bam(dir.path(), args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let v = json(&o);
        let checks = v["checks"].as_array().expect("checks array");
        for id in DOCTOR_CHECKS {
            assert!(checks.iter().any(|c| c["check"] == id), "no {id} in {v}");
        }
        for c in checks {
            let s = c["status"].as_str().unwrap();
            assert!(["OK", "INFO", "SKIP", "WARN", "FAIL"].contains(&s), "{c}");
            assert!(c["message"].is_string(), "{c}");
        }
        let gpu = checks.iter().find(|c| c["check"] == "gpu").unwrap();
        assert_eq!(
            gpu["status"],
            if cfg!(feature = "gpu") {
                "FAIL"
            } else {
                "SKIP"
            }
        );
        assert!(v["failures"].as_u64().unwrap() >= 1, "{v}");
        assert_eq!(v["summary"]["cpu_side_commands"]["available"], true);
        assert_eq!(v["summary"]["simulated_ssd_array"]["available"], false);
        assert_eq!(v["summary"]["real_ssds_from_gpu"]["available"], false);
        assert!(
            v.get("error").is_none(),
            "the report is the only JSON document: {v}"
        );
    }
}
