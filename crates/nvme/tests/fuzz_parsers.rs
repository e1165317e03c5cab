//! Property-based fuzzing of everything that parses untrusted bytes or strings: Identify
//! and log-page parsers, the PRP walker, the device-string, BDF and size parsers.
//!
//! Case counts are CI-sized by default. `PROPTEST_CASES=N` sets every property's count;
//! `BAM_FUZZ_SCALE=K` multiplies the defaults (a long run: `BAM_FUZZ_SCALE=10`).

use bam_nvme::device::{parse_bdf, parse_size, DeviceSpec};
use bam_nvme::prp;
use bam_nvme::spec::identify::{parse_namespace_list, IdentifyController, IdentifyNamespace};
use bam_nvme::spec::log::{ErrorLogEntry, SmartLog};
use bam_nvme::spec::{Cqe, Sqe};
use proptest::prelude::*;
use std::collections::HashMap;

#[path = "support/cases.rs"]
mod support_cases;
use support_cases::cases;

fn page() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 4096),
        // Mostly zero pages with a few hostile bytes: closer to real structures.
        proptest::collection::vec((0usize..4096, any::<u8>()), 0..64).prop_map(|pokes| {
            let mut b = vec![0u8; 4096];
            for (i, v) in pokes {
                b[i] = v;
            }
            b
        }),
    ]
}

const PS: usize = 4096;

