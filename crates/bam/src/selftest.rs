//! The GPU test suite: verified I/O through the simulated array under concurrency,
//! error statuses, timeouts. Run by `bam-gpu-tests` (and `tests/gpu.rs` when a GPU is
//! present). Every test builds its own array; nothing is shared between tests.

use crate::bench::{run_job, Job, Rw};
use crate::error::{Error, IoErrorKind, Result};
use crate::gpu::Gpu;
use crate::presets::DeviceModel;
use crate::sim::{Fault, Media, SimArray, SimConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Result of one test.
#[derive(Debug)]
pub struct Outcome {
    /// Test name.
    pub name: String,
    /// Pass (with a detail line) or failure.
    pub result: Result<String>,
    /// Wall time.
    pub seconds: f64,
}

impl Outcome {
    /// Prints `PASS<label> name (time): detail` or `FAIL<label> name (time): error` and
    /// returns whether the test passed.
    pub fn report(&self, label: &str) -> bool {
        match &self.result {
            Ok(s) => println!("PASS{label} {} ({:.2} s): {s}", self.name, self.seconds),
            Err(e) => println!("FAIL{label} {} ({:.2} s): {e}", self.name, self.seconds),
        }
        self.result.is_ok()
    }
}

/// Opens GPU 0 for a test binary and prints its name: `None` (after printing `SKIP`)
/// when there is no GPU; exits with status 1 when there is one but it cannot be opened.
pub fn open_test_gpu() -> Option<Arc<Gpu>> {
    if !crate::gpu_available() {
        println!("SKIP: no GPU (the CUDA driver is missing or sees no device)");
        return None;
    }
    match Gpu::new(0) {
        Ok(g) => {
            println!("GPU: {} ({} SMs)", g.name, g.sms);
            Some(g)
        }
        Err(e) => {
            eprintln!("FAIL: cannot open the GPU: {e}");
            std::process::exit(1);
        }
    }
}

fn job(rw: Rw, bs: u32, threads: u32, queues: u32, ssds: u32, ios: u64) -> Job {
    Job {
        rw,
        rwmix_read: 50,
        bs,
        threads,
        queues,
        ssds,
        runtime: Duration::from_secs(1),
        ios_per_thread: Some(ios),
        verify: true,
        gen: if matches!(rw, Rw::RandRead | Rw::Read) {
            0
        } else {
            1
        },
        warp_io: false,
        seed: 42,
        span_lbas: 0,
        threads_per_block: 0,
    }
}

fn cfg(ssds: u32, queues: u32, depth: u32, slots: u32, slot_bytes: u64, media: Media) -> SimConfig {
    let mut c = SimConfig::new(DeviceModel::ideal());
    c.ssds = ssds;
    c.queues = queues;
    c.depth = depth;
    c.nslots = slots;
    c.slot_bytes = slot_bytes;
    c.media = media;
    c.capacity_bytes = 256 << 20;
    c
}

fn check(arr: &SimArray, j: &Job) -> Result<String> {
    let r = run_job(arr, j)?;
    let expect =
        r.job.threads as u64 / if j.warp_io { 32 } else { 1 } * j.ios_per_thread.unwrap_or(0);
    if r.errors != 0 || r.verify_failures != 0 || !r.error_log.is_empty() {
        return Err(Error::Io {
            count: (r.errors + r.verify_failures) as u32,
            errors: r.error_log,
        });
    }
    if r.ios != expect {
        return Err(Error::InvalidArgument(format!(
            "completed {} I/Os, expected {expect}",
            r.ios
        )));
    }
    let c = arr.counters()?;
    Ok(format!(
        "{} I/Os verified, {:.2} M IOPS, p50 {:.1} us; sim counters {:?}",
        r.ios,
        r.iops / 1e6,
        r.latency.p50_us,
        c[0]
    ))
}

/// Runs every test once.
pub fn run_suite(gpu: &Arc<Gpu>) -> Vec<Outcome> {
    run_filtered(gpu, "")
}

/// Runs once every test whose name contains `filter` (all for "").
pub fn run_filtered(gpu: &Arc<Gpu>, filter: &str) -> Vec<Outcome> {
    let mut out = Vec::new();
    let mut t = |name: &str, f: &dyn Fn() -> Result<String>| {
        if !name.contains(filter) {
            return;
        }
        let t0 = Instant::now();
        let result = f();
        out.push(Outcome {
            name: name.into(),
            result,
            seconds: t0.elapsed().as_secs_f64(),
        });
    };
    let full = (gpu.sms - 16) * 512;
    t("randread 1 thread, qd 1024, 1 queue, 1 ssd", &|| {
        let a = SimArray::new(gpu, cfg(1, 1, 1024, 64, 4096, Media::Hbm))?;
        check(&a, &job(Rw::RandRead, 512, 1, 1, 1, 1000))
    });
    t("randread all SMs full, 512 B, 128 queues, 8 ssds", &|| {
        let a = SimArray::new(gpu, cfg(8, 128, 1024, full, 512, Media::Hbm))?;
        check(&a, &job(Rw::RandRead, 512, full, 128, 8, 50))
    });
    t("randread qd 2 (one queue, 64 threads)", &|| {
        let a = SimArray::new(gpu, cfg(1, 1, 2, 64, 4096, Media::Hbm))?;
        check(&a, &job(Rw::RandRead, 4096, 64, 1, 1, 10))
    });
    t(
        "randwrite + read-back, 512 B, 1 thread, qd 2, 1 queue",
        &|| {
            let a = SimArray::new(gpu, cfg(1, 1, 2, 64, 4096, Media::Hbm))?;
            check(&a, &job(Rw::RandWrite, 512, 1, 1, 1, 200))
        },
    );
    t(
        "randrw + read-back, 4 KiB, all SMs full, 1 queue per ssd, 8 ssds",
        &|| {
            let a = SimArray::new(gpu, cfg(8, 1, 1024, full, 4096, Media::Hbm))?;
            check(&a, &job(Rw::RandRw, 4096, full, 1, 8, 10))
        },
    );
    t(
        "randwrite + read-back, 512 B, all SMs full, 128 queues, 8 ssds",
        &|| {
            let a = SimArray::new(gpu, cfg(8, 128, 1024, full, 512, Media::Hbm))?;
            check(&a, &job(Rw::RandWrite, 512, full, 128, 8, 20))
        },
    );
    t(
        "randwrite + read-back, 4 KiB, 16k threads, 128 queues, 1 ssd, host media",
        &|| {
            let a = SimArray::new(gpu, cfg(1, 128, 1024, 16384, 4096, Media::Host))?;
            check(&a, &job(Rw::RandWrite, 4096, 16384, 128, 1, 10))
        },
    );
    t(
        "sequential write pass then verified read pass (gen 7), 8 ssds",
        &|| {
            let a = SimArray::new(gpu, cfg(8, 4, 256, 4096, 65536, Media::Hbm))?;
            let mut w = job(Rw::Write, 65536, 4096, 4, 8, 4);
            w.gen = 7;
            w.verify = false;
            w.span_lbas = 4096 * 4 * 128 / 8; // every block of the span written exactly once
            let r = run_job(&a, &w)?;
            if r.errors != 0 {
                return Err(Error::Io {
                    count: r.errors as u32,
                    errors: r.error_log,
                });
            }
            let mut rd = job(Rw::Read, 65536, 4096, 4, 8, 4);
            rd.gen = 7;
            rd.span_lbas = w.span_lbas;
            check(&a, &rd)
        },
    );
    t(
        "large I/O split at MDTS with PRP lists (1 MiB, optane mdts 128 KiB)",
        &|| {
            let mut c = cfg(1, 8, 64, 512, 1 << 20, Media::Hbm);
            c.model = DeviceModel::optane_p5800x();
            c.model.lat_read_ns = 0;
            c.model.lat_write_ns = 0;
            c.model.iops_read = 0;
            c.model.iops_write = 0;
            c.model.bw_read = 0;
            c.model.bw_write = 0;
            let a = SimArray::new(gpu, c)?;
            let mut j = job(Rw::RandRw, 1 << 20, 512, 8, 1, 4);
            j.rwmix_read = 50;
            check(&a, &j)
        },
    );
    t("warp API, 64 KiB reads, 4096 threads", &|| {
        let a = SimArray::new(gpu, cfg(2, 8, 256, 4096 / 32, 65536, Media::Hbm))?;
        let mut j = job(Rw::RandRead, 65536, 4096, 8, 2, 10);
        j.warp_io = true;
        check(&a, &j)
    });
    t("modelled media error surfaces as typed NVMe error", &|| {
        let mut c = cfg(1, 4, 256, 1024, 4096, Media::Hbm);
        c.capacity_bytes = 1 << 20;
        c.fault = Some(Fault {
            lba: 100,
            nlb: 8,
            status: 0x281,
        });
        let a = SimArray::new(gpu, c)?;
        let r = run_job(&a, &job(Rw::RandRead, 512, 1024, 4, 1, 50))?;
        let nvme: Vec<_> = r
            .error_log
            .iter()
            .filter(|e| matches!(e.kind, IoErrorKind::Nvme(_)))
            .collect();
        let ok = !nvme.is_empty()
            && nvme.iter().all(|e| {
                e.lba >= 100
                    && e.lba < 108
                    && matches!(e.kind, IoErrorKind::Nvme(s) if s.to_field() & 0x7ff == 0x281)
            });
        if !ok || r.errors == 0 {
            return Err(Error::InvalidArgument(format!(
                "expected media errors at LBAs 100..108, got {} errors, log {:?}",
                r.errors,
                r.error_log.first()
            )));
        }
        Ok(format!("{} failed I/Os, first: {}", r.errors, nvme[0]))
    });
    t(
        "stalled device produces a timeout error, not a hang",
        &|| {
            let mut c = cfg(1, 2, 64, 256, 4096, Media::Hbm);
            c.timeout = Duration::from_millis(200);
            let a = SimArray::new(gpu, c)?;
            a.set_stall(true)?;
            std::thread::sleep(Duration::from_millis(10));
            let t0 = Instant::now();
            let r = run_job(&a, &job(Rw::RandRead, 512, 256, 2, 1, 10))?;
            let timeouts = r
                .error_log
                .iter()
                .filter(|e| e.kind == IoErrorKind::Timeout)
                .count();
            if timeouts == 0 {
                return Err(Error::InvalidArgument(format!(
                    "no timeout error recorded ({} errors)",
                    r.errors
                )));
            }
            Ok(format!(
                "{timeouts} timeout entries, kernel returned after {:.2} s",
                t0.elapsed().as_secs_f64()
            ))
        },
    );
    out
}
