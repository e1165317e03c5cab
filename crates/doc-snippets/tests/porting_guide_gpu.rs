//! The porting guide's program (docs/porting-guide.md, sections 2 and 3), run as written:
//! its kernel and host code taken from the page by build.rs. Needs a GPU: without one it
//! prints SKIPPED (its own harness, so that no `ok` is printed for a run that did not
//! happen).

fn main() {
    if !bam::gpu_available() {
        println!("porting guide's program: SKIPPED (no GPU; it runs on the GPU machine)");
        return;
    }
    match doc_snippets::porting_guide_program() {
        Ok(()) => println!("porting guide's program: ok (it ran, and every output was right)"),
        Err(e) => {
            println!("porting guide's program: FAILED: {e:#}");
            std::process::exit(1);
        }
    }
}
