//! GPU tests of the cache (run by `bam-cache-tests` and `tests/cache_gpu.rs` when a GPU
//! is present): torture with eviction storms checked byte for byte against a host model
//! of the media, element types and line sizes with partial warps and divergent lanes,
//! a cache smaller than the demand (bounded wait, then an error), injected I/O errors.

mod atomics;
mod auto_resident;
mod errors;
mod placement;
mod readahead;
mod stalls;
mod torture;
mod types;
mod views;
mod writeback;

use atomics::{atomics_case, Op};
use auto_resident::{auto_resident, auto_resident_fault};
use errors::{injected_errors, out_of_range, pin_hog};
use placement::{datasets, datasets_from_cpu_tools, placement};
use readahead::readahead;
use stalls::{fill_queue_stall, stalled_device, stalled_writeback};
pub(crate) use torture::{launch_bounded, torture_replay, torture_value};
pub use torture::{
    soak, soak_write_phase, torture, torture_run, SoakReport, TortureCounts, TortureShape,
};
use types::types_case;
use views::{far_line, resident, spare_slots};
use writeback::{failed_writeback_at_close, flush_reaches_ssds, replicated_flush_mixed_failures};

pub use crate::backend::{Outcome, TestBackend};
use crate::case::Case;
use bam::cache::Layout;
use bam::cuda::Gpu;
use std::sync::Arc;

pub use bam::pattern::{mix32, pattern_word};

/// Runs every test once on `backend`. `BAM_CACHE_TEST=substring` runs only the tests
/// whose name contains it.
pub fn run_suite(gpu: &Arc<Gpu>, backend: TestBackend) -> Vec<Outcome> {
    let filter = std::env::var("BAM_CACHE_TEST").unwrap_or_default();
    let load = "load the cache kernels";
    crate::case::run_cases(gpu, backend, &cases(backend), &filter, load, true)
}

