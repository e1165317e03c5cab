//! `#[repr(C)]` twins of `cuda/bench_abi.h` (this crate's): the structs of the I/O
//! benchmark kernels (`cuda/bench.cu`), which bam-tests' kernels share. Sizes are asserted
//! here at compile time (the same numbers as the header's static_asserts) and every field
//! offset is compared with the C++ compiler's by `tests/layout.rs`.

#![allow(missing_docs)]

use bam::abi::Layout;

pub const BAM_BENCH_HIST_BUCKETS: usize = 512;
bam::abi_struct!(BenchParams = "bam_bench_params", size 64, {
    ios_per_thread: u64, deadline_ns: u64, span_lbas: u64, seed: u64, nlb: u32, read_pct: u32,
    random: u32, verify: u32, gen: u32, queues_used: u32, ssds_used: u32, warp_io: u32,
});
bam::abi_struct!(
    /// One command for `bam_raw_cmds` (GPU tests of the controller's validation).
    RawCmd = "bam_raw_cmd", size 24, { cdw0: u32, nsid: u32, slba: u64, nlb: u32, prp: u32 }
);
bam::abi_struct!(BenchResult = "bam_bench_result", size 128 + 8 * BAM_BENCH_HIST_BUCKETS, {
    ios: u64, bytes: u64, errors: u64, verify_failures: u64, t_start_ns: u64, t_end_ns: u64,
    cycles: u64, thread_ns: u64, lat_cycles_sum: u64, reserved: [u64; 7], hist: [u64; BAM_BENCH_HIST_BUCKETS],
});

/// The constants shared with bench_abi.h (name, value), for the layout test.
pub fn constants() -> Vec<(&'static str, u64)> {
    vec![("BAM_BENCH_HIST_BUCKETS", BAM_BENCH_HIST_BUCKETS as u64)]
}

/// Layouts of bench_abi.h's structs.
pub fn layouts() -> Vec<Layout> {
    vec![
        BenchParams::layout(),
        RawCmd::layout(),
        BenchResult::layout(),
    ]
}

/// Histogram bucket `b` of the benchmark kernel: its lower bound in cycles.
pub fn hist_bucket_low(b: usize) -> u64 {
    if b < 16 {
        return b as u64;
    }
    let e = (b / 16 + 3) as u32;
    let sub = (b % 16) as u64;
    (1u64 << e) + (sub << (e - 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hist_buckets_are_increasing() {
        let mut last = 0;
        for b in 1..BAM_BENCH_HIST_BUCKETS - 32 {
            let lo = hist_bucket_low(b);
            assert!(lo > last, "bucket {b}");
            last = lo;
        }
        assert_eq!(hist_bucket_low(16), 16);
        assert_eq!(hist_bucket_low(17), 17);
        assert_eq!(hist_bucket_low(32), 32);
        assert_eq!(hist_bucket_low(33), 34);
    }

    // Every struct shared with the GPU is plain old data (checked when this compiles).
    const fn pod<T: bam::abi::Pod>() {}
    const _: () = {
        pod::<BenchParams>();
        pod::<RawCmd>();
        pod::<BenchResult>();
    };
}
