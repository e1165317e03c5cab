//! bfs: top-down breadth-first search from vertex 0, a warp per frontier vertex, a host
//! loop over levels (storage arrays rowptr and col; the distances and frontiers stay in GPU
//! memory), checked against the hbm run's distances.

use super::bench::{no_reference, Bench, Workload};
use super::data::{gen_csr, graph_masters};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK_WARPS};
use super::options::{Kernel, Variant};
use bam::cuda::DeviceBuffer;
use bam::{Error, Result};

/// Frontier vertices per launch of a BFS level when a budgeted variant's runs are split
/// (the time budget is checked between them).
const BUDGET_BFS_CHUNK: u64 = 65536;
/// BFS levels the level-size table holds.
const MAX_LEVELS: u32 = 1 << 16;

pub(super) struct Bfs {
    /// Full work: the nonzeros until the first complete run gives the edges expanded.
    workload: Workload,
    n: u64,
    rowptr_host: Vec<u64>,
    dist: DeviceBuffer,
    front: [DeviceBuffer; 2],
    counts: DeviceBuffer,
    /// Edges expanded at each level (from the first complete run).
    level_edges: Option<Vec<u64>>,
    dist_ref: Option<Vec<u32>>,
    /// The last run: levels fully expanded, frontier entries of the next one expanded,
    /// and whether it ran to the end.
    levels_done: u32,
    partial: u64,
    complete: bool,
}

/// The distance of a vertex not reached.
const UNSEEN: u32 = u32::MAX;

impl Bfs {
    pub(super) fn new(c: &Ctx, rows: u64) -> Result<Self> {
        let csr = gen_csr(c, rows, c.o.degree, c.o.seed ^ 0xbf5)?;
        drop(csr.val);
        let buf = |bytes: u64| DeviceBuffer::zeroed(c.gpu, bytes as usize);
        Ok(Bfs {
            workload: Workload {
                kernel: Kernel::Bfs,
                masters: graph_masters(rows, csr.nnz, csr.rowptr, csr.col),
                full_work: csr.nnz,
            },
            n: rows,
            rowptr_host: csr.rowptr_host,
            dist: buf(4 * rows)?,
            front: [buf(4 * rows)?, buf(4 * rows)?],
            counts: buf(4 * (MAX_LEVELS as u64 + 1))?,
            level_edges: None,
            dist_ref: None,
            levels_done: 0,
            partial: 0,
            complete: false,
        })
    }

    fn degree(&self, v: u32) -> u64 {
        self.rowptr_host[v as usize + 1] - self.rowptr_host[v as usize]
    }
}

