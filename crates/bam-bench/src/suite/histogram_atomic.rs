//! histogram-atomic: every u32 element adds one to bin `a[i] % nbins` of a u64 array of
//! bins, itself a storage array (storage arrays a and bins): a scan plus a scattered
//! atomic read-modify-write per element, the kernel `fetch_add` was made for. Checked
//! after the runs: the bins grew, all together, by exactly the elements counted.

use super::bench::{Bench, Workload};
use super::data::{Elem, Master};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK};
use super::options::{Form, Kernel, Variant};
use bam::cuda::DeviceBuffer;
use bam::Result;

pub(super) struct HistogramAtomic {
    workload: Workload,
    n: u64,
    bins: u64,
    /// The seed the bins were generated from (their values before any run).
    bins_seed: u64,
    /// Elements counted into the current copy of the bins.
    counted: u64,
    sum: DeviceBuffer,
}

impl HistogramAtomic {
    pub(super) fn new(c: &Ctx, n: u64, bins: u64) -> Result<Self> {
        let a = Master::generated(c, "a", Elem::U32, n, c.o.seed ^ 0xa417)?;
        let bins_seed = c.o.seed ^ 0xb175;
        let b = Master::generated(c, "bins", Elem::U64, bins, bins_seed)?;
        Ok(HistogramAtomic {
            workload: Workload {
                kernel: Kernel::HistogramAtomic,
                masters: vec![a, b],
                full_work: n,
            },
            n,
            bins,
            bins_seed,
            counted: 0,
            sum: DeviceBuffer::zeroed(c.gpu, 8)?,
        })
    }
}

impl Bench for HistogramAtomic {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn placed(&mut self) {
        self.counted = 0;
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        // SAFETY: suite_ahist_<form>(A, B, uint64_t, uint64_t, uint64_t) with A the form's
        // u32 storage array of n elements and B its u64 array of `bins` bins; both outlive
        // the run.
        let run = unsafe {
            x.timed_launches(Kernel::HistogramAtomic, self.n, BLOCK as u64, |lo, hi| {
                [
                    st[0],
                    st[1],
                    KArg::U64(self.bins),
                    KArg::U64(lo),
                    KArg::U64(hi),
                ]
            })?
        };
        self.counted = self.counted.wrapping_add(run.work);
        Ok(run)
    }

    fn verify(&mut self, x: &Exec, st: &[KArg], _v: Variant) -> Result<(u64, Vec<String>)> {
        let name = x.name("ahist_sum");
        self.sum.zero()?;
        let a = [
            st[1],
            KArg::U64(self.bins),
            KArg::U64(self.bins_seed),
            KArg::U64(self.sum.ptr()),
        ];
        // SAFETY: suite_ahist_sum_<form>(B, uint64_t, uint64_t, unsigned long long*) with
        // B the form's u64 array of `bins` bins; `sum` holds one counter; both outlive the
        // wait below.
        unsafe { x.launch(&name, x.grid(&name)?, &a)? };
        x.wait()?;
        if let Some(c) = x.cache {
            c.check_errors()?;
        }
        let mut s = [0u64];
        self.sum.read(0, &mut s)?;
        let notes = vec![format!(
            "checked: the {} bins{} grew by {} in all, the {} elements counted",
            self.bins,
            if x.form == Form::Plain {
                ""
            } else {
                " (read back through the cache)"
            },
            s[0],
            self.counted
        )];
        Ok(((s[0] != self.counted) as u64, notes))
    }
}
