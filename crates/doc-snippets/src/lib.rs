//! Every Rust block of README.md and docs/*.md, compiled against the library (build.rs
//! extracts them; each is the body of a function, after the context its page names with
//! `<!-- snippet-context: NAME -->` on the line before the fence). Compiled, not run
//! (running them needs a GPU and the data they name), except the porting guide's program:
//! `porting_guide_program` is its kernel and host code as the page has them, which
//! tests/porting_guide_gpu.rs runs on a GPU.
//!
//! A page's fragment that uses a variable it does not define names a context (build.rs,
//! `CONTEXTS`) that defines it; a fragment that does not compile fails CI.

include!(concat!(env!("OUT_DIR"), "/snippets.rs"));

#[cfg(test)]
mod tests {
    use super::SNIPPETS;

    /// Every ```rust fence of the pages is among the compiled snippets (counted here
    /// independently of build.rs).
    #[test]
    fn every_rust_block_is_compiled() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut pages = vec![root.join("README.md")];
        for e in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                pages.push(e.path());
            }
        }
        let fences: usize = pages
            .iter()
            .map(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .lines()
                    .filter(|l| l.trim_end().starts_with("```rust"))
                    .count()
            })
            .sum();
        assert!(fences > 0, "no ```rust block found");
        assert_eq!(SNIPPETS.len(), fences, "compiled {:?}", SNIPPETS);
    }
}
