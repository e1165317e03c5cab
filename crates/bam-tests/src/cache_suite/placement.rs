//! Arrays placed by the cache (`Cache::alloc`): first fit beside the cache's other arrays,
//! a freed extent taken again, a clear refusal when nothing fits (and of a load into a
//! read-only array), and a second cache over
//! the same storage finding the data of arrays made in the same order.

use crate::backend::{fail, TestBackend};
use crate::cache_kernels::protocol_config;
use crate::cache_kernels::sim;
use bam::cache::{Cache, Layout};
use bam::cuda::Gpu;
use bam::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

pub(super) fn placement(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let line = 4096u64;
    let cfg = protocol_config(line as u32, 256);
    let arr = backend.build(gpu, sim(2, &cfg, 8 << 20, Duration::from_secs(5)))?;
    let geo = arr.io().geometry();
    let (ssds, line_lbas) = (geo.ssds as u64, line / geo.lba_size as u64);
    // a: 4 lines of u32 (a partial one), b: 9 lines of u64, over `ssds` SSDs.
    let (na, nb) = (3 * 1024 + 5, 8 * 512 + 7);
    let a_data: Vec<u32> = (0..na).map(|i| i as u32 ^ 0xa110_c000).collect();
    let b_data: Vec<u64> = (0..nb).map(|i| i * 0x9e37_79b9).collect();
    let a_end = 4u64.div_ceil(ssds) * line_lbas;
    let b_end = a_end + 9u64.div_ceil(ssds) * line_lbas;
    let expect = |what: &str, got: u64, want: u64| -> Result<()> {
        if got != want {
            return fail(format!("{what}: placed at LBA {got}, expected {want}"));
        }
        Ok(())
    };
    {
        let cache = Cache::new(arr.io(), cfg.clone())?;
        let a = cache.alloc::<u32>(na)?;
        let b = cache.alloc::<u64>(nb)?;
        expect("the first array", a.start_lba(), 0)?;
        expect("the second array", b.start_lba(), a_end)?;
        // An array the user placed further on: the next one goes around it.
        let far = cache.array::<u32>(1024, b_end + line_lbas, Layout::Stripe)?;
        let c = cache.alloc::<u32>(3 * 1024 * ssds)?;
        expect(
            "an array that does not fit before the placed one",
            c.start_lba(),
            b_end + 2 * line_lbas,
        )?;
        a.load(&a_data, 0)?;
        b.load(&b_data, 0)?;
        a.close()?;
        // a's extent is free again: a smaller array takes it, and reads a's data there.
        let d = cache.alloc_read_only::<u32>(1024)?;
        expect("an array after the first was closed", d.start_lba(), 0)?;
        let mut got = vec![0u32; 1024];
        d.read(0, &mut got)?;
        if got[..] != a_data[..1024] {
            return fail("the array in the first one's place does not read its data".into());
        }
        // Host writes into a read-only array are refused at the call.
        match d.load(&[7u32], 0) {
            Err(Error::InvalidArgument(m)) if m.contains("read-only") => {}
            other => {
                return fail(format!(
                    "load into a read-only array: expected a refusal at the call, got {other:?}"
                ))
            }
        }
        match cache.alloc::<u8>(geo.ns_blocks * geo.lba_size as u64 * ssds) {
            Err(Error::InvalidArgument(m)) if m.contains("no room") => {}
            other => {
                return fail(format!(
                    "an array as large as the SSDs beside others: expected a refusal that says there is no room, got {:?}",
                    other.map(|x| x.start_lba())
                ))
            }
        }
        for x in [d, far, c] {
            x.close()?;
        }
        b.close()?;
        cache.close()?;
    }
    // The same arrays in the same order in a new cache: the same places, the same data.
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.alloc::<u32>(na)?;
    let b = cache.alloc::<u64>(nb)?;
    expect("the first array in a new cache", a.start_lba(), 0)?;
    expect("the second array in a new cache", b.start_lba(), a_end)?;
    let mut ga = vec![0u32; na as usize];
    let mut gb = vec![0u64; nb as usize];
    a.read(0, &mut ga)?;
    b.read(0, &mut gb)?;
    if ga != a_data || gb != b_data {
        return fail(
            "a new cache's arrays made in the same order do not read the data written".into(),
        );
    }
    a.close()?;
    b.close()?;
    cache.close()?;
    Ok(format!(
        "{ssds} SSDs: first fit at LBAs 0, {a_end}, around an array placed by hand, a freed extent taken again, no room refused, a load into a read-only array refused; a new cache reads {na} u32 and {nb} u64 back"
    ))
}

