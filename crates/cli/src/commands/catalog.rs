//! The dataset catalog (`bam_nvme::catalog`) through a CPU queue pair: what `bam load
//! --name` adds to and `bam info` lists. The GPU cache reads the same catalog
//! (`Cache::open`).

use crate::error::{CliError, CliResult, NvmeContext};
use bam_nvme::catalog::{decode, encode, region, too_small, Dataset, CATALOG_BYTES};
use bam_nvme::{IoQueuePair, Namespace};

/// The catalog's region of `ns` (first LBA, LBAs), or None when it is too small to keep one.
pub fn catalog_region(ns: &Namespace) -> Option<(u64, u64)> {
    region(ns.blocks, ns.block_size as u64)
}

/// The catalog's region of `ns`, or the error that says it is too small for one.
pub fn catalog_region_or_err(ns: &Namespace, what: &str, device: &str) -> CliResult<(u64, u64)> {
    catalog_region(ns).ok_or_else(|| {
        CliError::new(
            what,
            format!("namespace {}: {}", ns.nsid, too_small(ns.bytes())),
        )
        .on(device)
    })
}

/// The catalog's datasets: None when `ns` has no catalog; an error when it has a damaged
/// one or the read fails.
pub fn read(qp: &mut IoQueuePair, ns: &Namespace, device: &str) -> CliResult<Option<Vec<Dataset>>> {
    let Some((at, _)) = catalog_region(ns) else {
        return Ok(None);
    };
    let mut b = vec![0u8; CATALOG_BYTES as usize];
    qp.read_into(ns, at, &mut b)
        .during("cannot read the dataset catalog", device)?;
    decode(&b).map_err(|m| {
        CliError::new("the dataset catalog is damaged", m)
            .on(device)
            .hint("the datasets' bytes are still in place; a new catalog is written by `bam load --name` after `bam write` of zeros over the last 1 MiB")
    })
}

/// Writes `sets` as the catalog of `ns` and flushes it.
pub fn write(
    qp: &mut IoQueuePair,
    ns: &Namespace,
    sets: &[Dataset],
    device: &str,
) -> CliResult<()> {
    let (at, _) = catalog_region_or_err(ns, "cannot record the dataset", device)?;
    let mut b = encode(sets);
    b.resize(CATALOG_BYTES as usize, 0);
    qp.write_from(ns, at, &b)
        .during("cannot write the dataset catalog", device)?;
    qp.flush(ns)
        .during("cannot write the dataset catalog", device)
}
