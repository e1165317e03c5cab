//! Tests of scans (`bam::scan`, `bam/scan.cuh`): data written with `Scan::write` comes
//! back chunk by chunk through `bam::scan_reader`, every chunk exactly once with its halo,
//! over spans of different chunk sizes whose lengths are not whole chunks; a failing read
//! ends the scan with a typed error instead of a hang; a launch larger than the scan's
//! slots is refused. Run by `bam-gpu-tests` through the I/O suite, on every backend.

use crate::backend::TestBackend;
use crate::case::Case;
use bam::cuda::{DeviceBuffer, Gpu};
use bam::io::IoConfig;
use bam::scan::{io_config, Scan, ScanConfig, Span, Spans};
use bam::storage::sim::{Media, SimArray, SimConfig};
use bam::storage::Fault;
use bam::{Error, Result, Storage};
use std::sync::Arc;
use std::time::Duration;

/// Byte `off` of span `span` (the kernel's scan_test_byte).
fn test_byte(span: u32, off: u64) -> u8 {
    ((off.wrapping_mul(0x9E37_79B9_7F4A_7C15)) >> 32) as u8 ^ (span.wrapping_mul(31)) as u8
}

/// (chunk bytes, span bytes) of the two spans: 100 chunks each, the last ones partial.
const SPANS: [(u32, u64); 2] = [
    (64 << 10, 100 * (64 << 10) - 1000),
    (16 << 10, 100 * (16 << 10) - 7),
];
const HALO: u32 = 4096;

fn config(blocks: u32) -> ScanConfig {
    ScanConfig::new(64 << 10).halo(HALO).depth(3).blocks(blocks)
}

fn build(gpu: &Arc<Gpu>, b: TestBackend, cfg: &ScanConfig) -> Result<Box<dyn Storage>> {
    let bytes: u64 = SPANS.iter().map(|s| s.1).sum();
    let spans = SPANS.len() as u32;
    let c = SimConfig {
        ssds: 3,
        capacity_bytes: cfg.ssd_bytes(3, spans, bytes),
        media: Media::Hbm,
        io: IoConfig {
            queues: 4,
            depth: 256,
            timeout: Duration::from_millis(500),
            ..io_config(cfg, spans)
        },
        ..crate::backend::test_sim()
    };
    b.build(gpu, c)
}

/// Writes the test pattern to both spans and returns the scan over them.
fn written<'a>(a: &'a dyn Storage, cfg: &ScanConfig) -> Result<(Scan<'a>, Vec<Span>)> {
    let mut alloc = Spans::new(a.io());
    let spans: Vec<(Span, u32)> = SPANS
        .iter()
        .map(|&(chunk, bytes)| Ok((alloc.span(bytes)?, chunk)))
        .collect::<Result<_>>()?;
    let scan = Scan::with_chunks(a.io(), &spans, cfg)?;
    for (i, &(_, bytes)) in SPANS.iter().enumerate() {
        let data: Vec<u8> = (0..bytes).map(|o| test_byte(i as u32, o)).collect();
        let mut last = 0;
        scan.write(i, 0, &data, &mut |d| last = d)?;
        if last != bytes {
            return Err(Error::InvalidArgument(format!(
                "write progress ended at {last} of {bytes}"
            )));
        }
    }
    Ok((scan, spans.into_iter().map(|s| s.0).collect()))
}

/// Runs bam_scan_check with `grid` blocks: (per-chunk delivery counts, [wrong, checked, failed]).
fn check_kernel(gpu: &Arc<Gpu>, scan: &Scan, grid: u32) -> Result<(Vec<u32>, [u64; 3])> {
    let seen = DeviceBuffer::zeroed(gpu, 4 * scan.chunks() as usize)?;
    let res = DeviceBuffer::zeroed(gpu, 24)?;
    let stream = gpu.stream()?;
    let args = (scan.view(), seen.ptr(), res.ptr());
    // SAFETY: bam_scan_check(bam_scan_view, unsigned*, unsigned long long*): ScanView is
    // bam_scan_view's layout; `seen` has a counter per chunk; both outlive the sync.
    unsafe { crate::kernels(gpu)?.launch(&stream, "bam_scan_check", grid, 128, 0, &args)? };
    gpu.sync_timeout(&stream, Duration::from_secs(60))?;
    let mut s = vec![0u32; scan.chunks() as usize];
    seen.read(0, &mut s)?;
    let mut r = [0u64; 3];
    res.read(0, &mut r)?;
    Ok((s, r))
}

/// Every chunk once, every byte and halo right, on a grid smaller than the chunk count.
fn round_trip(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let cfg = config(7);
    let a = build(gpu, b, &cfg)?;
    let (scan, _) = written(&*a, &cfg)?;
    let (seen, [wrong, checked, failed]) = check_kernel(gpu, &scan, scan.blocks())?;
    scan.check_errors()?;
    let expect: u64 = SPANS
        .iter()
        .map(|&(chunk, bytes)| {
            (0..bytes.div_ceil(chunk as u64))
                .map(|k| {
                    let end = ((k + 1) * chunk as u64 + HALO as u64).min(bytes);
                    end - k * chunk as u64
                })
                .sum::<u64>()
        })
        .sum();
    let bad: Vec<_> = seen
        .iter()
        .enumerate()
        .filter(|(_, &n)| n != 1)
        .take(4)
        .collect();
    if !bad.is_empty() || wrong != 0 || checked != expect || failed != 0 {
        return Err(Error::InvalidArgument(format!(
            "chunks not delivered once (first: {bad:?}); {wrong} wrong bytes; {checked} bytes checked of {expect}; {failed} blocks failed"
        )));
    }
    Ok(format!(
        "{} chunks of 2 spans (64 KiB and 16 KiB chunks, 4 KiB halo, last chunks partial) by {} blocks, depth 3: each once, {checked} bytes right",
        seen.len(),
        scan.blocks()
    ))
}