/// Named datasets (`Cache::create` / `open` / `datasets` / `remove`): made and written by
/// one cache, listed and read back by name by a second cache over the same storage, kept
/// out of `alloc`'s way, refused with the reason for a wrong type, an unknown or
/// duplicate name (a wrong line size or SSD count: the catalog's unit tests); a damaged catalog is an error, not an empty list.
pub(super) fn datasets(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let line = 4096u32;
    let cfg = protocol_config(line, 256);
    let arr = backend.build(gpu, sim(2, &cfg, 8 << 20, Duration::from_secs(5)))?;
    let (ne, nw) = (5 * 1024 + 3, 3 * 512 + 1);
    let edges: Vec<u32> = (0..ne)
        .map(|i| (i as u32).wrapping_mul(2654435761))
        .collect();
    let weights: Vec<f64> = (0..nw).map(|i| i as f64 * 0.25).collect();
    let refused = |what: &str, r: Result<String>, needle: &str| -> Result<()> {
        match r {
            Err(Error::InvalidArgument(m)) if m.contains(needle) => Ok(()),
            other => fail(format!(
                "{what}: expected a refusal that says {needle:?}, got {other:?}"
            )),
        }
    };
    let placed_after: u64;
    {
        let cache = Cache::new(arr.io(), cfg.clone())?;
        if !cache.datasets()?.is_empty() {
            return fail("a fresh storage lists datasets".into());
        }
        let e = cache.create::<u32>("edges", ne)?;
        let w = cache.create::<f64>("weights", nw)?;
        e.load(&edges, 0)?;
        w.load(&weights, 0)?;
        refused(
            "a second dataset named edges",
            cache
                .create::<u32>("edges", 10)
                .map(|a| a.start_lba().to_string()),
            "exists",
        )?;
        placed_after = w.start_lba() + w.extent_lbas();
        e.close()?;
        w.close()?;
        cache.close()?;
    }
    let cache = Cache::new(arr.io(), cfg.clone())?;
    let names: Vec<String> = cache.datasets()?.into_iter().map(|d| d.name).collect();
    if names != ["edges", "weights"] {
        return fail(format!(
            "a new cache lists {names:?}, expected edges and weights"
        ));
    }
    // alloc, with no dataset open, keeps out of both.
    let x = cache.alloc::<u32>(1024)?;
    if x.start_lba() < placed_after {
        return fail(format!(
            "alloc placed an array at LBA {} over the datasets (they end at {placed_after})",
            x.start_lba()
        ));
    }
    x.close()?;
    let e = cache.open::<u32>("edges")?;
    let w = bam::cache::Array::<f64>::open(&cache, "weights")?;
    let mut ge = vec![0u32; ne as usize];
    let mut gw = vec![0f64; nw as usize];
    e.read(0, &mut ge)?;
    w.read(0, &mut gw)?;
    if ge != edges || gw != weights {
        return fail("datasets opened by name do not read what was written".into());
    }
    e.close()?;
    w.close()?;
    refused(
        "edges opened as u64",
        cache.open::<u64>("edges").map(|a| a.len().to_string()),
        "4 bytes",
    )?;
    refused(
        "an unknown name",
        cache.open::<u32>("nodes").map(|a| a.len().to_string()),
        "it has: edges, weights",
    )?;
    cache.remove("edges")?;
    let names: Vec<String> = cache.datasets()?.into_iter().map(|d| d.name).collect();
    if names != ["weights"] {
        return fail(format!("after removing edges the catalog lists {names:?}"));
    }
    cache.close()?;
    // A damaged catalog: one byte of an entry flipped on every SSD's copy.
    let geo = arr.io().geometry();
    let at = geo.ns_blocks - bam::cache::RESERVED_BYTES / geo.lba_size as u64;
    let other = Cache::new(arr.io(), cfg)?;
    let raw = other.array::<u8>(bam::cache::CATALOG_BYTES, at, Layout::Replicate)?;
    let mut b = vec![0u8; 128];
    raw.read(64, &mut b)?;
    b[5] ^= 0x20;
    raw.load(&b, 64)?;
    raw.close()?;
    refused(
        "a catalog with a flipped byte",
        other.datasets().map(|d| format!("{d:?}")),
        "checksum",
    )?;
    other.close()?;
    Ok(format!(
        "2 SSDs: edges ({ne} u32) and weights ({nw} f64) written by one cache, listed and read back by name by the next; alloc kept out of them; wrong type, unknown and duplicate names refused with the reason; a flipped catalog byte reported"
    ))
}

