//! What every kernel of the suite is to the code that runs its variants: the [`Bench`]
//! trait and the [`Workload`] it reads of each kernel (one file per kernel holds the
//! rest; `prepare` in mod.rs makes a kernel's inputs).

use super::data::Master;
use super::exec::{Exec, KArg, Run};
use super::options::{Kernel, Variant};
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

/// The error of a check that needs the `hbm` run's result when there is none.
pub(super) fn no_reference(k: Kernel) -> Error {
    Error::InvalidArgument(format!(
        "{k}: no hbm result to check against (the hbm variant failed)"
    ))
}

/// Checks a variant's f32 outputs bit for bit against the `hbm` run's (`reference`, None
/// when that run failed): the first `done` items of `per` values each (a partial run's);
/// the wrong count is items with any value different. `what` names the outputs, `items`
/// the items (plural) in the notes.
pub(super) fn bitwise_against_hbm(
    k: Kernel,
    reference: Option<&Vec<f32>>,
    got: &[f32],
    per: usize,
    done: usize,
    what: &str,
    items: &str,
) -> Result<(u64, Vec<String>)> {
    let r = reference.ok_or_else(|| no_reference(k))?;
    let n = (done * per).min(got.len()).min(r.len());
    let wrong = got[..n]
        .chunks(per)
        .zip(r[..n].chunks(per))
        .filter(|(a, b)| a.iter().zip(*b).any(|(x, y)| x.to_bits() != y.to_bits()))
        .count() as u64;
    let mut notes = vec![format!("checked: {what} bit for bit against the hbm run")];
    if done * per < got.len() {
        notes.push(format!("checked the {done} {items} the last run computed"));
    }
    Ok((wrong, notes))
}
