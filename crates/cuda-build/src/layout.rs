//! The layout check of structs shared by Rust and CUDA C++: the host C++ compiler prints
//! the size and every field offset of each struct, and the value of each constant, that
//! the Rust side lists; the two must agree. The dump program is generated from the Rust
//! list, so a field renamed or missing on either side fails to compile or to match.
//!
//! ```no_run
//! // tests/layout.rs of a crate with shared structs
//! let inc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
//! let layouts = vec![("my_args", 16usize, vec![("ptr", 0usize), ("len", 8)])];
//! bam_cuda_build::layout::check(&["my_abi.h"], &[inc.as_path()], &layouts, &[]).unwrap();
//! ```

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// One struct as the Rust side sees it: its C name, size, and (field, offset) pairs.
pub type Layout = (&'static str, usize, Vec<(&'static str, usize)>);

/// Compiles a dump of `layouts` and `constants` against `headers` (found in
/// `include_dirs`) with the host C++ compiler (`CXX`, or `c++`), runs it and compares
/// its output with the Rust side's numbers. Err: what did not compile, run or match
/// (the first difference, with both sides).
pub fn check(
    headers: &[&str],
    include_dirs: &[&Path],
    layouts: &[Layout],
    constants: &[(&str, u64)],
) -> Result<(), String> {
    let mut src = String::from("#include <cstddef>\n#include <cstdio>\n");
    for h in headers {
        let _ = writeln!(src, "#include \"{h}\"");
    }
    src += "int main() {\n";
    let mut expect = String::new();
    for (name, size, fields) in layouts {
        let _ = writeln!(
            src,
            "std::printf(\"struct {name} %zu\\n\", sizeof({name}));"
        );
        let _ = writeln!(expect, "struct {name} {size}");
        for (f, off) in fields {
            let _ = writeln!(
                src,
                "std::printf(\"field {name} {f} %zu\\n\", offsetof({name}, {f}));"
            );
            let _ = writeln!(expect, "field {name} {f} {off}");
        }
    }
    for (name, value) in constants {
        let _ = writeln!(
            src,
            "std::printf(\"const {name} %llu\\n\", static_cast<unsigned long long>({name}));"
        );
        let _ = writeln!(expect, "const {name} {value}");
    }
    src += "}\n";
    let dir = std::env::temp_dir().join(format!(
        "bam-layout-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = compile_and_run(&dir, &src, include_dirs);
    let _ = std::fs::remove_dir_all(&dir);
    let out = result?;
    match out.lines().zip(expect.lines()).find(|(c, r)| c != r) {
        Some((c, r)) => Err(format!("C++ says `{c}`, Rust says `{r}`")),
        None if out.lines().count() != expect.lines().count() => Err(format!(
            "C++ printed {} lines, Rust expects {}",
            out.lines().count(),
            expect.lines().count()
        )),
        None => Ok(()),
    }
}

fn compile_and_run(dir: &Path, src: &str, include_dirs: &[&Path]) -> Result<String, String> {
    let cpp = dir.join("dump.cpp");
    let exe = dir.join("dump");
    std::fs::write(&cpp, src).map_err(|e| format!("{}: {e}", cpp.display()))?;
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let mut cmd = Command::new(&cxx);
    cmd.arg("-std=c++17");
    for d in include_dirs {
        cmd.arg("-I").arg(d);
    }
    let out = cmd
        .arg(&cpp)
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("cannot run the C++ compiler `{cxx}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the layout dump did not compile:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let run = Command::new(&exe)
        .output()
        .map_err(|e| format!("cannot run the layout dump: {e}"))?;
    if !run.status.success() {
        return Err(format!("the layout dump failed: {}", run.status));
    }
    String::from_utf8(run.stdout).map_err(|e| format!("the layout dump printed non-UTF-8: {e}"))
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn agrees_and_disagrees() {
        let dir = std::env::temp_dir().join(format!("bam-layout-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("t.h"),
            "#include <stdint.h>\nstruct t_args { uint32_t a; uint64_t b; };\n#define T_LIMIT 7\n",
        )
        .unwrap();
        let good = vec![("t_args", 16usize, vec![("a", 0usize), ("b", 8)])];
        assert_eq!(check(&["t.h"], &[&dir], &good, &[("T_LIMIT", 7)]), Ok(()));
        let moved = vec![("t_args", 16usize, vec![("a", 0usize), ("b", 4)])];
        let e = check(&["t.h"], &[&dir], &moved, &[]).unwrap_err();
        assert!(
            e.contains("field t_args b 8") && e.contains("field t_args b 4"),
            "{e}"
        );
        let e = check(&["t.h"], &[&dir], &good, &[("T_LIMIT", 8)]).unwrap_err();
        assert!(e.contains("const T_LIMIT 7"), "{e}");
        let missing = vec![("t_args", 16usize, vec![("c", 0usize)])];
        assert!(check(&["t.h"], &[&dir], &missing, &[])
            .unwrap_err()
            .contains("did not compile"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
