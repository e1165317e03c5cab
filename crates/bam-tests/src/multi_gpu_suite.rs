//! GPU tests with several GPUs sharing the same controllers (`bam-multi-gpu-tests`): one
//! backend serves every GPU's queue pairs (the simulated array on the first GPU through
//! peer access, the controller models on CPU threads, or files through io_uring with a
//! forwarder on every GPU), and
//!
//! - every GPU has its own queue ids and doorbells on every controller;
//! - the verified read and write jobs run on all GPUs at once;
//! - the cache torture runs on all GPUs at once (each its own cache and its own LBAs),
//!   is checked through each GPU's cache against a host model, and then read back by
//!   *another* GPU through a fresh read-only array (what reached the SSDs);
//! - the write rule holds: a writer's LBAs are its own, readers share, a read-only
//!   array's writes are refused and reported, and the hand-over (close, then open)
//!   shows the new data.

use crate::backend::fail;
use crate::backend::{Outcome, TestBackend, HOSTCTL_MIN_TIMEOUT};
use crate::cache_kernels::protocol_config;
use crate::cache_suite::{launch_bounded, torture_replay, torture_value};
use bam::cache::{ArrayView, Cache, CacheConfig, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::storage::hostctl::HostCtlArray;
use bam::storage::sim::SimArray;
use bam::{Error, IoArray, Result, Storage};
use bam_bench::multi_gpu::together;
use bam_bench::raw::{run_job, Job, Rw};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One backend serving every GPU of `gpus` (4 KiB slots, 4096 of them per GPU, 8 queues
/// per SSD per GPU, 2 SSDs of 256 MiB).
pub fn shared_backend(gpus: &[Arc<Gpu>], backend: TestBackend) -> Result<Box<dyn Storage>> {
    let mut c = crate::backend::test_sim();
    c.ssds = 2;
    c.io.queues = 8;
    c.io.depth = 256;
    c.io.nslots = 4096;
    c.io.slot_bytes = 4096;
    c.capacity_bytes = 256 << 20;
    c.io.timeout = Duration::from_secs(5);
    Ok(match backend {
        TestBackend::Sim => Box::new(SimArray::on_gpus(gpus, c)?),
        TestBackend::HostCtl => {
            let mut h = crate::backend::hostctl_like(&c);
            h.io.timeout = h.io.timeout.max(HOSTCTL_MIN_TIMEOUT);
            h.workers = 8;
            Box::new(HostCtlArray::on_gpus(gpus, h)?)
        }
        TestBackend::File | TestBackend::FileDirect => Box::new(
            crate::backend::TestFiles::on_gpus(gpus, &c, backend.file_mode())?,
        ),
    })
}

/// Every GPU has its own queue pairs: distinct queue ids per controller, distinct
/// doorbells and queue memory, all on the same controllers.
fn queues_per_gpu(arr: &dyn Storage) -> Result<String> {
    let ios = arr.ios();
    let mut seen = std::collections::HashSet::new();
    for io in ios {
        if io.sharers() as usize != ios.len() {
            return fail(format!("an I/O layer says {} sharers", io.sharers()));
        }
        for q in io.queue_pairs() {
            if !seen.insert((q.ssd, q.qid)) {
                return fail(format!("SSD {} queue id {} used by two GPUs", q.ssd, q.qid));
            }
        }
    }
    let sqs: std::collections::HashSet<u64> = ios
        .iter()
        .flat_map(|io| io.queue_pairs().iter().map(|q| q.sq))
        .collect();
    if sqs.len() != seen.len() {
        return fail("two queue pairs share a submission queue".into());
    }
    Ok(format!(
        "{} GPUs x {} queue pairs, all ids distinct per controller ({})",
        ios.len(),
        ios[0].queue_pairs().len(),
        arr.describe()
    ))
}

fn rw_job(rw: Rw, threads: u32, ios: u64, seed: u64) -> Job {
    Job {
        rw,
        rwmix_read: 50,
        bs: 4096,
        threads,
        queues: 8,
        ssds: 2,
        runtime: Duration::from_secs(1),
        ios_per_thread: Some(ios),
        verify: true,
        gen: if rw == Rw::RandRead { 0 } else { 1 },
        warp_io: false,
        seed,
        span_lbas: 0,
        threads_per_block: 0,
    }
}

/// Verified random reads, then verified random writes (read back), on every GPU at once.
fn verified_rw(arr: &dyn Storage, threads: u32, ios_each: u64) -> Result<String> {
    let ios = arr.ios();
    let mut total = 0;
    for rw in [Rw::RandRead, Rw::RandWrite] {
        let rs = together(ios.len(), |g| {
            run_job(&ios[g], &rw_job(rw, threads, ios_each, 7 + g as u64), None)
        })?;
        for (g, r) in rs.iter().enumerate() {
            if r.errors != 0 || r.verify_failures != 0 {
                let e = Error::Io {
                    count: (r.errors + r.verify_failures) as u32,
                    errors: r.error_log.clone(),
                };
                return fail(format!("GPU {g}, {rw:?}: {e}"));
            }
            let want = r.job.threads as u64 * ios_each;
            if r.ios != want {
                return fail(format!(
                    "GPU {g}, {rw:?}: {} I/Os completed, {want} expected",
                    r.ios
                ));
            }
            total += r.ios;
        }
    }
    Ok(format!(
        "{total} I/Os verified on {} GPUs at once",
        ios.len()
    ))
}

/// First LBA of GPU g's torture array on every SSD: each array takes `per_ssd` bytes of
/// each SSD, and the regions lie twice that apart, so that they stay disjoint for any
/// number of GPUs the SSDs have room for.
fn region(g: usize, lba: u64, per_ssd: u64) -> u64 {
    8 + g as u64 * (2 * per_ssd).div_ceil(lba)
}

/// The cache torture on every GPU at once, each over its own LBAs; then each GPU's data
/// read back by the next GPU through a read-only array.
fn torture_all(arr: &dyn Storage) -> Result<String> {
    let ios = arr.ios();
    let n = ios.len();
    let lba = ios[0].geometry().lba_size as u64;
    let (blocks, block, slots, ops) = (16u32, 128u32, 2560u32, 128u64);
    let elems: u64 = (32 << 20) / 4; // 32 MiB of u32 per GPU, 12 x the cache
    let threads = (blocks * block) as u64;
    let geo = ios[0].geometry();
    let per_ssd = (elems * 4).div_ceil(geo.ssds as u64);
    let last = region(n - 1, lba, per_ssd) + per_ssd.div_ceil(lba);
    if last > geo.ns_blocks {
        return fail(format!(
            "{n} GPUs' torture arrays need {last} LBAs of each SSD; the SSDs have {}",
            geo.ns_blocks
        ));
    }
    let cfg = |io: &IoArray| CacheConfig {
        timeout: Some(io.geometry().timeout),
        ..protocol_config(4096, slots)
    };
    let t0 = Instant::now();
    let models = together(n, |g| -> Result<Vec<u32>> {
        let io = &ios[g];
        io.gpu().bind()?;
        let cache = Cache::new(io, cfg(io))?;
        let a = cache.array::<u32>(elems, region(g, lba, per_ssd), Layout::Stripe)?;
        let mut vals: Vec<u32> = (0..elems).map(|e| torture_value(e, 0xffff)).collect();
        a.load(&vals, 0)?;
        let res = DeviceBuffer::zeroed(io.gpu(), 16)?;
        let seed = 0xfeed + g as u64;
        let args: (ArrayView, u64, u64, u32, u64) = (a.view(), ops, seed, 0, res.ptr());
        // SAFETY: bam_cache_torture(bam_array_view, uint64_t ops, uint64_t seed, uint32_t
        // use_ref, unsigned long long* res); everything outlives the wait.
        unsafe {
            launch_bounded(
                &cache,
                "bam_cache_torture",
                (blocks, block),
                &args,
                Duration::from_secs(120),
                &|| format!("GPU {g}"),
            )?
        };
        cache.check_errors()?;
        let mut r = [0u64; 2];
        res.read(0, &mut r)?;
        if r != [0, 0] {
            return fail(format!(
                "GPU {g}: {} reads saw another element's data, {} operations failed",
                r[0], r[1]
            ));
        }
        torture_replay(&mut vals, threads, ops, seed, false);
        let mut back = vec![0u32; elems as usize];
        a.read(0, &mut back)?;
        if let Some(i) = back.iter().zip(&vals).position(|(x, y)| x != y) {
            return fail(format!(
                "GPU {g}: element {i} reads {:#x} through its cache, model {:#x}",
                back[i], vals[i]
            ));
        }
        let st = cache.stats()?;
        if st.evictions == 0 || st.writebacks == 0 {
            return fail(format!("GPU {g}: no eviction storm: {st:?}"));
        }
        a.close()?; // hand-over: dirty lines written back, the LBAs released
        cache.close()?;
        Ok(vals)
    })?;
    let kernel_s = t0.elapsed().as_secs_f64();
    // What reached the SSDs, seen by another GPU (fresh caches: nothing stale).
    together(n, |g| -> Result<()> {
        let owner = (g + 1) % n;
        let io = &ios[g];
        io.gpu().bind()?;
        let cache = Cache::new(io, cfg(io))?;
        let a = cache.array_read_only::<u32>(elems, region(owner, lba, per_ssd), Layout::Stripe)?;
        let mut back = vec![0u32; elems as usize];
        a.read(0, &mut back)?;
        if let Some(i) = back.iter().zip(&models[owner]).position(|(x, y)| x != y) {
            return fail(format!(
                "GPU {g} reads GPU {owner}'s element {i} as {:#x}, GPU {owner} wrote {:#x}",
                back[i], models[owner][i]
            ));
        }
        a.close()?;
        cache.close()?;
        Ok(())
    })?;
    Ok(format!(
        "{n} GPUs x {} ops on {slots} slots each, {} MiB each, in {kernel_s:.2} s; each GPU's data read back by another GPU",
        threads * ops,
        (elems * 4) >> 20
    ))
}

/// The write rule across GPUs (docs/multi-gpu.md).
fn write_rule(arr: &dyn Storage) -> Result<String> {
    let ios = arr.ios();
    let (a_io, b_io) = (&ios[0], &ios[1]);
    let lba = a_io.geometry().lba_size as u64;
    let start = (128 << 20) / lba + 64; // 128 MiB into each SSD
    let n: u64 = 1 << 20; // 4 MiB of u32
    let ca = Cache::new(a_io, protocol_config(4096, 1024))?;
    let cb = Cache::new(b_io, protocol_config(4096, 1024))?;
    let w = ca.array::<u32>(n, start, Layout::Stripe)?;
    // While GPU 0 may write, GPU 1 can neither read nor write those LBAs.
    for ro in [true, false] {
        let e = if ro {
            cb.array_read_only::<u32>(n / 2, start + 8, Layout::Stripe)
                .err()
        } else {
            cb.array::<u32>(16, start + 8, Layout::Stripe).err()
        };
        match e {
            Some(e) if e.to_string().contains("another GPU") => {}
            other => {
                return fail(format!(
                    "GPU 1 got an array over GPU 0's writable LBAs: {other:?}"
                ))
            }
        }
    }
    let vals: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
    w.load(&vals, 0)?;
    w.close()?; // hand-over
    let r1 = cb.array_read_only::<u32>(n, start, Layout::Stripe)?;
    let r0 = ca.array_read_only::<u32>(n, start, Layout::Stripe)?;
    let mut back = vec![0u32; n as usize];
    r1.read(0, &mut back)?;
    if back != vals {
        return fail("GPU 1 does not read what GPU 0 wrote before the hand-over".into());
    }
    r0.read(0, &mut back)?;
    if back != vals {
        return fail("GPU 0 does not read its own data back through a read-only array".into());
    }
    // A write through a read-only array is refused at write-back and reported.
    r1.load(&[7u32; 1024], 0)?;
    match r1.close() {
        Err(e) if e.to_string().contains("write back") || e.to_string().contains("read-only") => {}
        other => {
            return fail(format!(
                "closing a read-only array with written lines: {other:?}"
            ))
        }
    }
    let mut head = vec![0u32; 1024];
    r0.read(0, &mut head)?;
    if head[..] != vals[..1024] {
        return fail("a write through GPU 1's read-only array reached the SSDs".into());
    }
    r0.close()?;
    Ok("writable LBAs exclusive; readers share; read-only writes refused; hand-over shows new data".into())
}

/// A multi-GPU case: a name and what it checks on the backend every GPU shares (the
/// cases run in this order on one backend, each seeing what the ones before left).
pub struct MultiCase {
    /// The case's name.
    pub name: &'static str,
    /// Runs it on the shared backend (built by [`shared_backend`] on `backend`).
    pub run: fn(&dyn Storage, TestBackend) -> Result<String>,
}

/// The suite's cases, the same on every backend, in the order they run.
pub fn cases() -> Vec<MultiCase> {
    vec![
        MultiCase {
            name: "queues per GPU",
            run: |arr, _| queues_per_gpu(arr),
        },
        MultiCase {
            name: "verified reads and writes, all GPUs at once",
            run: |arr, backend| {
                let (threads, ios) = match backend {
                    TestBackend::Sim => (4096, 64),
                    _ => (2048, 4),
                };
                verified_rw(arr, threads, ios)
            },
        },
        MultiCase {
            name: "cache torture, all GPUs at once",
            run: |arr, _| torture_all(arr),
        },
        MultiCase {
            name: "write rule and hand-over",
            run: |arr, _| write_rule(arr),
        },
    ]
}

/// `[backend, N GPUs] name`, a case's name in the runner's report lines.
pub fn label(backend: TestBackend, gpus: usize, name: &str) -> String {
    format!("[{}, {gpus} GPUs] {name}", backend.name())
}

/// Loads the test and benchmark kernels on every GPU of `gpus` (before any simulated
/// array starts).
pub fn load_kernels(gpus: &[Arc<Gpu>]) -> Result<()> {
    gpus.iter().try_for_each(crate::case::load_kernels)
}

/// Runs every test once on `backend`, on one backend shared by every GPU of `gpus`.
pub fn run_suite(gpus: &[Arc<Gpu>], backend: TestBackend) -> Vec<Outcome> {
    let label = |t: &str| label(backend, gpus.len(), t);
    let mut out = Vec::new();
    if let Err(e) = load_kernels(gpus) {
        out.push(Outcome {
            name: label("load the test and benchmark kernels"),
            result: Err(e),
            seconds: 0.0,
        });
        return out;
    }
    let t0 = Instant::now();
    let arr = match shared_backend(gpus, backend) {
        Ok(a) => a,
        Err(e) => {
            out.push(Outcome {
                name: label("build one backend for every GPU"),
                result: Err(e),
                seconds: t0.elapsed().as_secs_f64(),
            });
            return out;
        }
    };
    for c in cases() {
        let t = Instant::now();
        let result = (c.run)(&*arr, backend);
        out.push(Outcome {
            name: label(c.name),
            result,
            seconds: t.elapsed().as_secs_f64(),
        });
    }
    out
}
