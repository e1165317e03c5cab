//! histogram: 256 bins of one byte of every u32 element, in shared memory (storage array a;
//! the bins stay in GPU memory), each run's bins checked against the elements it counted
//! and full runs' against the hbm run's.

use super::bench::{no_reference, Bench, Workload};
use super::data::{Elem, Master};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK};
use super::options::{Kernel, Variant};
use bam::cuda::DeviceBuffer;
use bam::Result;

/// The byte of each element that is counted (bits 8..16).
const HIST_SHIFT: u32 = 8;

pub(super) struct Histogram {
    workload: Workload,
    n: u64,
    hist: DeviceBuffer,
    hist_ref: Option<Vec<u64>>,
    wrong: u64,
    done: u64,
}

impl Histogram {
    pub(super) fn new(c: &Ctx, n: u64) -> Result<Self> {
        let a = Master::generated(c, "a", Elem::U32, n, c.o.seed ^ 0x4157)?;
        Ok(Histogram {
            workload: Workload {
                kernel: Kernel::Histogram,
                masters: vec![a],
                full_work: n,
            },
            n,
            hist: DeviceBuffer::zeroed(c.gpu, 256 * 8)?,
            hist_ref: None,
            wrong: 0,
            done: 0,
        })
    }
}

impl Bench for Histogram {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn begin_variant(&mut self) {
        self.wrong = 0;
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        self.hist.zero()?;
        let out = self.hist.ptr();
        // SAFETY: suite_hist_<form>(A, uint64_t, uint64_t, uint32_t, unsigned long long*)
        // with A the form's u32 storage array of n elements; `out` holds 256 bins; all
        // outlive the run.
        let run = unsafe {
            x.timed_launches(Kernel::Histogram, self.n, BLOCK as u64, |lo, hi| {
                [
                    st[0],
                    KArg::U64(lo),
                    KArg::U64(hi),
                    KArg::U32(HIST_SHIFT),
                    KArg::U64(out),
                ]
            })?
        };
        self.done = run.work;
        let mut h = vec![0u64; 256];
        self.hist.read(0, &mut h)?;
        // Every run: the bins add up to the elements counted; full runs: the hbm bins.
        self.wrong += (h.iter().sum::<u64>() != self.done) as u64;
        if run.complete {
            match &self.hist_ref {
                None => self.hist_ref = Some(h),
                Some(r) => self.wrong += r.iter().zip(&h).filter(|(a, b)| a != b).count() as u64,
            }
        }
        Ok(run)
    }

    fn verify(&mut self, _x: &Exec, _st: &[KArg], _v: Variant) -> Result<(u64, Vec<String>)> {
        if self.hist_ref.is_none() {
            return Err(no_reference(Kernel::Histogram));
        }
        let mut notes = vec![
            "checked: each run's bins sum to the elements it counted, and full runs' bins equal the hbm run's (counts bins)".to_string(),
        ];
        if self.done < self.n {
            notes.push(format!(
                "the last run counted {} of {} elements",
                self.done, self.n
            ));
        }
        Ok((self.wrong, notes))
    }
}