impl Bench for Bfs {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let name = x.name(Kernel::Bfs.symbol());
        let resident = x.grid(&name)? as u64;
        // Start state, before the timing: dist = UNSEEN but dist[0] = 0, frontier {0}.
        let init = [
            KArg::U64(self.dist.ptr()),
            KArg::U64(self.n),
            KArg::U64(self.front[0].ptr()),
            KArg::U32(0),
            KArg::U64(self.counts.ptr()),
            KArg::U32(MAX_LEVELS + 1),
        ];
        // SAFETY: suite_bfs_init(uint32_t*, uint64_t, uint32_t*, uint32_t, uint32_t*,
        // uint32_t): dist and front[0] hold n entries, counts MAX_LEVELS + 1; they outlive
        // the run.
        unsafe { x.launch("suite_bfs_init", x.gpu.sms * 8, &init)? };
        let (dist, counts) = (self.dist.ptr(), self.counts.ptr());
        let fronts = [self.front[0].ptr(), self.front[1].ptr()];
        let counts_buf = &self.counts;
        let chunk = if x.chunking() {
            BUDGET_BFS_CHUNK
        } else {
            u64::MAX
        };
        let (run, (levels, partial)) = x.timed(|| {
            let (mut level, mut size) = (0u32, 1u64);
            let mut partial = 0;
            while size > 0 {
                if level + 1 >= MAX_LEVELS {
                    return Err(Error::InvalidArgument(format!(
                        "bfs: more than {MAX_LEVELS} levels"
                    )));
                }
                let mut k0 = 0;
                while k0 < size {
                    if (level > 0 || k0 > 0) && x.expired() {
                        break;
                    }
                    let k1 = size.min(k0.saturating_add(chunk));
                    let grid = resident.min((k1 - k0).div_ceil(BLOCK_WARPS)) as u32;
                    let a = [
                        st[0],
                        st[1],
                        KArg::U64(dist),
                        KArg::U64(fronts[level as usize % 2]),
                        KArg::U64(k0),
                        KArg::U64(k1),
                        KArg::U64(fronts[(level as usize + 1) % 2]),
                        KArg::U64(counts),
                        KArg::U32(level),
                    ];
                    // SAFETY: suite_bfs_<form>(ROW, COL, uint32_t*, const uint32_t*, uint64_t,
                    // uint64_t, uint32_t*, uint32_t*, uint32_t) with ROW/COL the form's u64/u32
                    // storage arrays; the frontiers hold n entries (each vertex enters once),
                    // counts MAX_LEVELS + 1 > level + 1; everything outlives the run.
                    unsafe { x.launch(&name, grid, &a)? };
                    if x.chunking() {
                        x.wait()?;
                    }
                    k0 = k1;
                }
                if k0 < size {
                    partial = k0;
                    break;
                }
                x.wait()?;
                let mut next = [0u32];
                counts_buf.read(4 * (level as usize + 1), &mut next)?;
                size = next[0] as u64;
                level += 1;
            }
            Ok((0, size == 0, (level, partial)))
        })?;
        self.levels_done = levels;
        self.partial = partial;
        self.complete = run.complete;
        // Edges expanded: from the levels of the first complete run's distances.
        if run.complete && self.level_edges.is_none() {
            let mut d = vec![0u32; self.n as usize];
            self.dist.read(0, &mut d)?;
            let mut per = vec![0u64; levels as usize + 1];
            for (v, &l) in d.iter().enumerate() {
                if l != UNSEEN && (l as usize) < per.len() {
                    per[l as usize] += self.degree(v as u32);
                }
            }
            self.workload.full_work = per.iter().sum();
            self.level_edges = Some(per);
        }
        let per = self
            .level_edges
            .as_ref()
            .ok_or_else(|| no_reference(Kernel::Bfs))?;
        let mut work: u64 = per.iter().take(levels as usize).sum();
        if partial > 0 {
            // The frontier entries of the cut level that were expanded.
            let mut f = vec![0u32; partial as usize];
            self.front[levels as usize % 2].read(0, &mut f)?;
            work += f.iter().map(|&v| self.degree(v)).sum::<u64>();
        }
        Ok(Run { work, ..run })
    }

    fn verify(&mut self, _x: &Exec, _st: &[KArg], v: Variant) -> Result<(u64, Vec<String>)> {
        let mut d = vec![0u32; self.n as usize];
        self.dist.read(0, &mut d)?;
        if v == Variant::Hbm {
            // Internal consistency only: the source at 0, every level below the depth.
            let reached = d.iter().filter(|&&x| x != UNSEEN).count();
            let wrong = (d[0] != 0) as u64
                + d.iter()
                    .filter(|&&x| x != UNSEEN && x >= self.levels_done)
                    .count() as u64;
            self.dist_ref = Some(d);
            return Ok((
                wrong,
                vec![format!(
                    "{reached} of {} vertices reached in {} levels; dist[0] = 0 and every distance below the depth checked",
                    self.n, self.levels_done
                )],
            ));
        }
        let r = self
            .dist_ref
            .as_ref()
            .ok_or_else(|| no_reference(Kernel::Bfs))?;
        let (l, complete) = (self.levels_done, self.complete);
        // A cut run expanded levels 0..l whole (so every distance up to l is final) and
        // part of level l (so a vertex at l + 1 may be reached or not); nothing beyond.
        let bad = |got: u32, want: u32| {
            if complete || (want != UNSEEN && want <= l) {
                got != want
            } else if want == l + 1 {
                got != want && got != UNSEEN
            } else {
                got != UNSEEN
            }
        };
        let wrong = d.iter().zip(r).filter(|&(&g, &w)| bad(g, w)).count() as u64;
        let mut notes = vec!["checked: every distance against the hbm run".to_string()];
        if !complete {
            notes.push(format!(
                "the last run expanded {l} levels and {} vertices of the next; distances checked up to there",
                self.partial
            ));
        }
        Ok((wrong, notes))
    }
}