/// The suite's cases on `backend`, in the order they run. The host-side controller
/// serves a command in tens of microseconds, so on it the torture runs shorter shapes and
/// the type matrix a sample of its cases; every kind of test still runs.
pub fn cases(backend: TestBackend) -> Vec<Case> {
    let mut v = Vec::new();
    let b = backend;
    let full = b == TestBackend::Sim;
    // Shorter storms on the host-side controller: a quarter of the operations.
    let shorter = |mut s: TortureShape| {
        if !full {
            s.ops = (s.ops / 4).max(1);
        }
        s
    };
    let ssd_counts: &[u32] = if full { &[1, 2, 4] } else { &[1, 2] };
    for &ssds in ssd_counts {
        let shape = shorter(TortureShape::storm());
        v.push(Case::new(
            format!(
                "torture, {ssds} SSD(s), stripe, array_ref reads, 2048 threads, 2560 slots, 64 MiB, {} ops/thread",
                shape.ops
            ),
            move |gpu, b| torture(gpu, b, ssds, Layout::Stripe, true, shape),
        ));
    }
    let shape = shorter(TortureShape::storm_coalesced());
    v.push(Case::new(
        format!(
            "torture, 2 SSDs, replicate, coalesced reads, 8192 threads, 2560 slots, 64 MiB, {} ops/thread",
            shape.ops
        ),
        move |gpu, b| torture(gpu, b, 2, Layout::Replicate, false, shape),
    ));
    let shape = shorter(TortureShape::storm_spares());
    v.push(Case::new(
        format!(
            "torture, 2 SSDs, stripe, coalesced reads, 8192 threads, 8192 slots + 128 spare, 128 MiB, {} ops/thread",
            shape.ops
        ),
        move |gpu, b| torture(gpu, b, 2, Layout::Stripe, false, shape),
    ));
    v.push(Case::new(
        "torture, 1 SSD, stripe, coalesced reads, 32768 threads, 192 slots, 12 MiB (oversubscribed)",
        move |gpu, b| torture(gpu, b, 1, Layout::Stripe, false, TortureShape::oversubscribed()),
    ));
    let spw: &[u32] = if full { &[3, 1] } else { &[3] };
    for &slots_per_warp in spw {
        let tag = if slots_per_warp == 1 {
            ", slots = resident warps"
        } else {
            ""
        };
        if full {
            v.push(Case::new(
                format!("types: 1 B, 512 B lines{tag}"),
                move |gpu, b| types_case::<u8>(gpu, b, 512, slots_per_warp),
            ));
        }
        v.push(Case::new(
            format!("types: 4 B, 512 B lines{tag}"),
            move |gpu, b| types_case::<u32>(gpu, b, 512, slots_per_warp),
        ));
        v.push(Case::new(
            format!("types: 8 B, 64 KiB lines{tag}"),
            move |gpu, b| types_case::<u64>(gpu, b, 65536, slots_per_warp),
        ));
        if full {
            v.push(Case::new(
                format!("types: 16 B, 512 B lines{tag}"),
                move |gpu, b| types_case::<[u32; 4]>(gpu, b, 512, slots_per_warp),
            ));
            v.push(Case::new(
                format!("types: 16 B, 64 KiB lines{tag}"),
                move |gpu, b| types_case::<[u32; 4]>(gpu, b, 65536, slots_per_warp),
            ));
            v.push(Case::new(
                format!("types: 1 B, 64 KiB lines{tag}"),
                move |gpu, b| types_case::<u8>(gpu, b, 65536, slots_per_warp),
            ));
            v.push(Case::new(
                format!("types: 24 B, 48 KiB lines{tag}"),
                move |gpu, b| types_case::<[u64; 3]>(gpu, b, 49152, slots_per_warp),
            ));
        }
        v.push(Case::new(
            format!("types: 24 B struct (#[repr(C)] Edge), 1536 B lines{tag}"),
            move |gpu, b| types_case::<types::Edge>(gpu, b, 1536, slots_per_warp),
        ));
        // 384 elements a line, not a power of two: lines are found by division
        // (div_u64_u32 in util.cuh), not by a shift.
        v.push(Case::new(
            format!("types: 4 B, 1536 B lines{tag}"),
            move |gpu, b| types_case::<u32>(gpu, b, 1536, slots_per_warp),
        ));
    }
    atomic_cases(&mut v, full);
    v.push(Case::new(
        "placement: Cache::alloc places arrays first fit, takes freed extents, refuses when nothing fits; a new cache finds them",
        placement,
    ));
    v.push(Case::new(
        "named datasets: created, listed and opened by name by the next cache, kept out of alloc's way, mismatches and a damaged catalog refused",
        datasets,
    ));
    let name = "named datasets: one written by the CPU tools into a model image is opened by name by the GPU cache";
    v.push(Case::new(name, datasets_from_cpu_tools).only_on(
        TestBackend::HostCtl,
        b,
        "a model image as the medium (hostctl)",
    ));
    v.push(Case::new(
        "cache smaller than the demand: bounded wait, then an error",
        pin_hog,
    ));
    v.push(Case::new(
        "resident view: plain reads and stores, lines kept through evictions, written back",
        resident,
    ));
    v.push(Case::new(
        "default views: an array that fits is made resident by its first view, one that does not stays ordinary, all written back, the share given back at close",
        auto_resident,
    ));
    v.push(Case::new(
        "default views: a media error while the first view reads the array in leaves it ordinary, the error in check_errors",
        auto_resident_fault,
    ));
    v.push(Case::new(
        "spare slots: held by the fill service, no capacity lost, skipped by flushes",
        spare_slots,
    ));
    v.push(Case::new(
        "injected media error reaches the host as a typed error with its LBA",
        injected_errors,
    ));
    v.push(Case::new(
        "indices out of range: those lanes fail, one log entry a call, the others read and write, nothing held",
        out_of_range,
    ));
    // Tests that need the simulated array's fault switches: SKIPPED on other backends.
    let name = "read-ahead: lines a scan will read are filled ahead; a failed read-ahead is quiet";
    v.push(Case::new(name, readahead).sim_only(
        b,
        "the simulated array's fault injection and command counters",
    ));
    v.push(Case::new(
        "stalled device: a miss ends in a timeout error, not a hang",
        stalled_device,
    ));
    v.push(Case::new(
        "fill queues: a lone miss's read timed out on a stalled device, later misses and the next cache still read",
        fill_queue_stall,
    ));
    v.push(Case::new(
        "stalled device at write-back: the lines stay quarantined, reported, never torn",
        stalled_writeback,
    ));
    v.push(Case::new(
        "flush sends an NVMe Flush to every SSD after write-backs",
        flush_reaches_ssds,
    ));
    let name = "failed write-back at array close keeps the dirty line";
    v.push(Case::new(name, failed_writeback_at_close).sim_only(
        b,
        "the simulated array's run-time fault injection (SimArray::set_fault)",
    ));
    v.push(Case::new(
        "acquire_line of a line whose first element wraps past 2^64: an empty span, nothing held",
        far_line,
    ));
    let name =
        "replicated flush: a replica that failed outright does not hide one the device still holds";
    v.push(Case::new(name, replicated_flush_mixed_failures).sim_only(
        b,
        "the simulated array's per-SSD fault injection (SimArray::set_fault_on)",
    ));
    v.push(Case::new(
        "error logs per owner: each array, the cache, a raw job take their own errors",
        crate::error_logs::owners,
    ));
    let name = "an array dropped with failed write-backs leaves its errors to Cache::check_errors";
    v.push(
        Case::new(name, crate::error_logs::array_drop_keeps_errors).sim_only(
            b,
            "the simulated array's run-time fault injection (SimArray::set_fault)",
        ),
    );
    v.push(Case::new(
        "Cache::recover: quarantined write-backs written again, quarantined fills emptied",
        crate::recovery::cache_recovers,
    ));
    v.push(Case::new(
        "slots of a cache dropped while a queue pair is failed wait for the recovery",
        crate::recovery::dropped_cache_slots_wait_for_recovery,
    ));
    v.push(Case::new(
        "a host wait that ends at its bound leaves the still-running kernel's memory alone",
        crate::cache_races::sync_timeout_keeps_kernel_memory,
    ));
    v.push(Case::new(
        "a fill-ring ticket its requester gave up is skipped, misses behind it are served",
        crate::cache_races::fill_ticket_given_up,
    ));
    v.push(Case::new(
        "an unpinned read across a long pause (512 refills into the slot played) is dropped",
        crate::cache_races::unpinned_read_generation_wrap,
    ));
    v.push(Case::new(
        "resident stores during flushes: every line's last store reaches the SSD",
        crate::cache_races::resident_stores_during_flush,
    ));
    for (lie, l) in crate::lies::lies() {
        let name = format!("lying controller ({lie}): reads end in typed errors, no wrong value");
        v.push(
            Case::new(name, move |gpu, b| crate::lies::cache_case(gpu, b, l)).sim_only(
                b,
                "the simulated array's lying controller (bam::storage::Lie)",
            ),
        );
    }
    v
}

