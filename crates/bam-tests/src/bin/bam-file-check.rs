//! `bam-file-check PATH [--direct] [--bytes SIZE] [--error-range START:LEN] [--expect-full]`:
//! the file backend's CPU service verified on a file or block device, without a GPU (the
//! QEMU guest runs it on an NVMe-oF namespace, a device-mapper error target and a full
//! tmpfs). DESTROYS the data in the checked bytes. Prints PASS or FAIL with what it saw;
//! exit 0 on PASS.

use bam_tests::file_check::{check, CheckOptions};
use std::path::PathBuf;

fn usage(why: &str) -> ! {
    eprintln!(
        "bam-file-check: {why}\nusage: bam-file-check PATH [--direct] [--bytes SIZE] \
         [--error-range START:LEN] [--expect-full]\n  verified writes, a flush and verified \
         reads through the file backend's service (DESTROYS the checked bytes)"
    );
    std::process::exit(2)
}

fn size(s: &str) -> u64 {
    bam::storage::parse_size(s).unwrap_or_else(|e| usage(&e.to_string()))
}

fn main() {
    let mut o = CheckOptions {
        path: PathBuf::new(),
        direct: false,
        bytes: 64 << 20,
        error_range: None,
        expect_full: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--direct" => o.direct = true,
            "--expect-full" => o.expect_full = true,
            "--bytes" => o.bytes = size(&args.next().unwrap_or_else(|| usage("--bytes SIZE"))),
            "--error-range" => {
                let v = args
                    .next()
                    .unwrap_or_else(|| usage("--error-range START:LEN"));
                let (s, l) = v
                    .split_once(':')
                    .unwrap_or_else(|| usage("--error-range START:LEN"));
                let (s, l) = (size(s), size(l));
                o.error_range = Some((s, s + l));
            }
            "-h" | "--help" => usage("help"),
            p if !p.starts_with('-') && o.path.as_os_str().is_empty() => o.path = p.into(),
            other => usage(&format!("unknown argument `{other}`")),
        }
    }
    if o.path.as_os_str().is_empty() {
        usage("no PATH");
    }
    match check(&o) {
        Ok(line) => println!("PASS {}: {line}", o.path.display()),
        Err(e) => {
            println!("FAIL {}: {e}", o.path.display());
            std::process::exit(1)
        }
    }
}
