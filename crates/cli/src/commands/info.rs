//! `bam info`: identify the controller and its namespaces.

use super::DeviceArgs;
use crate::device;
use crate::error::CliResult;
use crate::output::{print, print_json, Global};
use crate::units::binary_bytes;
use bam_nvme::Namespace;
use clap::Args;
use serde::Serialize;
use std::fmt::Write as _;

/// Arguments of `bam info`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  bam info                                   the default model image, ./bam-model.img
  bam info --device model:ram:4G,lba=4096    a throwaway 4 GiB model with 4 KiB blocks
  bam info --device vfio:0000:01:00.0 --json a real controller bound to vfio-pci

MDTS is the largest transfer of one command, in bytes; bam splits larger requests.
Capacities are shown in decimal GB (10^9 bytes) and binary GiB (2^30 bytes).")]
pub struct InfoArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// One LBA format of a namespace.
#[derive(Serialize, Debug)]
pub struct LbaFormatInfo {
    /// Index in Identify Namespace.
    pub index: usize,
    /// Data bytes per block.
    pub block_size: u64,
    /// Metadata bytes per block.
    pub metadata_size: u16,
    /// Relative performance, 0 (best) to 3.
    pub relative_performance: u8,
    /// The namespace is formatted with this one.
    pub in_use: bool,
}

/// A named dataset of a namespace's catalog, for `--json`.
#[derive(Serialize, Debug)]
pub struct DatasetInfo {
    pub name: String,
    /// Elements.
    pub len: u64,
    /// Bytes per element.
    pub elem_size: u32,
    /// First LBA (on each SSD of a GPU stripe; here, of this namespace).
    pub start_lba: u64,
    /// LBAs it takes.
    pub extent: u64,
    /// The GPU cache line size it was written with (0: written by `bam load`, any).
    pub line_bytes: u32,
    /// SSDs it is striped over.
    pub ssds: u32,
}

/// A namespace, for `--json`.
#[derive(Serialize, Debug)]
pub struct NamespaceInfo {
    pub nsid: u32,
    pub blocks: u64,
    pub block_size: u32,
    pub capacity_bytes: u64,
    /// Decimal gigabytes (10^9 bytes).
    pub capacity_gb: f64,
    /// Binary gibibytes (2^30 bytes).
    pub capacity_gib: f64,
    pub lba_formats: Vec<LbaFormatInfo>,
    /// The named datasets of the namespace's catalog (`bam load --name`, the GPU cache's
    /// `Cache::create`); `null` when it has no catalog.
    pub datasets: Option<Vec<DatasetInfo>>,
    /// Why the catalog could not be read, when it could not (damaged, a read error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_error: Option<String>,
}

/// The output of `bam info --json`.
#[derive(Serialize, Debug)]
pub struct Info {
    pub device: String,
    /// `model`, `vfio` or `kmod`.
    pub transport: String,
    pub nvme_version: String,
    pub vendor_id: String,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub controller_id: u16,
    /// Largest I/O queue, in entries (CAP.MQES + 1).
    pub max_queue_entries: u32,
    /// Doorbell stride in bytes (4 << CAP.DSTRD).
    pub doorbell_stride_bytes: usize,
    /// MDTS in bytes as the controller reports it; `null` when it sets no limit.
    pub mdts_bytes: Option<u64>,
    /// Largest transfer bam puts in one command (MDTS capped by the driver's limit).
    pub max_transfer_bytes: usize,
    /// I/O queue pairs the controller granted.
    pub io_queue_pairs: u16,
    /// CAP.TO in milliseconds.
    pub ready_timeout_ms: u64,
    pub namespaces: Vec<NamespaceInfo>,
}

fn namespace_info(ns: &Namespace) -> NamespaceInfo {
    let current = ns.identify.format_index();
    let bytes = ns.bytes();
    NamespaceInfo {
        nsid: ns.nsid,
        blocks: ns.blocks,
        block_size: ns.block_size,
        capacity_bytes: bytes,
        capacity_gb: bytes as f64 / 1e9,
        capacity_gib: bytes as f64 / (1u64 << 30) as f64,
        lba_formats: ns
            .identify
            .lba_formats
            .iter()
            .enumerate()
            .map(|(index, f)| LbaFormatInfo {
                index,
                block_size: f.block_size(),
                metadata_size: f.metadata_size,
                relative_performance: f.relative_performance,
                in_use: index == current,
            })
            .collect(),
        datasets: None,
        catalog_error: None,
    }
}

/// Reads each namespace's dataset catalog into `info` (through one small I/O queue pair).
fn add_datasets(dev: &device::OpenDevice, info: &mut Info) {
    let mut qp = match dev.ctrl.create_io_queue_pair(8) {
        Ok(q) => q,
        Err(e) => {
            for n in &mut info.namespaces {
                n.catalog_error = Some(format!("no I/O queue pair to read it with: {e}"));
            }
            return;
        }
    };
    for (n, ns) in info.namespaces.iter_mut().zip(&dev.ctrl.info().namespaces) {
        match super::catalog::read(&mut qp, ns, &dev.name) {
            Ok(sets) => {
                n.datasets = sets.map(|v| {
                    v.into_iter()
                        .map(|d| DatasetInfo {
                            name: d.name,
                            len: d.len,
                            elem_size: d.elem_size,
                            start_lba: d.start_lba,
                            extent: d.extent,
                            line_bytes: d.line_bytes,
                            ssds: d.ssds,
                        })
                        .collect()
                })
            }
            Err(e) => n.catalog_error = Some(e.to_string()),
        }
    }
}

