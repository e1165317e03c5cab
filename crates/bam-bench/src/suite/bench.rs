//! What every kernel of the suite is to the code that runs its variants: the [`Bench`]
//! trait and the [`Workload`] it reads of each kernel (one file per kernel holds the
//! rest; `prepare` in mod.rs makes a kernel's inputs).

use super::data::{sample_rows, Master};
use super::exec::{Ctx, Exec, KArg, Run};
use super::options::{Kernel, Variant};
use bam::cuda::DeviceBuffer;
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

/// The f32 result per row of a CSR kernel (spmv's y, pagerank's new ranks): the buffer the
/// kernel writes, the rows its last run did, and the hbm run's copy that the other
/// variants are checked against.
pub(super) struct RowResults {
    kernel: Kernel,
    /// The row pointers (rows + 1), on the host.
    pub(super) rowptr_host: Vec<u64>,
    /// Where the kernel writes (rows f32).
    pub(super) buf: DeviceBuffer,
    reference: Option<Vec<f32>>,
    rows_done: u64,
}

impl RowResults {
    pub(super) fn new(c: &Ctx, kernel: Kernel, rowptr_host: Vec<u64>) -> Result<Self> {
        let rows = rowptr_host.len().saturating_sub(1);
        Ok(RowResults {
            kernel,
            rowptr_host,
            buf: DeviceBuffer::zeroed(c.gpu, 4 * rows)?,
            reference: None,
            rows_done: 0,
        })
    }

    /// Rows of the matrix.
    pub(super) fn rows(&self) -> u64 {
        self.rowptr_host.len().saturating_sub(1) as u64
    }

    /// A run over rows: remembers the rows it did and returns it with its work in
    /// nonzeros (the rows' entries).
    pub(super) fn finish(&mut self, run: Run) -> Run {
        self.rows_done = run.work;
        Run {
            work: self.rowptr_host[run.work as usize],
            ..run
        }
    }

    /// Checks the results: the hbm run's against `replay(rowptr_host, r)`, the host's
    /// bitwise replay of row r, for `samples` evenly spaced rows and the longest (then
    /// kept as the reference); every other variant's bit for bit against it. `what`
    /// names the results, `items` the rows in the notes.
    pub(super) fn verify(
        &mut self,
        v: Variant,
        samples: u64,
        replay: impl Fn(&[u64], u64) -> Result<f32>,
        what: &str,
        items: &str,
    ) -> Result<(u64, Vec<String>)> {
        let mut got = vec![0f32; self.rows() as usize];
        self.buf.read(0, &mut got)?;
        if v != Variant::Hbm {
            let done = self.rows_done as usize;
            return bitwise_against_hbm(
                self.kernel,
                self.reference.as_ref(),
                &got,
                1,
                done,
                what,
                items,
            );
        }
        let rows = sample_rows(&self.rowptr_host, samples);
        let mut wrong = 0;
        for &r in &rows {
            let want = replay(&self.rowptr_host, r)?;
            wrong += (got[r as usize].to_bits() != want.to_bits()) as u64;
        }
        self.reference = Some(got);
        Ok((
            wrong,
            vec![format!(
                "checked: {} {items} recomputed on the host, bit for bit",
                rows.len()
            )],
        ))
    }
}
