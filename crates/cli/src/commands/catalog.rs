//! The dataset catalog (`bam_nvme::catalog`) through a CPU queue pair: what `bam load
//! --name` adds to and `bam info` lists. The GPU cache reads the same catalog
//! (`Cache::open`).

use crate::error::{CliError, CliResult, NvmeContext};
use bam_nvme::catalog::{decode, encode, Dataset, CATALOG_BYTES, RESERVED_BYTES};
use bam_nvme::{IoQueuePair, Namespace};

/// First LBA of the catalog's region in `ns`, or None when the namespace is too small to
/// keep one (twice RESERVED_BYTES).
pub fn catalog_lba(ns: &Namespace) -> Option<u64> {
    let bs = ns.block_size as u64;
    (ns.bytes() >= 2 * RESERVED_BYTES && RESERVED_BYTES.is_multiple_of(bs))
        .then(|| ns.blocks - RESERVED_BYTES / bs)
}

/// The catalog's datasets: None when `ns` has no catalog; an error when it has a damaged
/// one or the read fails.
pub fn read(qp: &mut IoQueuePair, ns: &Namespace, device: &str) -> CliResult<Option<Vec<Dataset>>> {
    let Some(at) = catalog_lba(ns) else {
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
    let at = catalog_lba(ns).ok_or_else(|| {
        CliError::new(
            "cannot record the dataset",
            format!(
                "namespace {} ({} bytes) is too small for a dataset catalog (it needs {} MiB)",
                ns.nsid,
                ns.bytes(),
                (2 * RESERVED_BYTES) >> 20
            ),
        )
        .on(device)
    })?;
    let mut b = encode(sets);
    b.resize(CATALOG_BYTES as usize, 0);
    qp.write_from(ns, at, &b)
        .during("cannot write the dataset catalog", device)?;
    qp.flush(ns)
        .during("cannot write the dataset catalog", device)
}