/// Whether two specs name the same device. `Display` is the short form for people: it
/// leaves out the model's `size=` and `lba=` options, so only the device is compared.
fn same_device(a: &DeviceSpec, b: &DeviceSpec) -> bool {
    match (a, b) {
        (DeviceSpec::ModelFile { path: p, .. }, DeviceSpec::ModelFile { path: q, .. }) => p == q,
        (DeviceSpec::ModelRam { size: p, .. }, DeviceSpec::ModelRam { size: q, .. }) => p == q,
        (DeviceSpec::Vfio { bdf: p }, DeviceSpec::Vfio { bdf: q }) => p == q,
        (DeviceSpec::Kmod { path: p }, DeviceSpec::Kmod { path: q }) => p == q,
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(512)))]

    #[test]
    fn identify_parsers_take_any_bytes(b in page(), mps in 0u32..16) {
        let b: [u8; 4096] = b.try_into().unwrap();
        let c = IdentifyController::from_bytes(&b);
        let _ = c.max_transfer_bytes(4096usize << mps.min(4));
        // Strings are parsed lossily; after one round trip the structure is stable.
        let c2 = IdentifyController::from_bytes(&c.to_bytes());
        prop_assert_eq!(IdentifyController::from_bytes(&c2.to_bytes()), c2);
        let n = IdentifyNamespace::from_bytes(&b);
        prop_assert!(n.lba_formats.len() <= 64);
        let _ = n.current_format().map(|f| f.block_size());
        for f in &n.lba_formats {
            let _ = f.block_size();
        }
        let n2 = IdentifyNamespace::from_bytes(&n.to_bytes());
        prop_assert_eq!(IdentifyNamespace::from_bytes(&n2.to_bytes()), n2);
        let ids = parse_namespace_list(&b);
        prop_assert!(ids.len() <= 1024 && ids.iter().all(|&i| i != 0));
    }

    #[test]
    fn log_and_queue_entry_parsers_take_any_bytes(b in proptest::collection::vec(any::<u8>(), 512)) {
        let e = ErrorLogEntry::from_bytes(b[..64].try_into().unwrap());
        let _ = format!("{e:?}");
        let s = SmartLog::from_bytes(b[..512].try_into().unwrap());
        let _ = format!("{s:?}");
        let c = Cqe::from_bytes(b[..16].try_into().unwrap());
        let _ = (c.status(), c.phase(), c.status().to_string());
        prop_assert_eq!(Cqe::from_bytes(&c.to_bytes()), c);
        let q = Sqe::from_bytes(b[..64].try_into().unwrap());
        let _ = (q.opcode(), q.cid(), q.slba(), q.block_count());
        prop_assert_eq!(Sqe::from_bytes(&q.to_bytes()), q);
    }

    /// The walker (the controller side) against arbitrary, hostile PRPs and list
    /// contents: it ends in Ok with exactly `len` bytes in page-bounded segments, or in
    /// an error status; never a panic or an endless walk.
    #[test]
    fn prp_walker_takes_any_prps(
        prp1 in prop_oneof![any::<u64>(), (0u64..1 << 20).prop_map(|a| a * 4)],
        prp2 in prop_oneof![any::<u64>(), (0u64..256).prop_map(|p| p * 4096), (0u64..1 << 20).prop_map(|a| a * 8)],
        len in prop_oneof![1usize..3 * PS, 1usize..(8 << 20)],
        lists in proptest::collection::vec(any::<u64>(), 0..64),
        aligned_lists in any::<bool>(),
    ) {
        let mut total = 0usize;
        let mut reads = 0usize;
        let r = prp::walk(
            prp1,
            prp2,
            len,
            PS,
            |addr, out| {
                reads += 1;
                if reads > 8 << 20 {
                    return false;
                }
                for (i, e) in out.iter_mut().enumerate() {
                    let v = lists.get((addr as usize / 8 + i) % lists.len().max(1)).copied().unwrap_or(0);
                    *e = if aligned_lists { v & !0xFFF } else { v };
                }
                !lists.is_empty() || addr.is_multiple_of(3)
            },
            |addr, l| {
                assert!(l > 0 && l <= PS, "segment of {l} bytes");
                assert!((addr % PS as u64) as usize + l <= PS, "segment crosses a page");
                total += l;
                Ok(())
            },
        );
        if r.is_ok() {
            prop_assert_eq!(total, len);
        }
    }

    /// Build and walk agree for every shape the driver produces.
    #[test]
    fn prp_build_and_walk_agree(offset_dw in 0usize..1024, len in 1usize..(4 << 20), scatter in 1u64..4000) {
        let pages = prp::pages_spanned(offset_dw * 4, len, PS);
        let addr = |i: usize| 0x4000_0000 + (i as u64 * scatter % 4001) * PS as u64 + (i as u64) * (1 << 24);
        let p = prp::build(addr, offset_dw * 4, len, PS);
        let mut mem: HashMap<u64, u64> = HashMap::new();
        let prp2 = match p.prp2 {
            prp::Prp2::Unused => 0,
            prp::Prp2::Page(a) => a,
            prp::Prp2::List(entries) => {
                let n = prp::list_pages_needed(entries.len(), PS);
                let lp: Vec<u64> = (0..n).map(|i| 0x9_0000_0000 + i as u64 * PS as u64).collect();
                prp::write_list(&entries, &lp, PS, |pg, s, v| {
                    mem.insert(lp[pg] + s as u64 * 8, v);
                })
            }
        };
        let mut got = Vec::new();
        prp::walk(p.prp1, prp2, len, PS, |a, out| {
            for (i, e) in out.iter_mut().enumerate() {
                match mem.get(&(a + i as u64 * 8)) { Some(v) => *e = *v, None => return false }
            }
            true
        }, |a, l| { got.push((a, l)); Ok(()) }).unwrap();
        prop_assert_eq!(got.len(), pages);
        prop_assert_eq!(got.iter().map(|g| g.1).sum::<usize>(), len);
        prop_assert_eq!(got[0].0, addr(0) + offset_dw as u64 * 4);
    }

    #[test]
    fn device_strings_take_any_input(s in ".{0,64}") {
        if let Ok(spec) = s.parse::<DeviceSpec>() {
            // What parses prints back to something that parses to the same device.
            let again: DeviceSpec = spec.to_string().parse().unwrap();
            prop_assert!(same_device(&again, &spec), "{:?} displays as {}", spec, spec);
        }
        let _ = parse_bdf(&s);
        let _ = parse_size(&s);
    }

    #[test]
    fn device_strings_of_the_right_shape(
        kind in prop_oneof![Just("model:"), Just("model:ram:"), Just("vfio:"), Just("kmod:"), Just("sim:"), Just("")],
        body in "[a-zA-Z0-9:./_=,-]{0,40}",
        size in prop_oneof![any::<u64>().prop_map(|v| v.to_string()), "[0-9]{1,25}[kKmMgGtTbBi]{0,3}"],
    ) {
        for s in [format!("{kind}{body}"), format!("{kind}{body},size={size}"), format!("{kind}{size},lba={size}"), format!("{kind}{size}")] {
            if let Ok(spec) = s.parse::<DeviceSpec>() {
                let again: DeviceSpec = spec.to_string().parse().unwrap();
                prop_assert!(same_device(&again, &spec), "{:?} displays as {}", spec, spec);
            }
        }
    }

    #[test]
    fn sizes_parse_exactly(n in any::<u64>(), unit in 0usize..5, spell in 0usize..3) {
        let (shift, names) = [(0, ["", "b", "B"]), (10, ["K", "k", "KiB"]), (20, ["M", "m", "MiB"]), (30, ["G", "g", "GiB"]), (40, ["T", "t", "TiB"])][unit];
        let s = format!("{n}{}", names[spell]);
        match n.checked_mul(1u64 << shift) {
            Some(v) if v != 0 || n == 0 => {
                if let Ok(got) = parse_size(&s) { prop_assert_eq!(got, v) }
            }
            _ => prop_assert!(parse_size(&s).is_err(), "{} overflowed silently", s),
        }
    }

    #[test]
    fn bdfs_normalize(d in 0u32..0x10000, b in 0u32..0x100, dev in 0u32..0x20, f in 0u32..8, upper in any::<bool>()) {
        let s = format!("{d:04x}:{b:02x}:{dev:02x}.{f}");
        let s = if upper { s.to_uppercase() } else { s };
        prop_assert_eq!(parse_bdf(&s).unwrap(), format!("{d:04x}:{b:02x}:{dev:02x}.{f}"));
    }
}
