//! Compares the Rust twins of the benchmark kernels' structs (`bam_bench::abi`) with the
//! C++ compiler's view of `cuda/bench_abi.h` (sizes and every field offset), as
//! `tests/layout_dump.cpp` prints it. bench_abi.h includes bam's `bam/abi.h`, found where
//! the bam crate's build script says (`DEP_BAM_INCLUDE`, handed on by build.rs as
//! `BAM_DEVICE_INCLUDE`). Needs a host C++ compiler (CXX, or c++), no GPU.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

#[test]
fn rust_and_cuda_bench_layouts_match() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("layout_dump");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let st = Command::new(&cxx)
        .arg("-std=c++17")
        .arg("-I")
        .arg(env!("BAM_DEVICE_INCLUDE"))
        .arg("-I")
        .arg(crate_dir.join("cuda"))
        .arg(crate_dir.join("tests/layout_dump.cpp"))
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C++ compiler `{cxx}`: {e}"));
    assert!(st.success(), "layout_dump.cpp did not compile");
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut sizes = BTreeMap::new();
    let mut fields: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
    let mut consts = BTreeMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["struct", name, size] => {
                sizes.insert(name.to_string(), size.parse::<usize>().unwrap());
            }
            ["field", name, f, off] => {
                fields
                    .entry(name.to_string())
                    .or_default()
                    .push((f.to_string(), off.parse().unwrap()));
            }
            ["const", name, value] => {
                consts.insert(name.to_string(), value.parse::<u64>().unwrap());
            }
            _ => panic!("unexpected line {line}"),
        }
    }
    let layouts = bam_bench::abi::layouts();
    assert_eq!(
        layouts.len(),
        sizes.len(),
        "the C++ dump and the Rust list cover different structs"
    );
    for (name, size, rfields) in layouts {
        assert_eq!(sizes.get(name), Some(&size), "size of {name}");
        let cf = &fields[name];
        let rf: Vec<(String, usize)> = rfields.iter().map(|(f, o)| (f.to_string(), *o)).collect();
        assert_eq!(&rf, cf, "fields of {name}");
    }
    let rconsts = bam_bench::abi::constants();
    assert_eq!(
        rconsts.len(),
        consts.len(),
        "the C++ dump and the Rust list cover different constants"
    );
    for (name, value) in rconsts {
        assert_eq!(consts.get(name), Some(&value), "constant {name}");
    }
}
