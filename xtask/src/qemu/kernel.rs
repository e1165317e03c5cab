//! The guest kernel of `cargo xtask qemu-test`: the newest Debian kernel installed with
//! its image, module tree and headers.

use anyhow::{Context, Result};
use std::fs;
use std::path::PathBuf;

/// A Debian kernel the guest boots and the module is built against.
pub(super) struct Kernel {
    pub(super) version: String,
    pub(super) vmlinuz: PathBuf,
    pub(super) modules: PathBuf,
    pub(super) headers: PathBuf,
}

/// The newest kernel that has an image, a module tree and headers installed.
pub(super) fn find_kernel() -> Result<Kernel> {
    let mut found = Vec::new();
    if let Ok(rd) = fs::read_dir("/lib/modules") {
        for e in rd.flatten() {
            let v = e.file_name().to_string_lossy().into_owned();
            let vmlinuz = PathBuf::from(format!("/boot/vmlinuz-{v}"));
            let headers = PathBuf::from(format!("/usr/src/linux-headers-{v}"));
            let modules = e.path();
            if vmlinuz.is_file()
                && headers.join("Makefile").is_file()
                && modules.join("modules.dep").is_file()
            {
                found.push(Kernel {
                    version: v,
                    vmlinuz,
                    modules,
                    headers,
                });
            }
        }
    }
    found.sort_by_key(|k| version_key(&k.version));
    found.pop().context(
        "no kernel with image, modules and headers found: apt-get install linux-image-amd64 \
         linux-headers-amd64 (see .ci/apt-packages.txt)",
    )
}

fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect()
}