/// Gathers the information.
pub fn gather(dev: &device::OpenDevice) -> Info {
    let ctrl = &dev.ctrl;
    let info = ctrl.info();
    let id = &info.identify;
    Info {
        device: dev.name.clone(),
        transport: dev.spec.transport().to_string(),
        nvme_version: info.version.to_string(),
        vendor_id: format!("{:#06x}", id.vid),
        model: id.model.trim().to_string(),
        serial: id.serial.trim().to_string(),
        firmware: id.firmware.trim().to_string(),
        controller_id: id.cntlid,
        max_queue_entries: info.max_queue_entries,
        doorbell_stride_bytes: info.doorbell_stride,
        mdts_bytes: id
            .max_transfer_bytes(ctrl.cap().mps_min_bytes())
            .map(|b| b as u64),
        max_transfer_bytes: info.max_transfer_bytes,
        io_queue_pairs: info.io_queue_pairs,
        ready_timeout_ms: info.ready_timeout_ms,
        namespaces: info.namespaces.iter().map(namespace_info).collect(),
    }
}

/// Renders the human table.
pub fn render(i: &Info) -> String {
    let mut s = String::new();
    let mut row = |k: &str, v: String| {
        let _ = writeln!(s, "{k:<20} {v}");
    };
    row("device", i.device.clone());
    row("transport", i.transport.clone());
    row("NVMe version", i.nvme_version.clone());
    row("model", i.model.clone());
    row("serial", i.serial.clone());
    row("firmware", i.firmware.clone());
    row("vendor id", i.vendor_id.clone());
    row("controller id", i.controller_id.to_string());
    row("max queue entries", i.max_queue_entries.to_string());
    row(
        "doorbell stride",
        format!("{} bytes", i.doorbell_stride_bytes),
    );
    row(
        "MDTS",
        match i.mdts_bytes {
            Some(b) => format!("{b} bytes ({})", binary_bytes(b)),
            None => "no limit".into(),
        },
    );
    row(
        "max transfer (bam)",
        format!(
            "{} bytes ({}) per command",
            i.max_transfer_bytes,
            binary_bytes(i.max_transfer_bytes as u64)
        ),
    );
    row("I/O queue pairs", format!("{} granted", i.io_queue_pairs));
    row("ready timeout", format!("{} ms", i.ready_timeout_ms));
    row("namespaces", i.namespaces.len().to_string());
    if !i.namespaces.is_empty() {
        let _ = writeln!(
            s,
            "\n{:>5}  {:>14}  {:>10}  {:>12}  {:>12}  LBA FORMATS (index: data+metadata bytes, * in use)",
            "NSID", "BLOCKS", "BLOCK SIZE", "CAPACITY GB", "CAPACITY GiB"
        );
        for ns in &i.namespaces {
            let formats: Vec<String> = ns
                .lba_formats
                .iter()
                .map(|f| {
                    format!(
                        "{}: {}+{}{}",
                        f.index,
                        f.block_size,
                        f.metadata_size,
                        if f.in_use { "*" } else { "" }
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "{:>5}  {:>14}  {:>10}  {:>12.2}  {:>12.2}  {}",
                ns.nsid,
                ns.blocks,
                ns.block_size,
                ns.capacity_gb,
                ns.capacity_gib,
                formats.join(", ")
            );
        }
        let _ = writeln!(s, "\n(GB = 10^9 bytes, GiB = 2^30 bytes)");
        for ns in &i.namespaces {
            if let Some(e) = &ns.catalog_error {
                let _ = writeln!(
                    s,
                    "\nnamespace {}: dataset catalog unreadable: {e}",
                    ns.nsid
                );
            }
            let Some(sets) = &ns.datasets else { continue };
            let _ = writeln!(
                s,
                "\ndatasets on namespace {} ({}; the catalog is in its last 1 MiB)",
                ns.nsid,
                sets.len()
            );
            if !sets.is_empty() {
                let _ = writeln!(
                    s,
                    "  {:<24} {:>14} {:>6} {:>12}  LBAS",
                    "NAME", "ELEMENTS", "BYTES", "SIZE"
                );
            }
            for d in sets {
                let _ = writeln!(
                    s,
                    "  {:<24} {:>14} {:>6} {:>12}  {}..{}",
                    d.name,
                    d.len,
                    d.elem_size,
                    binary_bytes(d.len * d.elem_size as u64),
                    d.start_lba,
                    d.start_lba + d.extent
                );
            }
        }
    }
    s
}

/// Runs `bam info`.
pub fn run(args: &InfoArgs, g: &Global) -> CliResult<()> {
    // Ask for as many I/O queue pairs as NVMe allows, to report what the controller grants.
    let dev = device::open_read_only(&args.device.device, u16::MAX - 1)?;
    let mut info = gather(&dev);
    add_datasets(&dev, &mut info);
    if g.json {
        print_json(&info);
    } else {
        print(&render(&info));
    }
    Ok(())
}
