//! spmv: CSR sparse matrix times vector, a warp per row (storage arrays col and val; rowptr,
//! x and y stay in GPU memory), checked bit for bit.

use super::bench::{Bench, RowResults, Workload};
use super::data::{gen_csr, generated, row_of, Elem, Master};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK_WARPS};
use super::options::{Kernel, Variant};
use bam::cuda::DeviceBuffer;
use bam::Result;

/// Rows of the SpMV result the host recomputes to check the `hbm` run.
const SPMV_SAMPLES: u64 = 256;

/// The SpMV result of one row as suite.cu's warp computes it: lane l accumulates
/// nonzeros l, l + 32, ... with fused multiply-adds, then the shuffle-down tree (offsets
/// 16, 8, 4, 2, 1) adds the lanes; lane 0's value. Bitwise what the GPU writes.
pub fn warp_row_sum(cols: &[u32], vals: &[f32], x: &[f32]) -> f32 {
    let mut lane = [0f32; 32];
    for (k, (&c, &v)) in cols.iter().zip(vals).enumerate() {
        lane[k % 32] = v.mul_add(x[c as usize], lane[k % 32]);
    }
    for off in [16, 8, 4, 2, 1] {
        // Lane l reads lane l + off's value from before this step; ascending l sees it
        // unchanged. Lanes past 31 - off keep their own (only lane 0's result matters).
        for l in 0..32 - off {
            lane[l] += lane[l + off];
        }
    }
    lane[0]
}

pub(super) struct Spmv {
    workload: Workload,
    rowptr: DeviceBuffer,
    x: DeviceBuffer,
    x_host: Vec<f32>,
    /// y.
    y: RowResults,
}

impl Spmv {
    pub(super) fn new(c: &Ctx, rows: u64) -> Result<Self> {
        let seed = c.o.seed ^ 0x5b5f;
        let csr = gen_csr(c, rows, c.o.degree, seed)?;
        let x = generated(c, Elem::F32, rows, seed ^ 0x1111)?;
        let mut x_host = vec![0f32; rows as usize];
        x.read(0, &mut x_host)?;
        Ok(Spmv {
            workload: Workload {
                kernel: Kernel::Spmv,
                masters: vec![
                    Master {
                        name: "col",
                        elem: Elem::U32,
                        len: csr.nnz.max(1),
                        buf: csr.col,
                    },
                    Master {
                        name: "val",
                        elem: Elem::F32,
                        len: csr.nnz.max(1),
                        buf: csr.val,
                    },
                ],
                full_work: csr.nnz,
            },
            rowptr: csr.rowptr,
            x,
            x_host,
            y: RowResults::new(c, Kernel::Spmv, csr.rowptr_host)?,
        })
    }
}

impl Bench for Spmv {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let (rowptr, xv, y) = (self.rowptr.ptr(), self.x.ptr(), self.y.buf.ptr());
        // SAFETY: suite_spmv_<form>(const uint64_t*, COL, VAL, const float*, float*,
        // uint64_t, uint64_t) with COL/VAL the form's u32/f32 arrays (pointers or
        // bam_array_views of the storage arrays); every buffer outlives the run.
        let run = unsafe {
            x.timed_launches(Kernel::Spmv, self.y.rows(), BLOCK_WARPS, |r0, r1| {
                [
                    KArg::U64(rowptr),
                    st[0],
                    st[1],
                    KArg::U64(xv),
                    KArg::U64(y),
                    KArg::U64(r0),
                    KArg::U64(r1),
                ]
            })?
        };
        // Work: the nonzeros of the rows done.
        Ok(self.y.finish(run))
    }

    fn verify(&mut self, _x: &Exec, _st: &[KArg], v: Variant) -> Result<(u64, Vec<String>)> {
        // The hbm run against the host's replay of the warp's arithmetic.
        let (m, x_host) = (&self.workload.masters, &self.x_host);
        let replay = |rowptr: &[u64], r: u64| {
            let cols: Vec<u32> = row_of(rowptr, &m[0].buf, r)?;
            let vals: Vec<f32> = row_of(rowptr, &m[1].buf, r)?;
            Ok(warp_row_sum(&cols, &vals, x_host))
        };
        self.y.verify(v, SPMV_SAMPLES, replay, "y", "rows")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_spmv_replays_the_warp() {
        // 40 nonzeros: lanes 0..8 take two, the others one.
        let x: Vec<f32> = (0..50).map(|i| 0.5 + i as f32 / 64.0).collect();
        let cols: Vec<u32> = (0..40).map(|j| (j * 7 % 50) as u32).collect();
        let vals: Vec<f32> = (0..40).map(|j| 1.0 + j as f32 / 3.0).collect();
        let mut lane = [0f32; 32];
        for k in 0..40 {
            lane[k % 32] = vals[k].mul_add(x[cols[k] as usize], lane[k % 32]);
        }
        // The tree, written out: lane 0 ends with ((l0 + l16) + (l8 + l24)) + ...
        let mut t = lane;
        for off in [16, 8, 4, 2, 1] {
            let prev = t;
            for l in 0..32 {
                if l + off < 32 {
                    t[l] = prev[l] + prev[l + off];
                }
            }
        }
        assert_eq!(warp_row_sum(&cols, &vals, &x).to_bits(), t[0].to_bits());
        assert_eq!(warp_row_sum(&[], &[], &x), 0.0);
        let exact: f64 = (0..40)
            .map(|k| vals[k] as f64 * x[cols[k] as usize] as f64)
            .sum();
        assert!((warp_row_sum(&cols, &vals, &x) as f64 - exact).abs() < 1e-3);
    }
}
