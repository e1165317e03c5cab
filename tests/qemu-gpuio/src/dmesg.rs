//! The kernel log: markers written around the revocation and the DMAR faults between them.

use anyhow::{ensure, Context, Result};
use bam::io::attach::GPU_PAGE;
use std::io::Write;

/// Writes `line` to the kernel log (a marker for [`check_dmesg`]).
pub(crate) fn kmsg(line: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .context("opening /dev/kmsg")?;
    // one record, finalized at once (a record without its newline may stay unreadable)
    f.write_all(format!("{line}\n").as_bytes())?;
    Ok(())
}

/// Checks the DMAR fault lines logged between the two markers: each names this controller
/// and an address in one of the revoked 64 KiB pages; appends them to `allowed` (the final
/// dmesg check accepts exactly those lines). Faults after the end marker are not listed,
/// so the final check fails on them.
pub(crate) fn check_dmesg(
    bdf: &str,
    markers: (&str, &str),
    pages: &[u64],
    allowed: Option<&str>,
) -> Result<()> {
    let out = std::process::Command::new("dmesg")
        .output()
        .context("running dmesg")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.contains(markers.0))
        .context("the revocation marker is not in dmesg")?;
    let end = start
        + lines[start..]
            .iter()
            .position(|l| l.contains(markers.1))
            .context("the end-of-revocation marker is not in dmesg")?;
    // "DMAR: [DMA Read NO_PASID] Request device [00:03.0] fault addr 0x... [fault reason ...]"
    let short = &bdf[5..]; // bus:dev.fn
    let mut ok = Vec::new();
    for l in &lines[start + 1..end] {
        if !l.contains("DMAR") || !l.contains("fault") {
            continue;
        }
        if l.contains("DRHD: handling fault status reg") {
            ok.push(*l);
            continue;
        }
        let dev = l
            .split("Request device [")
            .nth(1)
            .and_then(|r| r.split(']').next())
            .with_context(|| format!("unexpected DMAR line: {l}"))?;
        ensure!(
            dev == short,
            "DMAR fault of another device ({dev}, we are {short}): {l}"
        );
        let addr = l
            .split("fault addr ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
            .with_context(|| format!("no fault address in: {l}"))?;
        ensure!(
            pages.iter().any(|&p| (p..p + GPU_PAGE).contains(&addr)),
            "DMAR fault at {addr:#x}, outside the revoked buffer: {l}"
        );
        ok.push(*l);
    }
    println!(
        "{} DMAR fault lines during the revocation, all at revoked addresses of {short}",
        ok.len()
    );
    for l in &ok {
        println!("  {l}");
    }
    if let Some(path) = allowed {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        for l in &ok {
            writeln!(f, "{l}")?;
        }
    }
    Ok(())
}
