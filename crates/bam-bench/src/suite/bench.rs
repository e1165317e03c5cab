//! What every kernel of the suite is to the code that runs its variants: the [`Bench`]
//! trait, the [`Workload`] it reads of each kernel, and [`prepare`], which makes the
//! kernel's inputs (one file per kernel holds the rest).

use super::bfs::Bfs;
use super::data::Master;
use super::exec::{Ctx, Exec, KArg, Run};
use super::gather::Gather;
use super::histogram::Histogram;
use super::options::{Kernel, Sizes, Variant};
use super::rmw::Rmw;
use super::spmv::Spmv;
use bam::{Error, Result};

/// A kernel and the data it works on, as the variant runners read them (the kernel's
/// fixed facts, e.g. its work unit, are [`Kernel`]'s).
pub(super) struct Workload {
    /// The kernel.
    pub(super) kernel: Kernel,
    /// The storage arrays' source copies, in the order the kernel takes them.
    pub(super) masters: Vec<Master>,
    /// Work of a full run (bfs: known after the first complete run).
    pub(super) full_work: u64,
}

/// A kernel of the suite with its inputs.
pub(super) trait Bench {
    /// The kernel, its storage arrays and the work of a full run.
    fn workload(&self) -> &Workload;
    /// A new copy of the storage arrays was placed (rmw forgets its passes).
    fn placed(&mut self) {}
    /// A variant starts (per-variant checks start from zero).
    fn begin_variant(&mut self) {}
    /// One run over the storage arrays `st` (pointers or views, in masters() order).
    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run>;
    /// Checks the variant's results; returns the wrong count and remarks.
    fn verify(&mut self, x: &Exec, st: &[KArg], v: Variant) -> Result<(u64, Vec<String>)>;

    /// The kernel.
    fn kernel(&self) -> Kernel {
        self.workload().kernel
    }
    /// The storage arrays' source copies.
    fn masters(&self) -> &[Master] {
        &self.workload().masters
    }
    /// Work of a full run (known after the first complete run).
    fn full_work(&self) -> u64 {
        self.workload().full_work
    }
}

/// Generates kernel `k`'s inputs at the sizes `s`.
pub(super) fn prepare(c: &Ctx, k: Kernel, s: &Sizes) -> Result<Box<dyn Bench>> {
    Ok(match k {
        Kernel::Spmv => Box::new(Spmv::new(c, s.rows)?),
        Kernel::Bfs => Box::new(Bfs::new(c, s.rows)?),
        Kernel::Gather => Box::new(Gather::new(c, s.gather_elems, s.gather_reads)?),
        Kernel::Histogram => Box::new(Histogram::new(c, s.hist_elems)?),
        Kernel::Rmw => Box::new(Rmw::new(c, s.rmw_elems)?),
    })
}

/// The error of a check that needs the `hbm` run's result when there is none.
pub(super) fn no_reference(k: Kernel) -> Error {
    Error::InvalidArgument(format!(
        "{k}: no hbm result to check against (the hbm variant failed)"
    ))
}
