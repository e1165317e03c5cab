//! Extracts every ```rust block (`ignore` or `no_run` too: nothing here is run) of
//! README.md and docs/*.md into functions that the crate
//! compiles (src/lib.rs includes them). A block is compiled as the body of a function
//! returning `anyhow::Result<()>`, after the context its page names on the line before
//! the fence (`<!-- snippet-context: NAME -->`, invisible on GitHub; default `none`):
//! the variables a fragment uses without defining them. Lines starting with `# ` lose
//! that prefix, as in rustdoc. An unknown context name fails the build.
//!
//! The porting guide's program is also built to run: its kernel (the guide's ```cuda
//! block that includes `bam/array.cuh`) compiled into `porting.fatbin`, its host program
//! (section 3) as `porting_guide_program`, which checks the outputs it read back.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a fragment may use without defining it, by name.
const CONTEXTS: &[(&str, &str)] = &[
    ("none", ""),
    // A fatbin the page's build script would make (a user's kernels).
    ("kernels", "const KERNELS: &[u8] = &[];"),
    // A cache over the simulated array, with an array of f32 in it.
    (
        "cache",
        "use bam::cache::{io_config, Cache, CacheConfig};
         use bam::storage::GpuDevice;
         let gpu = bam::Gpu::new(0)?;
         let cfg = CacheConfig::new(4096, 4096);
         let storage = \"sim:ideal\".parse::<GpuDevice>()?.open(&gpu, &io_config(&cfg))?;
         let cache = Cache::new(storage.io(), cfg)?;
         let data = cache.alloc::<f32>(1 << 20)?;",
    ),
    // The names of the cache's host API overview.
    (
        "cache-api",
        "use bam::cache::{io_config, Cache, CacheConfig, Layout};
         use bam::storage::GpuDevice;
         let gpu = bam::Gpu::new(0)?;
         let (n, start_lba, path) = (1u64 << 20, 0u64, std::path::Path::new(\"data.f32\"));
         let host_slice = vec![0f32; n as usize];
         let mut out = vec![0f32; n as usize];",
    ),
    // The porting guide's program: its inputs and outputs.
    (
        "porting",
        "let n = 1u64 << 20;
         let host_data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
         let randidx: Vec<u32> = (0..n).map(|i| ((i * 7919) % n) as u32).collect();
         let mut results = vec![0f32; n as usize];
         let d_randidx = bam::cuda::DeviceBuffer::zeroed(&bam::Gpu::new(0)?, 4 * n as usize)?;
         d_randidx.write(0, &randidx)?;",
    ),
    // A scan's kernels, data, progress bar, output and stream.
    (
        "scan",
        "const KERNELS: &[u8] = &[];
         let data = vec![0u8; 64 << 20];
         struct Bar;
         impl Bar { fn set_position(&self, _: u64) {} }
         let bar = Bar;
         let g = bam::Gpu::new(0)?;
         let out = bam::cuda::DeviceBuffer::zeroed(&g, 8)?;
         let stream = g.stream()?;
         let timeout = std::time::Duration::from_secs(10);",
    ),
    // A build script's names.
    (
        "build-script",
        "use std::process::Command;
         let out_dir = std::path::PathBuf::from(std::env::var(\"OUT_DIR\")?);",
    ),
    // A cache configuration's inputs.
    (
        "cache-config",
        "use bam::cache::CacheConfig; let slots = 4096u32;",
    ),
];

/// How the pages embed their kernels.
const FATBIN: &str = "include_bytes!(concat!(env!(\"OUT_DIR\"), \"/kernels.fatbin\"))";

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    println!("cargo:rerun-if-changed={}", root.join("docs").display());
    let mut code = String::new();
    let mut list = String::new();
    for page in &pages {
        println!("cargo:rerun-if-changed={}", page.display());
        let rel = page.strip_prefix(&root).unwrap_or(page);
        for (line, context, body) in blocks(page, "rust") {
            // A page's own build script's fatbin (`include_bytes!` of OUT_DIR/kernels.fatbin)
            // is an empty slice here: a file of that name would be taken for a built
            // fatbin (`cargo xtask ci` checks every one).
            let body = body.replace(FATBIN, "&[]");
            let prefix = CONTEXTS
                .iter()
                .find(|(n, _)| *n == context)
                .unwrap_or_else(|| {
                    panic!(
                        "{}:{line}: unknown snippet context `{context}` (known: {})",
                        rel.display(),
                        CONTEXTS.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
                    )
                })
                .1;
            let name = format!(
                "{}_{line}",
                rel.display()
                    .to_string()
                    .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
                    .to_lowercase()
            );
            writeln!(
                code,
                "/// {} line {line} (context `{context}`).\n\
                 #[allow(unused, clippy::all)]\n\
                 pub fn {name}() -> anyhow::Result<()> {{\n{prefix}\nlet _ = {{\n{body}\n}};\nOk(())\n}}\n",
                rel.display()
            )
            .unwrap();
            writeln!(list, "    (\"{}\", {line}, \"{context}\"),", rel.display()).unwrap();
        }
    }
    writeln!(
        code,
        "/// Every block compiled above: page, line of its fence, context.\n\
         pub const SNIPPETS: &[(&str, usize, &str)] = &[\n{list}];"
    )
    .unwrap();
    porting_guide_program(&root.join("docs/porting-guide.md"), &out, &mut code);
    std::fs::write(out.join("snippets.rs"), code).unwrap();
}

/// The porting guide's program, built to run: the kernel block compiled into
/// OUT_DIR/porting.fatbin, section 3's host program (context `porting`) with that fatbin,
/// then a check of what it read back (`out[i] = data[randidx[i]]`: `out` starts at zero).
fn porting_guide_program(page: &Path, out: &Path, code: &mut String) {
    let kernel = blocks(page, "cuda")
        .into_iter()
        .find(|b| b.2.contains("#include <bam/array.cuh>"))
        .expect("docs/porting-guide.md: no ```cuda block includes bam/array.cuh (the port)");
    let src = out.join("porting.cu");
    std::fs::write(&src, kernel.2).unwrap();
    bam_cuda_build::compile(src.to_str().unwrap(), "porting.fatbin");
    let program = blocks(page, "rust")
        .into_iter()
        .find(|b| b.1 == "porting")
        .expect("docs/porting-guide.md: no ```rust block with context `porting`");
    let prefix = CONTEXTS.iter().find(|c| c.0 == "porting").unwrap().1;
    let body = program.2.replace(
        FATBIN,
        "include_bytes!(concat!(env!(\"OUT_DIR\"), \"/porting.fatbin\"))",
    );
    writeln!(
        code,
        "/// docs/porting-guide.md line {}, run: the guide's kernel and host program; fails\n\
         /// unless every output equals the input element its index names.\n\
         #[allow(unused, clippy::all)]\n\
         pub fn porting_guide_program() -> anyhow::Result<()> {{\n{prefix}\n{body}\n\
         let wrong = (0..n as usize).filter(|&i| results[i] != host_data[randidx[i] as usize]).count();\n\
         anyhow::ensure!(wrong == 0, \"{{wrong}} of {{n}} outputs differ from data[randidx[i]]\");\n\
         Ok(())\n}}\n",
        program.0
    )
    .unwrap();
}

/// The ```LANG blocks of `page`: the line of the fence, the context named on the line
/// before it, the code (`# ` prefixes removed).
fn blocks(page: &Path, lang: &str) -> Vec<(usize, String, String)> {
    let fence = format!("```{lang}");
    let text = std::fs::read_to_string(page).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end().starts_with(&fence) {
            let context = i
                .checked_sub(1)
                .and_then(|p| {
                    let l = lines[p].trim();
                    l.strip_prefix("<!-- snippet-context:")
                        .and_then(|r| r.strip_suffix("-->"))
                        .map(|n| n.trim().to_string())
                })
                .unwrap_or_else(|| "none".to_string());
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && lines[end].trim_end() != "```" {
                end += 1;
            }
            let body = lines[start..end]
                .iter()
                .map(|l| {
                    let t = l.trim_start();
                    if t == "#" {
                        ""
                    } else {
                        t.strip_prefix("# ").unwrap_or(l)
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.push((i + 1, context, body));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}
