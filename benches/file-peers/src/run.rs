//! The harness every peer runs in: one worker per thread, set up before the clock
//! starts and torn down after it stops, stopped by a piece count or a deadline.

use crate::plan::Plan;
use crate::report::{Clock, Measured};
use anyhow::{anyhow, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// When a run ends.
#[derive(Clone, Copy, Debug)]
pub enum Limit {
    /// After this many pieces in all.
    Ops(u64),
    /// After this long.
    Time(Duration),
}

/// What a worker is told.
pub struct Job<'a> {
    pub plan: &'a Plan,
    pub thread: usize,
    pub verify: bool,
    quota: Option<u64>,
    deadline: Option<Instant>,
    stop: &'a AtomicBool,
}

impl Job<'_> {
    /// True while the worker may start its `k`-th piece.
    pub fn more(&self, k: u64) -> bool {
        self.in_quota(k) && !self.expired()
    }

    /// True while the `k`-th piece is within the thread's share of `--ops` (the deadline
    /// aside: [`Job::expired`], which reads the clock).
    pub fn in_quota(&self, k: u64) -> bool {
        self.quota.is_none_or(|q| k < q)
    }

    /// True once the deadline has passed or another thread failed.
    pub fn expired(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// What a worker did.
#[derive(Default, Debug)]
pub struct Counts {
    pub ops: u64,
    /// Pieces that differed from the pattern.
    pub verify_errors: u64,
    /// The first difference, described.
    pub first_mismatch: Option<String>,
}

impl Counts {
    /// Notes a checked piece read from `off`.
    pub fn checked(&mut self, piece: &[u8], off: u64) {
        if let Some(m) = crate::pattern::check(piece, off) {
            self.verify_errors += 1;
            self.first_mismatch
                .get_or_insert_with(|| format!("piece at offset {off}: {m}"));
        }
    }

    fn add(&mut self, o: Counts) {
        self.ops += o.ops;
        self.verify_errors += o.verify_errors;
        if self.first_mismatch.is_none() {
            self.first_mismatch = o.first_mismatch;
        }
    }
}

/// One thread's reader.
pub trait Worker {
    /// Reads pieces while `job` allows; on an error, returns only once none of its reads
    /// is still in flight.
    fn run(&mut self, job: &Job) -> Result<Counts>;
}

/// Runs `plan.threads` workers made by `setup` (called on the worker's own thread) and
/// measures them together.
pub fn measure<W, F>(
    plan: &Plan,
    limit: Limit,
    verify: bool,
    setup: F,
) -> Result<(Measured, Counts)>
where
    W: Worker,
    F: Fn(usize) -> Result<W> + Sync,
{
    let n = plan.threads;
    let start = Barrier::new(n + 1);
    let done = Barrier::new(n + 1);
    let stop = AtomicBool::new(false);
    let (results, (wall_s, cpu_s)) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|t| {
                let (setup, start, done, stop) = (&setup, &start, &done, &stop);
                s.spawn(move || {
                    let worker = setup(t);
                    start.wait();
                    let (result, worker) = match worker {
                        Ok(mut w) => {
                            let job = Job {
                                plan,
                                thread: t,
                                verify,
                                quota: match limit {
                                    Limit::Ops(ops) => Some(plan.quota(t, ops)),
                                    Limit::Time(_) => None,
                                },
                                deadline: match limit {
                                    Limit::Ops(_) => None,
                                    Limit::Time(d) => Some(Instant::now() + d),
                                },
                                stop,
                            };
                            (w.run(&job), Some(w))
                        }
                        Err(e) => (Err(e), None),
                    };
                    if result.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    done.wait();
                    drop(worker);
                    result
                })
            })
            .collect();
        start.wait();
        let clock = Clock::start();
        done.wait();
        let times = clock.elapsed();
        let results: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(t, h)| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("panicked")))
                    .map_err(|e| e.context(format!("thread {t}")))
            })
            .collect();
        (results, times)
    });
    let mut all = Counts::default();
    for r in results {
        all.add(r?);
    }
    Ok((
        Measured {
            ops: all.ops,
            wall_s,
            cpu_s,
        },
        all,
    ))
}
