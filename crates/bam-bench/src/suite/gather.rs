//! gather: the sum of uniformly random u64 elements (storage array a; the sum stays in GPU
//! memory), every value read checked against its pattern and each full run's sum against
//! the hbm run's.

use super::bench::{Bench, Workload};
use super::data::{Elem, Master};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK};
use super::options::{Kernel, Variant};
use bam::cuda::DeviceBuffer;
use bam::Result;

pub(super) struct Gather {
    /// Full work: the reads of a run (a UVM run does 1/the divisor of them).
    workload: Workload,
    n: u64,
    reads: u64,
    seed: u64,
    out: DeviceBuffer,
    sum_ref: Option<u64>,
    wrong: u64,
    sum_mismatch: u64,
}

impl Gather {
    pub(super) fn new(c: &Ctx, n: u64, reads: u64) -> Result<Self> {
        let seed = c.o.seed ^ 0x6a7;
        Ok(Gather {
            workload: Workload {
                kernel: Kernel::Gather,
                masters: vec![Master::generated(c, "a", Elem::U64, n, seed)?],
                full_work: reads,
            },
            n,
            reads,
            seed,
            out: DeviceBuffer::zeroed(c.gpu, 16)?,
            sum_ref: None,
            wrong: 0,
            sum_mismatch: 0,
        })
    }
}

impl Bench for Gather {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn begin_variant(&mut self) {
        self.wrong = 0;
        self.sum_mismatch = 0;
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        self.out.zero()?;
        let full = !x.uvm;
        let reads = if full {
            self.reads
        } else {
            (self.reads / x.gather_divisor).max(1)
        };
        let (n, seed, out) = (self.n, self.seed, self.out.ptr());
        let rseed = seed.rotate_left(29) ^ 0x9e37_79b9;
        // SAFETY: suite_gather_<form>(A, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
        // unsigned long long*) with A the form's u64 storage array of n elements; `out`
        // holds 2 counters; all outlive the run.
        let run = unsafe {
            x.timed_launches(Kernel::Gather, reads, BLOCK as u64, |k0, k1| {
                [
                    st[0],
                    KArg::U64(n),
                    KArg::U64(k0),
                    KArg::U64(k1 - k0),
                    KArg::U64(seed),
                    KArg::U64(rseed),
                    KArg::U64(out),
                ]
            })?
        };
        let mut r = [0u64; 2];
        self.out.read(0, &mut r)?;
        self.wrong += r[1];
        if full && run.complete {
            match self.sum_ref {
                None => self.sum_ref = Some(r[0]),
                Some(s) => self.sum_mismatch += (s != r[0]) as u64,
            }
        }
        Ok(run)
    }

    fn verify(&mut self, x: &Exec, _st: &[KArg], _v: Variant) -> Result<(u64, Vec<String>)> {
        let mut notes = vec!["checked: every value read against its pattern".to_string()];
        if x.uvm {
            notes.push(format!(
                "UVM: {} of the reads per run (1/{}; the rate is per read)",
                (self.reads / x.gather_divisor).max(1),
                x.gather_divisor
            ));
        } else {
            notes.push("checked: each full run's sum against the hbm run's".into());
        }
        if self.sum_mismatch > 0 {
            notes.push(format!(
                "{} run(s) summed differently from the hbm run",
                self.sum_mismatch
            ));
        }
        Ok((self.wrong + self.sum_mismatch, notes))
    }
}
