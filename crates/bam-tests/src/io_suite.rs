//! The GPU test suite: verified I/O through the GPU I/O layer under concurrency, error
//! statuses, timeouts, on the simulated array and on the host-side controller (a real
//! asynchronous device across PCIe). Run by `bam-gpu-tests` (and `tests/gpu.rs` when a
//! GPU is present). Every test builds its own array; nothing is shared between tests.

use crate::backend::{Outcome, TestBackend};
use crate::case::Case;
use bam::abi::IoView;
use bam::cuda::{DeviceBuffer, Gpu};
use bam::storage::sim::DriveProfile;
use bam::storage::sim::{Media, SimConfig};
use bam::storage::Fault;
use bam::{Error, IoErrorKind, Result, Storage};
use bam_bench::abi::RawCmd;
use bam_bench::raw::{run_job, Job, Rw};
use bam_nvme::spec::status::{GenericStatus, Status};
use bam_nvme::spec::IoOpcode;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    let mut c = crate::backend::test_sim();
    c.ssds = ssds;
    c.io.queues = queues;
    c.io.depth = depth;
    c.io.nslots = slots;
    c.io.slot_bytes = slot_bytes;
    c.media = media;
    c.capacity_bytes = 256 << 20;
    c
}

fn check(arr: &dyn Storage, j: &Job) -> Result<String> {
    let r = run_job(arr.io(), j, None)?;
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

/// Runs every test once on every backend.
pub fn run_suite(gpu: &Arc<Gpu>) -> Vec<Outcome> {
    TestBackend::ALL
        .iter()
        .flat_map(|&b| run_filtered(gpu, b, ""))
        .collect()
}

/// Runs once, on `backend`, every test whose name contains `filter` (all for "").
pub fn run_filtered(gpu: &Arc<Gpu>, backend: TestBackend, filter: &str) -> Vec<Outcome> {
    // Test and benchmark kernels load before any simulated array starts (bam::Module).
    let load = "load the test and benchmark kernels";
    crate::case::run_cases(gpu, backend, &cases(backend), filter, load, false)
}

/// Threads that fill the GPU: every SM but the simulated array's on the simulated array;
/// 4096 on the host-side controller, which serves a command in tens of microseconds.
fn full(gpu: &Gpu, b: TestBackend) -> u32 {
    if b == TestBackend::Sim {
        (gpu.sms - 16) * 512
    } else {
        4096
    }
}

/// `n` I/Os per thread on the simulated array, a fifth of them on the host-side controller.
fn ios(b: TestBackend, n: u64) -> u64 {
    if b == TestBackend::Sim {
        n
    } else {
        n.div_ceil(5)
    }
}

/// The suite's cases on `backend`, in the order they run. The host-side controller
/// serves a command in tens of microseconds: there the tests that fill the GPU with
/// threads use 4096 threads and a fifth of the I/Os per thread.
pub fn cases(backend: TestBackend) -> Vec<Case> {
    let mut v = Vec::new();
    v.push(Case::new(
        "randread 1 thread, qd 1024, 1 queue, 1 ssd",
        |gpu, b| {
            let a = b.build(gpu, cfg(1, 1, 1024, 64, 4096, Media::Hbm))?;
            check(&*a, &job(Rw::RandRead, 512, 1, 1, 1, ios(b, 1000)))
        },
    ));
    v.push(Case::new(
        "randread all SMs full, 512 B, 128 queues, 8 ssds",
        |gpu, b| {
            let a = b.build(gpu, cfg(8, 128, 1024, full(gpu, b), 512, Media::Hbm))?;
            check(
                &*a,
                &job(Rw::RandRead, 512, full(gpu, b), 128, 8, ios(b, 50)),
            )
        },
    ));
    v.push(Case::new(
        "randread qd 2 (one queue, 64 threads)",
        |gpu, b| {
            let a = b.build(gpu, cfg(1, 1, 2, 64, 4096, Media::Hbm))?;
            check(&*a, &job(Rw::RandRead, 4096, 64, 1, 1, 10))
        },
    ));
    v.push(Case::new(
        "randwrite + read-back, 512 B, 1 thread, qd 2, 1 queue",
        |gpu, b| {
            let a = b.build(gpu, cfg(1, 1, 2, 64, 4096, Media::Hbm))?;
            check(&*a, &job(Rw::RandWrite, 512, 1, 1, 1, 200))
        },
    ));
    v.push(Case::new(
        "randrw + read-back, 4 KiB, all SMs full, 1 queue per ssd, 8 ssds",
        |gpu, b| {
            let a = b.build(gpu, cfg(8, 1, 1024, full(gpu, b), 4096, Media::Hbm))?;
            check(&*a, &job(Rw::RandRw, 4096, full(gpu, b), 1, 8, ios(b, 10)))
        },
    ));
    v.push(Case::new(
        "randwrite + read-back, 512 B, all SMs full, 128 queues, 8 ssds",
        |gpu, b| {
            let a = b.build(gpu, cfg(8, 128, 1024, full(gpu, b), 512, Media::Hbm))?;
            check(
                &*a,
                &job(Rw::RandWrite, 512, full(gpu, b), 128, 8, ios(b, 20)),
            )
        },
    ));
    v.push(Case::new(
        "randwrite + read-back, 4 KiB, 16k threads, 128 queues, 1 ssd, host media",
        |gpu, b| {
            let a = b.build(gpu, cfg(1, 128, 1024, 16384, 4096, Media::Host))?;
            check(&*a, &job(Rw::RandWrite, 4096, 16384, 128, 1, ios(b, 10)))
        },
    ));
    v.push(Case::new(
        "sequential write pass then verified read pass (gen 7), 8 ssds",
        |gpu, b| {
            let a = b.build(gpu, cfg(8, 4, 256, 4096, 65536, Media::Hbm))?;
            let mut w = job(Rw::Write, 65536, 4096, 4, 8, 4);
            w.gen = 7;
            w.verify = false;
            w.span_lbas = 4096 * 4 * 128 / 8; // every block of the span written exactly once
            let r = run_job(a.io(), &w, None)?;
            if r.errors != 0 {
                return Err(Error::Io {
                    count: r.errors as u32,
                    errors: r.error_log,
                });
            }
            let mut rd = job(Rw::Read, 65536, 4096, 4, 8, 4);
            rd.gen = 7;
            rd.span_lbas = w.span_lbas;
            check(&*a, &rd)
        },
    ));
    v.push(Case::new(
        "large I/O split at MDTS with PRP lists (1 MiB, optane mdts 128 KiB)",
        |gpu, b| {
            let mut c = cfg(1, 8, 64, 512, 1 << 20, Media::Hbm);
            c.model = DriveProfile::optane_p5800x();
            c.model.lat_read_ns = 0;
            c.model.lat_write_ns = 0;
            c.model.iops_read = 0;
            c.model.iops_write = 0;
            c.model.bw_read = 0;
            c.model.bw_write = 0;
            let a = b.build(gpu, c)?;
            let mut j = job(Rw::RandRw, 1 << 20, 512, 8, 1, 4);
            j.rwmix_read = 50;
            check(&*a, &j)
        },
    ));
    v.push(Case::new(
        "warp API, 64 KiB reads, 4096 threads",
        |gpu, b| {
            let a = b.build(gpu, cfg(2, 8, 256, 4096 / 32, 65536, Media::Hbm))?;
            let mut j = job(Rw::RandRead, 65536, 4096, 8, 2, 10);
            j.warp_io = true;
            check(&*a, &j)
        },
    ));
    v.push(Case::new(
        "modelled media error surfaces as typed NVMe error",
        |gpu, b| {
            let mut c = cfg(1, 4, 256, 1024, 4096, Media::Hbm);
            c.capacity_bytes = 1 << 20;
            c.fault = Some(Fault {
                lba: 100,
                nlb: 8,
                status: 0x281,
                lie: None,
            });
            let a = b.build(gpu, c)?;
            let r = run_job(
                a.io(),
                &job(Rw::RandRead, 512, 1024, 4, 1, ios(b, 50)),
                None,
            )?;
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
        },
    ));
    v.push(Case::new(
        "stalled device produces a timeout error, not a hang",
        |gpu, b| {
            let mut c = cfg(1, 2, 64, 256, 4096, Media::Hbm);
            c.io.timeout = Duration::from_millis(200);
            let a = b.build(gpu, c)?;
            a.set_stall(true)?;
            std::thread::sleep(Duration::from_millis(10));
            let t0 = Instant::now();
            let r = run_job(a.io(), &job(Rw::RandRead, 512, 256, 2, 1, 10), None)?;
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
    ));
    v.push(Case::new(
        "controller validates commands (CID conflict, opcode, NSID, LBA range, PRPs, fused)",
        strict_controller,
    ));
    v.push(Case::new(
        "a warp group from two reservations with a hole: the doorbell stops at the hole",
        mixed_group_doorbell,
    ));
    v.push(Case::new(
        "bad arguments refused on the GPU: a queue pair out of range, LBA and buffer ranges that wrap",
        bad_arguments,
    ));
    v.extend(crate::scan_suite::cases(backend));
    v.push(Case::new(
        "error log: errors logged while the host drains are each taken once, none lost",
        crate::error_logs::concurrent_drain,
    ));
    v.push(Case::new(
        "a queue pair failed by a timeout is deleted, created again and carries verified I/O",
        crate::recovery::io_recovers,
    ));
    for (lie, l) in crate::lies::lies() {
        let name =
            format!("lying controller ({lie}): verified reads end in typed errors, no wrong value");
        v.push(
            Case::new(name, move |gpu, b| crate::lies::io_case(gpu, b, l)).sim_only(
                backend,
                "the simulated array's lying controller (bam::storage::Lie)",
            ),
        );
    }
    v
}

/// Runs `cmds` through `bam_raw_cmds` on queue pair `qp` from SQ/CQ position `first`;
/// returns each command's CQE DW3.
fn raw_cmds(arr: &dyn Storage, qp: u32, first: u32, cmds: &[RawCmd]) -> Result<Vec<u32>> {
    let gpu = arr.io().gpu();
    let cmd_buf = DeviceBuffer::zeroed(gpu, std::mem::size_of_val(cmds))?;
    cmd_buf.write(0, cmds)?;
    let out = DeviceBuffer::zeroed(gpu, 4 * (cmds.len() + 1))?;
    let stream = gpu.stream()?;
    let args: (IoView, u32, u32, u64, u32, u64) = (
        arr.io().io_view(),
        qp,
        first,
        cmd_buf.ptr(),
        cmds.len() as u32,
        out.ptr(),
    );
    // SAFETY: matches bam_raw_cmds(bam_io_view, uint32_t, uint32_t, const bam_raw_cmd*,
    // uint32_t, uint32_t*); both buffers outlive the synchronisation below.
    unsafe { crate::kernels(gpu)?.launch(&stream, "bam_raw_cmds", 1, 32, 0, &args)? };
    gpu.sync_timeout(&stream, Duration::from_secs(30))?;
    let mut dw3 = vec![0u32; cmds.len() + 1];
    out.read(0, &mut dw3)?;
    match dw3[cmds.len()] {
        0 => {}
        1 => return Err(Error::Timeout("raw commands: no completion".into())),
        _ => {
            return Err(Error::InvalidArgument(
                "raw commands: buffer region too small".into(),
            ))
        }
    }
    dw3.truncate(cmds.len());
    Ok(dw3)
}

/// The combined SQ doorbell with a warp group whose lanes took their tickets in two
/// reservations (`bam_push_mixed_group`): the group's leader holds the tail and the
/// group's count equals its span, but one lane's ticket lies below the tail and the span
/// has a hole. The doorbell must stop at the hole; every command then completes. (Before
/// the fix the holder rang past the hole, and the controller fetched the hole's stale
/// SQE.)
fn mixed_group_doorbell(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let a = backend.build(gpu, cfg(1, 1, 64, 64, 4096, Media::Hbm))?;
    let out = DeviceBuffer::zeroed(gpu, 4 * 11)?;
    let stream = gpu.stream()?;
    let args: (IoView, u64, u64) = (a.io().io_view(), 2_000_000, out.ptr());
    // SAFETY: matches bam_push_mixed_group(bam_io_view, uint64_t, uint32_t*); `out` and the
    // I/O layer outlive the synchronisation below.
    unsafe { crate::kernels(gpu)?.launch(&stream, "bam_push_mixed_group", 1, 32, 0, &args)? };
    gpu.sync_timeout(&stream, Duration::from_secs(30))?;
    let mut o = [0u32; 11];
    out.read(0, &mut o)?;
    if o[6..10] != [1, 2, 0, 3] || o[10] != 0b1101 {
        return Err(Error::InvalidArgument(format!(
            "lanes 0..3 took tickets T + {:?} and lanes {:#b} pushed together, not the arranged T + [1, 2, 0, 3] and 0b1101",
            &o[6..10],
            o[10]
        )));
    }
    let hole = (o[1] + 2) % 64;
    if o[0] != u32::MAX && o[0] != hole {
        return Err(Error::InvalidArgument(format!(
            "the group rang SQ tail {} past the unpublished entry at {hole}",
            o[0]
        )));
    }
    let (count, log) = a.io().take_errors()?;
    if o[2..6].iter().any(|&w| w != 0) || count != 0 {
        return Err(Error::InvalidArgument(format!(
            "completions (rc << 16 | status) {:?}, {count} logged errors: {log:?}",
            &o[2..6]
        )));
    }
    Ok(format!(
        "doorbell {} after the group's push (the hole), 4 reads completed",
        o[0]
    ))
}

/// Arguments the device library must refuse before anything reaches a queue: a queue pair
/// index past the I/O layer's (its view would be read out of bounds), an LBA range and a
/// buffer range that wrap past 2^64 (a plain range check would pass them), and a wait on
/// a handle naming no queue pair. Each ends BAM_ERR_INVALID, logged.
fn bad_arguments(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let a = backend.build(gpu, cfg(1, 2, 64, 64, 4096, Media::Hbm))?;
    let out = DeviceBuffer::zeroed(gpu, 16)?;
    let stream = gpu.stream()?;
    let args: (IoView, u64) = (a.io().io_view(), out.ptr());
    // SAFETY: matches bam_bad_args(bam_io_view, int*); `out` outlives the sync below.
    unsafe { crate::kernels(gpu)?.launch(&stream, "bam_bad_args", 1, 32, 0, &args)? };
    gpu.sync_timeout(&stream, Duration::from_secs(30))?;
    let mut rc = [0i32; 4];
    out.read(0, &mut rc)?;
    let invalid = bam::abi::BAM_ERR_INVALID as i32;
    let (count, log) = a.io().take_errors()?;
    let all_invalid = log.iter().all(|e| e.kind == IoErrorKind::Invalid);
    if rc != [invalid; 4] || count != 4 || !all_invalid {
        return Err(Error::InvalidArgument(format!(
            "results {rc:?} (each should be {invalid}), {count} log entries: {log:?}"
        )));
    }
    Ok(format!(
        "4 calls refused as invalid, 4 log entries, first: {}",
        log[0]
    ))
}

/// The controller's validation, seen from the CQ: invalid commands complete with the
/// status a strict controller gives them, without moving data, and a CID in flight twice
/// is a Command ID Conflict for one of the two, free again afterwards. (The host-side
/// controller executes a command as it fetches it, so the first of the pair may have
/// completed, and its CID be free, before the second is fetched: there a conflict is
/// allowed, not required.)
fn strict_controller(gpu: &Arc<Gpu>, backend: TestBackend) -> Result<String> {
    let a = backend.build(gpu, cfg(1, 1, 16, 64, 4096, Media::Hbm))?;
    let ns_lbas = a.io().geometry().ns_blocks;
    let read = |cid: u32| RawCmd {
        cdw0: IoOpcode::Read as u32 | cid << 16,
        nsid: 0,
        slba: 0,
        nlb: 8,
        prp: 0,
    };
    use GenericStatus as G;
    let cases: [(RawCmd, Option<GenericStatus>); 8] = [
        (read(5), None), // with the next one: one succeeds, one conflicts
        (read(5), None),
        (
            RawCmd {
                cdw0: 0x7f | 6 << 16,
                ..read(6)
            },
            Some(G::InvalidOpcode),
        ),
        (
            RawCmd {
                slba: ns_lbas,
                ..read(7)
            },
            Some(G::LbaOutOfRange),
        ),
        (
            RawCmd {
                nsid: 99,
                ..read(8)
            },
            Some(G::InvalidNamespaceOrFormat),
        ),
        (RawCmd { prp: 1, ..read(9) }, Some(G::DataTransferError)),
        (RawCmd { prp: 2, ..read(10) }, Some(G::PrpOffsetInvalid)),
        (
            RawCmd {
                cdw0: read(11).cdw0 | 1 << 8,
                ..read(11)
            },
            Some(G::InvalidField),
        ),
    ];
    let cmds: Vec<RawCmd> = cases.iter().map(|c| c.0).collect();
    let mut dw3 = raw_cmds(&*a, 0, 0, &cmds)?;
    if matches!(backend, TestBackend::File | TestBackend::FileDirect) {
        // The file service completes an invalid command at once and a read when the
        // file system answers: completions come in any order (NVMe allows it). Each
        // command's CQE is the first unclaimed one with its CID.
        let mut left = dw3.clone();
        dw3 = cmds
            .iter()
            .map(|c| {
                let k = left.iter().position(|d| d & 0xffff == c.cdw0 >> 16);
                k.map_or(u32::MAX, |k| left.remove(k))
            })
            .collect();
    }
    let status = |d: u32| Status::from_field((d >> 17) as u16);
    let mut bad = Vec::new();
    for (i, ((c, want), &d)) in cases.iter().zip(&dw3).enumerate() {
        if d & 0xffff != c.cdw0 >> 16 {
            bad.push(format!(
                "command {i}: CQE names CID {}, not {}",
                d & 0xffff,
                c.cdw0 >> 16
            ));
        }
        if let Some(w) = want {
            if status(d).generic_code() != Some(*w) {
                bad.push(format!("command {i}: {} instead of {w:?}", status(d)));
            }
        }
    }
    let pair = [status(dw3[0]), status(dw3[1])];
    let conflicts = pair
        .iter()
        .filter(|s| s.generic_code() == Some(G::CommandIdConflict))
        .count();
    let conflicts_ok = match backend {
        TestBackend::Sim => conflicts == 1,
        // The model and the file forwarder do not track CIDs in flight: both may succeed.
        TestBackend::HostCtl | TestBackend::File | TestBackend::FileDirect => conflicts <= 1,
    };
    if !conflicts_ok || !pair.iter().any(|s| s.is_success()) {
        bad.push(format!(
            "CID 5 twice in flight: {} and {}",
            pair[0], pair[1]
        ));
    }
    // Both completed, so CID 5 is free again.
    let again = raw_cmds(&*a, 0, cmds.len() as u32, &[read(5)])?;
    if !status(again[0]).is_success() {
        bad.push(format!("CID 5 after its completions: {}", status(again[0])));
    }
    let errors = a.counters()?[0].errors;
    if errors != 6 + conflicts as u64 {
        bad.push(format!(
            "the SSD counted {errors} failed commands, not {}",
            6 + conflicts
        ));
    }
    if !bad.is_empty() {
        return Err(Error::InvalidArgument(bad.join("; ")));
    }
    Ok(format!(
        "{} commands: {conflicts} of 2 with the same CID in flight conflicted, 6 invalid ones failed with their statuses, the CID was reusable after",
        cmds.len() + 1
    ))
}
