//! Arrays placed by the cache (`Cache::alloc`): first fit beside the cache's other arrays,
//! a freed extent taken again, a clear refusal when nothing fits (and of a load into a
//! read-only array), and a second cache over
//! the same storage finding the data of arrays made in the same order.

use crate::backend::{fail, TestBackend};
use crate::cache_kernels::sim;
use bam::cache::{Cache, CacheConfig, Layout};
use bam::cuda::Gpu;
use bam::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

pub(super) fn placement(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let line = 4096u64;
    let cfg = CacheConfig::new(line as u32, 256);
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
