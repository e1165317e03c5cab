//! embedding-bag: sums of 32 random rows of an embedding table (512-byte rows of 128
//! f32, the lookup of a recommendation model's sparse features), a warp per bag (storage
//! array table; the indices and the sums stay in GPU memory), checked bit for bit.

use super::bench::{bitwise_against_hbm, Bench, Workload};
use super::data::{generated_below, Elem, Master};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK_WARPS};
use super::options::{Kernel, Variant, EMB_PER_BAG, EMB_ROW_BYTES};
use bam::cuda::DeviceBuffer;
use bam::Result;

/// Columns of a row (suite.cu's EMB_DIM).
const DIM: usize = (EMB_ROW_BYTES / 4) as usize;
/// Bags whose sums the host recomputes to check the `hbm` run.
const SAMPLES: u64 = 256;

/// A bag's sum as suite.cu's embag computes it: column by column, the rows added in order
/// from 0. Bitwise what the GPU writes.
fn bag_sum(rows: &[[f32; DIM]]) -> [f32; DIM] {
    let mut acc = [0f32; DIM];
    for r in rows {
        for (a, v) in acc.iter_mut().zip(r) {
            *a += v;
        }
    }
    acc
}

pub(super) struct EmbeddingBag {
    workload: Workload,
    bags: u64,
    idx: DeviceBuffer,
    out: DeviceBuffer,
    out_ref: Option<Vec<f32>>,
    bags_done: u64,
}

impl EmbeddingBag {
    pub(super) fn new(c: &Ctx, rows: u64, bags: u64) -> Result<Self> {
        let seed = c.o.seed ^ 0xe3b;
        let table = Master::generated(c, "table", Elem::F32, rows * DIM as u64, seed)?;
        let lookups = bags * EMB_PER_BAG;
        let idx = generated_below(c, lookups, rows, 0, seed.rotate_left(23))?;
        Ok(EmbeddingBag {
            workload: Workload {
                kernel: Kernel::EmbeddingBag,
                masters: vec![table],
                full_work: lookups,
            },
            bags,
            idx,
            out: DeviceBuffer::zeroed(c.gpu, (bags as usize) * DIM * 4)?,
            out_ref: None,
            bags_done: 0,
        })
    }
}

impl Bench for EmbeddingBag {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let (idx, out) = (self.idx.ptr(), self.out.ptr());
        // SAFETY: suite_embag_<form>(A, const uint32_t*, uint32_t, float*, uint64_t,
        // uint64_t) with A the form's f32 table of rows x 128 elements, `idx` bags x 32
        // row indices (each < rows), `out` bags x 128 sums; all outlive the run.
        let run = unsafe {
            x.timed_launches(Kernel::EmbeddingBag, self.bags, BLOCK_WARPS, |b0, b1| {
                [
                    st[0],
                    KArg::U64(idx),
                    KArg::U32(EMB_PER_BAG as u32),
                    KArg::U64(out),
                    KArg::U64(b0),
                    KArg::U64(b1),
                ]
            })?
        };
        self.bags_done = run.work;
        Ok(Run {
            work: run.work * EMB_PER_BAG,
            ..run
        })
    }

    fn verify(&mut self, _x: &Exec, _st: &[KArg], v: Variant) -> Result<(u64, Vec<String>)> {
        let mut out = vec![0f32; self.bags as usize * DIM];
        self.out.read(0, &mut out)?;
        if v == Variant::Hbm {
            let mut wrong = 0;
            let per = EMB_PER_BAG as usize;
            let mut idx = vec![0u32; per];
            for k in 0..SAMPLES.min(self.bags) {
                let b = (k * self.bags / SAMPLES.min(self.bags)) as usize;
                self.idx.read(4 * b * per, &mut idx)?;
                let mut rows = vec![[0f32; DIM]; per];
                for (row, &i) in rows.iter_mut().zip(&idx) {
                    self.workload.masters[0]
                        .buf
                        .read(i as usize * EMB_ROW_BYTES as usize, &mut row[..])?;
                }
                let want = bag_sum(&rows);
                let got = &out[b * DIM..(b + 1) * DIM];
                wrong += got
                    .iter()
                    .zip(&want)
                    .any(|(g, w)| g.to_bits() != w.to_bits()) as u64;
            }
            self.out_ref = Some(out);
            return Ok((
                wrong,
                vec![format!(
                    "checked: {} bags recomputed on the host, bit for bit (wrong counts bags)",
                    SAMPLES.min(self.bags)
                )],
            ));
        }
        bitwise_against_hbm(
            Kernel::EmbeddingBag,
            self.out_ref.as_ref(),
            &out,
            DIM,
            self.bags_done as usize,
            "the bags' sums (a wrong bag has any sum off)",
            "bags",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_bag_adds_rows_in_order() {
        let mut a = [0f32; DIM];
        let mut b = [0f32; DIM];
        let mut c = [0f32; DIM];
        a[0] = 1e8;
        b[0] = 1.0;
        c[0] = -1e8;
        a[127] = 0.5;
        // (1e8 + 1) rounds to 1e8 in f32, so in order column 0 sums to 0; another order
        // (a + c first) would give 1.
        let s = bag_sum(&[a, b, c]);
        assert_eq!(s[0], 0.0);
        assert_eq!(s[127], 0.5);
        assert_eq!(bag_sum(&[a, c, b])[0], 1.0);
        assert_eq!(bag_sum(&[]), [0f32; DIM]);
    }
}