/// The atomics' cases: every operation on 4- and 8-byte unsigned integers, signed min and
/// max, floating-point sums; a sample of them on the backends that serve commands slower
/// than the simulated array (every operation of u32 still runs there).
fn atomic_cases(v: &mut Vec<Case>, full: bool) {
    use Op::*;
    const ALL: &[Op] = &[Add, Sub, Min, Max, And, Or, Xor, CasAdd];
    let name = |t: &str, ops: &[Op]| {
        format!("atomics: {t} {ops:?} from many lanes on one element, through evictions, flushed and read back")
    };
    let u64_ops: &[Op] = if full { ALL } else { &[Add, Min, Or, CasAdd] };
    let i32_ops: &[Op] = if full { &[Min, Max] } else { &[Min] };
    let i64_ops: &[Op] = if full { &[Min, Max] } else { &[Max] };
    let f32_ops: &[Op] = if full { &[Add, Sub, CasAdd] } else { &[Add] };
    let f64_ops: &[Op] = if full { &[Add, CasAdd] } else { &[CasAdd] };
    v.push(Case::new(name("u32", ALL), move |g, b| {
        atomics_case::<u32>(g, b, ALL)
    }));
    v.push(Case::new(name("u64", u64_ops), move |g, b| {
        atomics_case::<u64>(g, b, u64_ops)
    }));
    v.push(Case::new(name("i32", i32_ops), move |g, b| {
        atomics_case::<i32>(g, b, i32_ops)
    }));
    v.push(Case::new(name("i64", i64_ops), move |g, b| {
        atomics_case::<i64>(g, b, i64_ops)
    }));
    v.push(Case::new(name("f32", f32_ops), move |g, b| {
        atomics_case::<f32>(g, b, f32_ops)
    }));
    v.push(Case::new(name("f64", f64_ops), move |g, b| {
        atomics_case::<f64>(g, b, f64_ops)
    }));
}