/// A media error under the scan: the blocks that hit it stop with an error status, the
/// kernel returns, the host gets the typed error with the LBA.
fn media_error(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let cfg = config(7);
    let a = build(gpu, b, &cfg)?;
    let Some(sim) = SimArray::of(a.as_ref()) else {
        return Err(Error::InvalidArgument(
            "needs the simulated array's fault injection".into(),
        ));
    };
    let (scan, spans) = written(&*a, &cfg)?;
    // Span 0's chunk 40 lies in stripe unit 40 (64 KiB units): SSD 40 % 3, its LBA range.
    let unit_lbas = a.io().io_view().stripe_lbas as u64;
    let glba = spans[0].first_lba + 40 * unit_lbas;
    let lba = (glba / unit_lbas / 3) * unit_lbas;
    sim.set_fault(Some(Fault {
        lba,
        nlb: 1,
        status: 0x281,
        lie: None,
    }))?;
    let t = std::time::Instant::now();
    let (_, [_, _, failed]) = check_kernel(gpu, &scan, scan.blocks())?;
    let secs = t.elapsed().as_secs_f64();
    sim.set_fault(None)?;
    let err = scan.check_errors();
    match (&err, failed) {
        (Err(Error::Io { count, errors }), f) if f >= 1 && errors.iter().any(|e| e.lba == lba) => Ok(format!(
            "{f} block(s) stopped, kernel returned in {secs:.2} s, {count} typed error(s), first: {}",
            errors[0]
        )),
        _ => Err(Error::InvalidArgument(format!(
            "expected a failed block and an error at LBA {lba}: {failed} failed blocks, {err:?}"
        ))),
    }
}

/// A grid with more blocks than the scan has slots for: refused by every block, logged.
fn oversized_grid(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let cfg = config(4);
    let a = build(gpu, b, &cfg)?;
    let (scan, _) = written(&*a, &cfg)?;
    let (seen, [_, checked, failed]) = check_kernel(gpu, &scan, scan.blocks() + 1)?;
    let err = scan.check_errors();
    let delivered: u32 = seen.iter().sum();
    if delivered == 0 && checked == 0 && failed == scan.blocks() as u64 + 1 && err.is_err() {
        Ok(format!(
            "{} blocks for a scan of {}: every block refused, error logged",
            scan.blocks() + 1,
            scan.blocks()
        ))
    } else {
        Err(Error::InvalidArgument(format!(
            "{delivered} chunks delivered, {checked} bytes, {failed} blocks failed, errors {err:?}"
        )))
    }
}

/// A stall fails the scan's queue pairs; the next scan run reads nothing (a read that
/// did not settle may still land in its slots) and logs why (`BAM_SCAN_ERR_QUEUE_FAILED`);
/// after `IoArray::recover` the scan delivers every chunk right again.
fn refused_until_recovered(gpu: &Arc<Gpu>, b: TestBackend) -> Result<String> {
    let cfg = config(7);
    let a = build(gpu, b, &cfg)?;
    let (scan, _) = written(&*a, &cfg)?;
    a.set_stall(true)?;
    let stalled = check_kernel(gpu, &scan, scan.blocks());
    a.set_stall(false)?;
    let [wrong, _, failed] = stalled?.1;
    let _ = scan.check_errors();
    if failed == 0 || wrong != 0 || a.io().failed_queue_pairs()?.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "a stalled scan: {failed} failed, {wrong} wrong, failed queue pairs {:?}",
            a.io().failed_queue_pairs()?
        )));
    }
    let (seen, [wrong, checked, _]) = check_kernel(gpu, &scan, scan.blocks())?;
    let refused = match scan.check_errors() {
        Err(Error::Io { errors, .. }) => errors.iter().any(|e| {
            e.kind == bam::IoErrorKind::Aborted && e.detail == bam::abi::BAM_SCAN_ERR_QUEUE_FAILED
        }),
        _ => false,
    };
    if !refused || wrong != 0 || checked != 0 || seen.iter().any(|&n| n != 0) {
        return Err(Error::InvalidArgument(format!(
            "with a failed queue pair the scan read {checked} bytes ({wrong} wrong), refusal logged: {refused}"
        )));
    }
    let r = a.io().recover()?;
    let (seen, [wrong, _, failed]) = check_kernel(gpu, &scan, scan.blocks())?;
    scan.check_errors()?;
    if wrong != 0 || failed != 0 || seen.iter().any(|&n| n != 1) {
        return Err(Error::InvalidArgument(format!(
            "after the recovery: {wrong} wrong, {failed} failed, chunks delivered {:?}",
            seen.iter().filter(|&&n| n != 1).count()
        )));
    }
    Ok(format!(
        "refused with {} failed queue pair(s) (logged), every chunk right after their recovery",
        r.queue_pairs.len()
    ))
}

/// The scan cases on `backend` (run within the I/O suite's table).
pub fn cases(backend: TestBackend) -> Vec<Case> {
    vec![
        Case::new(
            "scan: 2 spans round trip, every chunk once with its halo",
            round_trip,
        ),
        Case::new(
            "scan: a grid larger than the scan's slots is refused",
            oversized_grid,
        ),
        Case::new(
            "scan: after a queue pair failed the scan reads nothing until IoArray::recover",
            refused_until_recovered,
        ),
        Case::new(
            "scan: a media error ends the scan with a typed error, no hang",
            media_error,
        )
        .sim_only(backend, "the simulated array's fault injection"),
    ]
}
