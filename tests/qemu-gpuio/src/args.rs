//! The command line of `qemu-gpuio`.

use anyhow::{bail, Context, Result};

/// What the command line asks for.
pub(crate) struct Args {
    pub(crate) device: String,
    pub(crate) queues: u32,
    pub(crate) depth: u32,
    pub(crate) ios: u64,
    pub(crate) revoke: bool,
    pub(crate) shared: bool,
    pub(crate) allowed_dmesg: Option<String>,
}

/// Parses the command line (see the crate's usage line).
pub(crate) fn parse_args() -> Result<Args> {
    let mut a = Args {
        device: String::new(),
        queues: 4,
        depth: 32,
        ios: 4000,
        revoke: false,
        shared: false,
        allowed_dmesg: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut val = |n: &str| it.next().with_context(|| format!("{n} needs a value"));
        match s.as_str() {
            "--queues" => a.queues = val("--queues")?.parse()?,
            "--depth" => a.depth = val("--depth")?.parse()?,
            "--ios" => a.ios = val("--ios")?.parse()?,
            "--revoke" => a.revoke = true,
            "--shared" => a.shared = true,
            "--allowed-dmesg" => a.allowed_dmesg = Some(val("--allowed-dmesg")?),
            d if d.starts_with("kmod:") && a.device.is_empty() => a.device = d.into(),
            other => bail!("unexpected argument {other}"),
        }
    }
    if a.device.is_empty() {
        bail!("usage: qemu-gpuio [--queues N] [--depth N] [--ios N] [--revoke] [--allowed-dmesg FILE] kmod:/dev/bam-nvmeN");
    }
    Ok(a)
}

impl Args {
    /// The device node of the `kmod:` device.
    pub(crate) fn path(&self) -> &str {
        self.device.strip_prefix("kmod:").unwrap_or(&self.device)
    }
}
