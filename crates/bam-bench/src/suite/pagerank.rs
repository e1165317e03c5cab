//! pagerank: one pull iteration of PageRank over an in-edge CSR graph, a thread per vertex
//! as a first port writes it (storage arrays rowptr and col; the contributions and the
//! new ranks stay in GPU memory), checked bit for bit. The rows have power-law lengths
//! (the suite's matrix), so the lanes of a warp walk rows of very different lengths.

use super::bench::{Bench, RowResults, Workload};
use super::data::{gen_csr, graph_masters, row_of};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK};
use super::options::{Kernel, Variant};
use bam::cuda::DeviceBuffer;
use bam::Result;

/// The damping factor.
const DAMP: f32 = 0.85;
/// Vertices whose new rank the host recomputes to check the `hbm` run.
const SAMPLES: u64 = 256;

/// A vertex's new rank as suite.cu's pagerank computes it: the contributions of its
/// in-neighbours `cols` added in order from 0, then `damp * sum + base` as one fused
/// multiply-add. Bitwise what the GPU writes.
fn pull_rank(cols: &[u32], contrib: &[f32], base: f32, damp: f32) -> f32 {
    let s = cols.iter().fold(0f32, |s, &u| s + contrib[u as usize]);
    damp.mul_add(s, base)
}

pub(super) struct Pagerank {
    workload: Workload,
    contrib: DeviceBuffer,
    contrib_host: Vec<f32>,
    /// (1 - damp) / rows.
    base: f32,
    /// The new ranks.
    next: RowResults,
}

impl Pagerank {
    pub(super) fn new(c: &Ctx, rows: u64) -> Result<Self> {
        let csr = gen_csr(c, rows, c.o.degree, c.o.seed ^ 0x9a6e)?;
        drop(csr.val);
        // The contributions of a uniform rank: (1 / rows) / out-degree, the out-degrees
        // counted over the in-edges' sources.
        let outdeg = DeviceBuffer::zeroed(c.gpu, (4 * rows) as usize)?;
        let contrib = DeviceBuffer::zeroed(c.gpu, (4 * rows) as usize)?;
        let a = [
            KArg::U64(csr.col.ptr()),
            KArg::U64(csr.nnz),
            KArg::U64(outdeg.ptr()),
        ];
        // SAFETY: suite_pagerank_outdeg(const uint32_t*, uint64_t, uint32_t*) over the nnz
        // columns (each < rows) into the rows counters of `outdeg`; both outlive the wait.
        unsafe { c.helper("suite_pagerank_outdeg", &a)? };
        let a = [
            KArg::U64(outdeg.ptr()),
            KArg::U64(rows),
            KArg::U64(contrib.ptr()),
        ];
        // SAFETY: suite_pagerank_contrib(const uint32_t*, uint64_t, float*) over the rows
        // of `outdeg` and `contrib`, which outlive the wait.
        unsafe { c.helper("suite_pagerank_contrib", &a)? };
        c.wait()?;
        let mut contrib_host = vec![0f32; rows as usize];
        contrib.read(0, &mut contrib_host)?;
        Ok(Pagerank {
            workload: Workload {
                kernel: Kernel::Pagerank,
                masters: graph_masters(rows, csr.nnz, csr.rowptr, csr.col),
                full_work: csr.nnz,
            },
            contrib,
            contrib_host,
            base: (1.0 - DAMP) / rows as f32,
            next: RowResults::new(c, Kernel::Pagerank, csr.rowptr_host)?,
        })
    }
}

impl Bench for Pagerank {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let (contrib, next, base) = (self.contrib.ptr(), self.next.buf.ptr(), self.base);
        // SAFETY: suite_pagerank_<form>(ROW, COL, const float*, float*, float, float,
        // uint64_t, uint64_t) with ROW/COL the form's u64/u32 storage arrays (rows + 1
        // row pointers, nnz columns each < rows); contrib and next hold rows floats; every
        // buffer outlives the run.
        let run = unsafe {
            x.timed_launches(
                Kernel::Pagerank,
                self.next.rows(),
                BLOCK as u64,
                |v0, v1| {
                    [
                        st[0],
                        st[1],
                        KArg::U64(contrib),
                        KArg::U64(next),
                        KArg::F32(base),
                        KArg::F32(DAMP),
                        KArg::U64(v0),
                        KArg::U64(v1),
                    ]
                },
            )?
        };
        // Work: the in-edges of the vertices done.
        Ok(self.next.finish(run))
    }

    fn verify(&mut self, _x: &Exec, _st: &[KArg], v: Variant) -> Result<(u64, Vec<String>)> {
        let (m, contrib, base) = (&self.workload.masters, &self.contrib_host, self.base);
        let replay = |rowptr: &[u64], r: u64| {
            let cols: Vec<u32> = row_of(rowptr, &m[1].buf, r)?;
            Ok(pull_rank(&cols, contrib, base, DAMP))
        };
        self.next
            .verify(v, SAMPLES, replay, "the new ranks", "vertices")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_rank_adds_in_order_then_fuses() {
        let contrib = [0.25f32, 1e-8, 3.0, 0.5];
        // In order: ((0 + 0.25) + 1e-8) + 3.0, then 0.85 * s + base in one rounding.
        let s = ((0f32 + 0.25) + 1e-8) + 3.0;
        assert_eq!(
            pull_rank(&[0, 1, 2], &contrib, 0.1, 0.85).to_bits(),
            0.85f32.mul_add(s, 0.1).to_bits()
        );
        // A vertex without in-edges gets the base alone.
        assert_eq!(pull_rank(&[], &contrib, 0.1, 0.85), 0.1);
        // Repeated neighbours count each time.
        assert_eq!(pull_rank(&[3, 3], &contrib, 0.0, 1.0), 1.0);
    }
}
