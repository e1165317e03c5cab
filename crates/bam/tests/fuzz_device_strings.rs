//! Property tests of the device-string grammar (`sim:`, `hostctl:`, `kmod:`), the size
//! parser and `parse_gpus`: arbitrary and near-valid strings end in Ok or a typed error,
//! never a panic. CPU-only: parsing touches no GPU and no device.

#[path = "../../nvme/tests/support/cases.rs"]
mod cases;

use bam::storage::{parse_gpus, parse_size, GpuDevice};
use proptest::prelude::*;

/// Strings built from the grammar's own pieces, so that most get past the first check.
fn near_valid() -> impl Strategy<Value = String> {
    let kind = prop_oneof![
        Just("sim:"),
        Just("hostctl:"),
        Just("kmod:"),
        Just("model:"),
        Just(""),
        Just("sim"),
    ];
    let key = prop_oneof![
        Just("ssds"),
        Just("capacity"),
        Just("media"),
        Just("lba"),
        Just("workers"),
        Just("sms"),
        Just("fill"),
        Just("ideal"),
        Just("optane-p5800x"),
        Just("/dev/bam-nvme0"),
        Just("0000:01:00.0"),
        Just("ffff:ff:1f.7"),
    ];
    let value = prop_oneof![
        Just(String::new()),
        Just("0".to_string()),
        Just("2G".to_string()),
        Just("18446744073709551615".to_string()),
        Just("99999999999999999999T".to_string()),
        Just("1Q".to_string()),
        Just("host".to_string()),
        Just("file:/tmp/x".to_string()),
        Just("pattern".to_string()),
        Just("zero".to_string()),
        Just("-1".to_string()),
        "[0-9]{1,22}[kKmMgGtTpPeE]?[iI]?[bB]?",
        "\\PC{0,8}",
    ];
    let part = (key, prop::option::of(value)).prop_map(|(k, v)| match v {
        Some(v) => format!("{k}={v}"),
        None => k.to_string(),
    });
    (kind, prop::collection::vec(part, 0..6))
        .prop_map(|(k, parts)| format!("{k}{}", parts.join(",")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases::cases(512)))]

    #[test]
    fn device_strings_never_panic(s in prop_oneof![near_valid(), "\\PC{0,40}", ".{0,40}"]) {
        if let Ok(d) = s.parse::<GpuDevice>() {
            // A device prints as it parses: the printed string names the same device.
            let printed = d.to_string();
            prop_assert_eq!(printed.parse::<GpuDevice>().ok(), Some(d), "{} -> {}", s, printed);
        }
    }

    #[test]
    fn sizes_never_panic(s in prop_oneof!["[0-9]{0,24}[kKmMgGtTpPeEQ]?[iI]?[bB]?", "\\PC{0,24}"]) {
        let _ = parse_size(&s);
    }

    #[test]
    fn gpu_lists_never_panic(s in prop_oneof!["[0-9, ]{0,24}", "\\PC{0,24}", "[0-9]{18,24}(,[0-9]{1,3}){0,3}"]) {
        if let Ok(gpus) = parse_gpus(&s) {
            // Distinct, as documented.
            let mut sorted = gpus.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), gpus.len());
        }
    }
}