/// A dataset written by the CPU tools' path (a model image through `bam_nvme`'s own
/// controller and queue pair, its catalog entry from `bam_nvme::catalog`, as `bam load
/// --name` writes them) is listed and opened by name by a GPU cache over that image
/// (`hostctl` with the image as its medium), read right, and kept out of `alloc`'s way.
pub(super) fn datasets_from_cpu_tools(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    use bam_nvme::catalog::{encode, Dataset, CATALOG_BYTES, RESERVED_BYTES};
    let dir = tempfile::tempdir()?;
    let img = dir.path().join("edges.img");
    let n = 300_000u64;
    let edges: Vec<u32> = (0..n).map(|i| (i as u32) ^ 0x5eed_0000).collect();
    let start = 4096u64; // LBAs of 512 B: the dataset at 2 MiB
    let end = {
        let spec: bam_nvme::device::DeviceSpec = format!("model:{},size=16M", img.display())
            .parse()
            .map_err(|e| bam::Error::InvalidArgument(format!("{e}")))?;
        let ctrl = bam_nvme::Controller::new(
            spec.open_transport()?,
            bam_nvme::ControllerOptions::default(),
        )?;
        let ns = ctrl.namespace(1)?;
        let bs = ns.block_size as u64;
        let mut qp = ctrl.create_io_queue_pair(16)?;
        let mut bytes = bam::abi::as_bytes(&edges).to_vec();
        bytes.resize(bytes.len().div_ceil(bs as usize) * bs as usize, 0);
        qp.write_from(&ns, start, &bytes)?;
        let d = Dataset {
            name: "edges".into(),
            elem_size: 4,
            len: n,
            start_lba: start,
            extent: (4 * n).div_ceil(4096) * 4096 / bs,
            line_bytes: 0,
            ssds: 1,
        };
        let end = d.start_lba + d.extent;
        let mut cat = encode(&[d]);
        cat.resize(CATALOG_BYTES as usize, 0);
        qp.write_from(&ns, ns.blocks - RESERVED_BYTES / bs, &cat)?;
        qp.flush(&ns)?;
        end
    };
    let cfg = protocol_config(4096, 256);
    let mut c = sim(1, &cfg, 16 << 20, Duration::from_secs(5));
    c.media = bam::storage::sim::Media::File(img.clone());
    c.fill_pattern = false; // the image holds the data: no pattern written over it
    let arr = backend.build(gpu, c)?;
    let cache = Cache::new(arr.io(), cfg)?;
    let names: Vec<String> = cache.datasets()?.into_iter().map(|d| d.name).collect();
    if names != ["edges"] {
        return fail(format!(
            "the GPU cache lists {names:?}, expected [\"edges\"]"
        ));
    }
    let x = cache.alloc::<u32>(1024)?;
    if x.start_lba() != 0 {
        return fail(format!(
            "alloc placed an array at LBA {}, expected 0 (before the dataset)",
            x.start_lba()
        ));
    }
    let big = cache.alloc::<u32>(1 << 20)?; // 4 MiB: no room before the dataset at 2 MiB
    if big.start_lba() < end {
        return fail(format!(
            "alloc placed 4 MiB at LBA {}, over the dataset",
            big.start_lba()
        ));
    }
    x.close()?;
    big.close()?;
    let e = cache.open_read_only::<u32>("edges")?;
    let mut got = vec![0u32; n as usize];
    e.read(0, &mut got)?;
    if got != edges {
        let i = got
            .iter()
            .zip(&edges)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return fail(format!(
            "edges read by name differs from what the CPU wrote, first at {i}"
        ));
    }
    e.close()?;
    cache.close()?;
    Ok(format!(
        "{n} u32 written with the CPU driver into a model image at LBA {start} and recorded in its catalog; a GPU cache over the image (hostctl) lists and opens it by name and reads it right; alloc keeps out of it"
    ))
}
