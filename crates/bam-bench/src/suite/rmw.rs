//! rmw: a\[i\] = 3 a\[i\] + 1 over every u64 element (storage array a), read back and
//! checked against its pattern after the passes.

use super::bench::{Bench, Workload};
use super::data::{Elem, Master};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK};
use super::options::{Form, Kernel, Variant};
use bam::cuda::DeviceBuffer;
use bam::Result;

pub(super) struct Rmw {
    workload: Workload,
    n: u64,
    seed: u64,
    wrong: DeviceBuffer,
    /// Full passes over the current copy of the array, and where a cut pass stopped.
    passes: u32,
    split: u64,
}

impl Rmw {
    pub(super) fn new(c: &Ctx, n: u64) -> Result<Self> {
        let seed = c.o.seed ^ 0x3a3;
        let a = Master::generated(c, "a", Elem::U64, n, seed)?;
        Ok(Rmw {
            workload: Workload {
                kernel: Kernel::Rmw,
                masters: vec![a],
                full_work: n,
            },
            n,
            seed,
            wrong: DeviceBuffer::zeroed(c.gpu, 8)?,
            passes: 0,
            split: 0,
        })
    }
}

impl Bench for Rmw {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn placed(&mut self) {
        self.passes = 0;
        self.split = 0;
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        // SAFETY: suite_rmw_<form>(A, uint64_t, uint64_t) with A the form's u64 storage
        // array of n elements, which outlives the run.
        let run = unsafe {
            x.timed_launches(Kernel::Rmw, self.n, BLOCK as u64, |lo, hi| {
                [st[0], KArg::U64(lo), KArg::U64(hi)]
            })?
        };
        if run.complete {
            self.passes += 1;
        } else {
            self.split = run.work;
        }
        Ok(run)
    }

    fn verify(&mut self, x: &Exec, st: &[KArg], _v: Variant) -> Result<(u64, Vec<String>)> {
        let name = x.name("rmw_check");
        self.wrong.zero()?;
        let a = [
            st[0],
            KArg::U64(self.n),
            KArg::U64(self.seed),
            KArg::U32(self.passes),
            KArg::U64(self.split),
            KArg::U64(self.wrong.ptr()),
        ];
        // SAFETY: suite_rmw_check_<form>(A, uint64_t, uint64_t, uint32_t, uint64_t,
        // unsigned long long*) with A the form's u64 storage array of n elements; `wrong`
        // holds one counter; both outlive the wait below.
        unsafe { x.launch(&name, x.grid(&name)?, &a)? };
        x.wait()?;
        if let Some(c) = x.cache {
            c.check_errors()?;
        }
        let mut w = [0u64];
        self.wrong.read(0, &mut w)?;
        let mut notes = vec![format!(
            "checked: every element read back{} against its pattern after {} pass(es)",
            if x.form == Form::Plain {
                ""
            } else {
                " through the cache"
            },
            self.passes
        )];
        if self.split > 0 {
            notes.push(format!(
                "the last pass stopped at element {} (time budget)",
                self.split
            ));
        }
        Ok((w[0], notes))
    }
}
