//! The cache suite's GPU cases as named trials, `<backend> <case>` (`cargo test -p
//! bam-tests -- 'sim torture'`); without a GPU every trial is ignored and SKIPPED is
//! printed.

fn main() {
    bam_tests::harness::single_gpu_main(bam_tests::cache_suite::cases)
}
