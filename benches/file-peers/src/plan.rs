//! Which pieces each thread reads: the offset rule every peer shares (and
//! `--emit-offsets` writes down for kvikio_read.py).
//!
//! Random mode: piece `i` of the run is block `splitmix64(seed, i) mod blocks`, and
//! thread `t` of `T` reads pieces `t, t + T, t + 2T, ...`; so `--ops N` reads pieces
//! `0..N` whatever the thread count. Sequential mode: the blocks are cut into `T`
//! contiguous regions, thread `t` reads its own from the start and wraps around.

use anyhow::{bail, Context, Result};
use std::io::{BufWriter, Write};
use std::path::Path;

/// Random or sequential pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Rand,
    Seq,
}

impl Mode {
    /// As the JSON line names it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rand => "randread",
            Mode::Seq => "seqread",
        }
    }
}

/// The pieces of one run over a file.
#[derive(Clone, Debug)]
pub struct Plan {
    pub mode: Mode,
    /// Bytes per piece; pieces start at multiples of it.
    pub bs: u64,
    /// Whole pieces in the file (a partial last one is never read).
    pub blocks: u64,
    pub threads: usize,
    pub seed: u64,
}

impl Plan {
    /// The plan for a file of `file_size` bytes.
    pub fn new(mode: Mode, bs: u64, file_size: u64, threads: usize, seed: u64) -> Result<Plan> {
        if bs == 0 {
            bail!("--bs 0: a piece needs at least one byte");
        }
        if threads == 0 {
            bail!("--threads 0: at least one thread");
        }
        let blocks = file_size / bs;
        if blocks == 0 {
            bail!("the file ({file_size} B) holds no whole piece of {bs} B");
        }
        if mode == Mode::Seq && blocks < threads as u64 {
            bail!(
                "--seq: the file ({file_size} B) holds {blocks} pieces of {bs} B, fewer \
                 than the {threads} threads that each need a region"
            );
        }
        Ok(Plan {
            mode,
            bs,
            blocks,
            threads,
            seed,
        })
    }

    /// The offset of thread `t`'s `k`-th piece.
    pub fn offset(&self, t: usize, k: u64) -> u64 {
        match self.mode {
            Mode::Rand => self.random_offset(t as u64 + k * self.threads as u64),
            Mode::Seq => {
                let (start, len) = self.region(t);
                (start + k % len) * self.bs
            }
        }
    }

    /// The offset of piece `i` of a random run.
    pub fn random_offset(&self, i: u64) -> u64 {
        let r = splitmix64(
            self.seed
                .wrapping_add(i.wrapping_add(1).wrapping_mul(GOLDEN)),
        );
        let block = ((r as u128 * self.blocks as u128) >> 64) as u64;
        block * self.bs
    }

    /// Thread `t`'s region in sequential mode: first block and block count (> 0).
    fn region(&self, t: usize) -> (u64, u64) {
        let at = |t: usize| (self.blocks as u128 * t as u128 / self.threads as u128) as u64;
        (at(t), at(t + 1) - at(t))
    }

    /// How many of `ops` pieces in all thread `t` reads.
    pub fn quota(&self, t: usize, ops: u64) -> u64 {
        let n = self.threads as u64;
        ops / n + u64::from((t as u64) < ops % n)
    }
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The output function of SplitMix64.
fn splitmix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Writes the offsets of random pieces `0..ops` to `out` as little-endian u64s.
pub fn emit_offsets(plan: &Plan, ops: u64, out: &Path) -> Result<()> {
    if plan.mode != Mode::Rand {
        bail!("--emit-offsets writes random pieces; kvikio_read.py --large reads sequentially by itself");
    }
    let f = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut w = BufWriter::new(f);
    for i in 0..ops {
        w.write_all(&plan.random_offset(i).to_le_bytes())?;
    }
    w.flush()
        .with_context(|| format!("writing {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(mode: Mode, threads: usize) -> Plan {
        Plan::new(mode, 4096, 4096 * 1000 + 17, threads, 7).expect("plan")
    }

    #[test]
    fn random_offsets_are_aligned_inside_and_spread() {
        let p = plan(Mode::Rand, 3);
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            let o = p.random_offset(i);
            assert_eq!(o % 4096, 0);
            assert!(o / 4096 < 1000);
            seen.insert(o);
        }
        assert!(seen.len() > 990, "{} distinct blocks", seen.len());
    }

    #[test]
    fn threads_share_out_the_same_pieces_whatever_their_count() {
        let all = |threads: usize| {
            let p = plan(Mode::Rand, threads);
            let mut v: Vec<u64> = (0..threads)
                .flat_map(|t| {
                    let p = p.clone();
                    (0..p.quota(t, 101)).map(move |k| p.offset(t, k))
                })
                .collect();
            v.sort_unstable();
            v
        };
        let mut want: Vec<u64> = (0..101)
            .map(|i| plan(Mode::Rand, 1).random_offset(i))
            .collect();
        want.sort_unstable();
        assert_eq!(all(1), want);
        assert_eq!(all(4), want);
    }

    #[test]
    fn the_seed_changes_the_pieces() {
        let a = plan(Mode::Rand, 1);
        let b = Plan {
            seed: 8,
            ..a.clone()
        };
        assert!((0..16).any(|i| a.random_offset(i) != b.random_offset(i)));
    }

    #[test]
    fn sequential_regions_cover_the_file_once_and_wrap() {
        let p = plan(Mode::Seq, 3);
        let mut v: Vec<u64> = (0..3)
            .flat_map(|t| {
                let (_, len) = p.region(t);
                let p = p.clone();
                (0..len).map(move |k| p.offset(t, k))
            })
            .collect();
        v.sort_unstable();
        assert_eq!(v, (0..1000).map(|b| b * 4096).collect::<Vec<_>>());
        let (_, len) = p.region(1);
        assert_eq!(p.offset(1, len), p.offset(1, 0));
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(Plan::new(Mode::Rand, 0, 100, 1, 0).is_err());
        assert!(Plan::new(Mode::Rand, 4096, 100, 1, 0).is_err());
        assert!(Plan::new(Mode::Rand, 1, 100, 0, 0).is_err());
        assert!(Plan::new(Mode::Seq, 4096, 4096 * 2, 3, 0).is_err());
    }

    #[test]
    fn quotas_add_up() {
        let p = plan(Mode::Rand, 3);
        assert_eq!((0..3).map(|t| p.quota(t, 100)).sum::<u64>(), 100);
    }
}
