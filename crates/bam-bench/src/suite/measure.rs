//! The measurement of one variant: a warm-up run, the timed runs under the time budget,
//! their summary (median time, rate), the cache's statistics and the kernel's checks.

use super::bench::Bench;
use super::exec::{Exec, KArg, Run, BUDGET_CHUNKS};
use super::options::Variant;
use super::report::{CacheInfo, VariantResult};
use bam::{Error, Result};
use std::time::Instant;

/// The lower median.
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len().saturating_sub(1) / 2).copied().unwrap_or(0.0)
}

/// Times and rate of a variant's timed runs: (ms median, ms min, work, complete, rate).
fn summarize(runs: &[Run]) -> (f64, f64, u64, bool, f64) {
    let ms: Vec<f64> = runs.iter().map(|r| r.ms).collect();
    let ms_median = median(&ms);
    let ms_min = ms.iter().copied().fold(f64::INFINITY, f64::min);
    let complete = runs.iter().all(|r| r.complete);
    let rate_of = |r: &Run| {
        if r.ms > 0.0 {
            r.work as f64 / (r.ms / 1e3)
        } else {
            0.0
        }
    };
    let (work, rate) = if complete {
        let work = runs.first().map_or(0, |r| r.work);
        let rate = if ms_median > 0.0 {
            work as f64 / (ms_median / 1e3)
        } else {
            0.0
        };
        (work, rate)
    } else {
        let rates: Vec<f64> = runs.iter().map(rate_of).collect();
        let works: Vec<f64> = runs.iter().map(|r| r.work as f64).collect();
        (median(&works) as u64, median(&rates))
    };
    (
        ms_median,
        if ms_min.is_finite() { ms_min } else { 0.0 },
        work,
        complete,
        rate,
    )
}

/// Warm-up, timed runs, verification: the measurement of one variant.
pub(super) fn measure(
    b: &mut dyn Bench,
    x: &Exec,
    st: &[KArg],
    v: Variant,
    reps: u32,
    memory: String,
) -> Result<VariantResult> {
    b.begin_variant();
    let warm = b.run(x, st)?;
    // The statistics of the timed runs (of the warm-up when it is all there is).
    if let (Some(c), true) = (x.cache, warm.complete) {
        c.reset_stats()?;
    }
    // A budgeted variant whose warm-up was quick times its runs unsplit (no waits inside
    // the timed region); a slow one stays split, so that the budget can stop it. UVM runs
    // always stay split: how fast one goes depends on what the driver migrated before,
    // and a run after a quick warm-up has taken many times the budget; the waits between
    // their launches are small beside their times.
    if let Some(d) = x.deadline {
        let left_ms = d.saturating_duration_since(Instant::now()).as_secs_f64() * 1e3;
        if warm.complete && !x.uvm && warm.ms * reps as f64 * 2.0 < left_ms {
            x.chunks.set(1);
        }
    }
    let split = x.chunking();
    let mut runs = Vec::new();
    // The timed runs start on a GPU whose memory bandwidth is back after earlier frees
    // (ported variants: before their cache started, see ported.rs).
    let settle = if warm.complete && x.cache.is_none() {
        Some(x.settle()?)
    } else {
        None
    };
    if warm.complete {
        for _ in 0..reps {
            if x.expired() {
                break;
            }
            let r = b.run(x, st)?;
            runs.push(r);
            if !r.complete {
                break;
            }
        }
    }
    let mut notes = Vec::new();
    if split {
        notes.push(format!(
            "{}: each run was split into up to {BUDGET_CHUNKS} launches with a wait after each, \
             so that the {} s budget could stop it",
            if x.uvm { "UVM" } else { "slow" },
            x.budget_s
        ));
    }
    if runs.is_empty() {
        notes.push(
            "the time budget ran out in the warm-up run: the figures are that (cold) run's".into(),
        );
        runs.push(warm);
    } else if runs.len() < reps as usize {
        notes.push(format!(
            "the time budget allowed {} of {reps} timed runs",
            runs.len()
        ));
    }
    let (ms_median, ms_min, work, complete, rate) = summarize(&runs);
    if !complete {
        notes.push(format!(
            "a run was cut by the time budget: rate = work done / time ({} of {} {})",
            runs.last().map_or(0, |r| r.work),
            b.full_work(),
            b.kernel().work_unit()
        ));
    }
    let cache = match x.cache {
        Some(c) => {
            let mut stats = c.stats()?;
            // The counting variant's views count hits whatever the cache's config says.
            stats.hits_counted |= v == Variant::BamHitCounting;
            let state = c.state()?;
            if !state.is_idle() {
                return Err(Error::InvalidArgument(format!(
                    "the cache is not idle after the runs: {state}"
                )));
            }
            Some(CacheInfo {
                slots: c.config().slots,
                data_lines: 0,
                line_bytes: c.config().line_bytes,
                readahead: c.config().readahead,
                media: String::new(),
                hit_rate: stats.hit_rate(),
                stats,
            })
        }
        None => None,
    };
    let (wrong, checks) = b.verify(x, st, v)?;
    notes.extend(checks);
    let mut r = VariantResult {
        variant: v,
        form: x.form,
        memory,
        runs: runs.len() as u32,
        ms_median,
        ms_min,
        work,
        complete,
        rate,
        gbps: b.kernel().bytes_per_unit().map(|bpu| rate * bpu / 1e9),
        ratio_to_hbm: None,
        ratio_to_zerocopy: None,
        wrong,
        cache,
        uvm: None,
        settle: None,
        notes,
        error: None,
    };
    if let Some(s) = settle {
        r.settled(s);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_use_the_median_and_rates_of_cut_runs() {
        let r = |ms: f64, work: u64, complete: bool| Run { ms, work, complete };
        let (med, min, work, complete, rate) =
            summarize(&[r(3.0, 100, true), r(1.0, 100, true), r(2.0, 100, true)]);
        assert_eq!((med, min, work, complete), (2.0, 1.0, 100, true));
        assert!((rate - 100.0 / 2e-3).abs() < 1e-6);
        // Lower median of an even count.
        assert_eq!(summarize(&[r(4.0, 1, true), r(2.0, 1, true)]).0, 2.0);
        // A cut run: the median of the runs' rates.
        let (_, _, _, complete, rate) = summarize(&[r(1.0, 100, true), r(1.0, 50, false)]);
        assert!(!complete);
        assert!((rate - 50.0 / 1e-3).abs() < 1e-6);
    }
}
