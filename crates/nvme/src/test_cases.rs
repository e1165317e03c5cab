//! How many cases the in-source property tests run, with the same semantics as the
//! integration tests' `tests/support/cases.rs`: the test's default, times
//! `BAM_FUZZ_SCALE` (long runs), or exactly `PROPTEST_CASES` when set.

/// Cases for a property test whose CI-sized default is `default`.
pub(crate) fn cases(default: u32) -> u32 {
    let scale = std::env::var("BAM_FUZZ_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1u32);
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default.saturating_mul(scale))
}
