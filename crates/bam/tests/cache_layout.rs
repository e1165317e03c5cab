//! Compares the Rust twins of the cache structs with the C++ compiler's view of
//! `cuda/include/bam/cache_abi.h` (sizes, every field offset and the constants). Needs a host C++
//! compiler (CXX, or c++), no GPU.

use std::path::Path;
use std::process::Command;

#[test]
fn cache_layouts_match() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/include");
    let layouts = bam::cache::abi::layouts();
    let mut src = String::from(
        "#include <cstddef>\n#include <cstdio>\n#include \"bam/cache_abi.h\"\nint main() {\n",
    );
    for (name, _, fields) in &layouts {
        src += &format!("std::printf(\"struct {name} %zu\\n\", sizeof({name}));\n");
        for (f, _) in fields {
            src += &format!("std::printf(\"field {name} {f} %zu\\n\", offsetof({name}, {f}));\n");
        }
    }
    let constants = bam::cache::abi::constants();
    for (name, _) in &constants {
        src += &format!(
            "std::printf(\"const {name} %llu\\n\", static_cast<unsigned long long>({name}));\n"
        );
    }
    src += "}\n";
    let dir = tempfile::tempdir().unwrap();
    let cpp = dir.path().join("dump.cpp");
    std::fs::write(&cpp, src).unwrap();
    let exe = dir.path().join("dump");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let st = Command::new(&cxx)
        .arg("-std=c++17")
        .arg("-I")
        .arg(&root)
        .arg(&cpp)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C++ compiler `{cxx}`: {e}"));
    assert!(st.success(), "the layout dump did not compile");
    let out = String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap();
    let mut expect = String::new();
    for (name, size, fields) in &layouts {
        expect += &format!("struct {name} {size}\n");
        for (f, o) in fields {
            expect += &format!("field {name} {f} {o}\n");
        }
    }
    for (name, v) in &constants {
        expect += &format!("const {name} {v}\n");
    }
    assert_eq!(out, expect);
}
