//! How many cases the property tests run: the test's default, times `BAM_FUZZ_SCALE`
//! (long runs), or exactly `PROPTEST_CASES` when set.

pub fn cases(default: u32) -> u32 {
    let scale = std::env::var("BAM_FUZZ_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1u32);
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default.saturating_mul(scale))
}
