//! Host side of the graph example: Graph500 Kronecker and uniform random generators, a
//! reader of SNAP/GAP edge lists, the CSR build (undirected: both directions stored), and
//! the CPU references of BFS (levels) and connected components (smallest vertex id of
//! each component), all parallel over the host's cores.
//!
//! ```
//! let e = graph_analytics::kronecker(10, 16, 1, &|_| {}).unwrap();
//! let g = graph_analytics::build_csr(1 << 10, e, false, &|_| {}).unwrap();
//! let src = graph_analytics::pick_source(&g, 1).unwrap();
//! let levels = graph_analytics::bfs_levels(&g, src);
//! assert_eq!(levels[src as usize], 0);
//! ```

use anyhow::{bail, Context, Result};
use example_support::SplitMix64;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Edges generated per block (each block has its own random stream).
const BLOCK_EDGES: u64 = 1 << 20;

/// A graph in compressed sparse row form: vertex v's neighbours are
/// `edges[offsets[v]..offsets[v + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Csr {
    /// vertices + 1 offsets into `edges`.
    pub offsets: Vec<u64>,
    /// Neighbour lists, one after the other.
    pub edges: Vec<u32>,
}

impl Csr {
    /// Vertices.
    pub fn vertices(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
    /// Directed edge entries (twice the undirected edges without self loops).
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }
    /// Neighbours of `v` (with repeats for duplicate edges).
    pub fn degree(&self, v: u32) -> u64 {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }
    /// The neighbours of `v`.
    pub fn neighbours(&self, v: u32) -> &[u32] {
        &self.edges[self.offsets[v as usize] as usize..self.offsets[v as usize + 1] as usize]
    }
    /// Offsets monotone and ending at the edge count, every edge a vertex.
    pub fn validate(&self) -> Result<()> {
        if self.offsets.first() != Some(&0)
            || self.offsets.last() != Some(&(self.edges.len() as u64))
        {
            bail!("offsets must start at 0 and end at the edge count");
        }
        if self.offsets.windows(2).any(|w| w[0] > w[1]) {
            bail!("offsets are not monotone");
        }
        let n = self.vertices() as u32;
        if let Some(e) = self.edges.par_iter().find_any(|&&e| e >= n) {
            bail!("edge to vertex {e} of {n}");
        }
        Ok(())
    }
}

/// The generators' random numbers: stream `stream` of `seed`.
fn rng(seed: u64, stream: u64) -> SplitMix64 {
    SplitMix64::new(seed, stream, 0x2545_F491_4F6C_DD1D)
}

/// `m` edges made block by block in parallel by `edge(rng)`, reproducible for any
/// thread count.
fn edges_by_blocks(
    m: u64,
    seed: u64,
    progress: &(dyn Fn(u64) + Sync),
    edge: impl Fn(&mut SplitMix64) -> (u32, u32) + Sync,
) -> Vec<(u32, u32)> {
    let done = AtomicU64::new(0);
    let mut out = vec![(0u32, 0u32); m as usize];
    out.par_chunks_mut(BLOCK_EDGES as usize)
        .enumerate()
        .for_each(|(b, chunk)| {
            let mut r = rng(seed, b as u64);
            for e in chunk.iter_mut() {
                *e = edge(&mut r);
            }
            progress(done.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64);
        });
    out
}

/// Graph500 Kronecker generator: 2^scale vertices, edgefactor x 2^scale undirected
/// edges, initiator A = 0.57, B = 0.19, C = 0.19 (D = 0.05) chosen bit by bit, then the
/// vertex ids scrambled by a random permutation so that degree does not follow the id.
pub fn kronecker(
    scale: u32,
    edgefactor: u32,
    seed: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<(u32, u32)>> {
    if scale == 0 || scale > 31 {
        bail!("scale {scale} must be in 1..=31");
    }
    let m = (edgefactor as u64) << scale;
    // Quadrant thresholds on 16-bit uniforms: A, A + B, A + B + C.
    const T: [u64; 3] = [37_355, 49_807, 62_259];
    let mut edges = edges_by_blocks(m, seed, progress, |r| {
        let (mut u, mut v) = (0u32, 0u32);
        let mut bits = 0u64;
        for level in 0..scale {
            if level % 4 == 0 {
                bits = r.next_u64();
            }
            let x = (bits >> (16 * (level % 4))) & 0xffff;
            let (a, b) = if x < T[0] {
                (0, 0)
            } else if x < T[1] {
                (0, 1)
            } else if x < T[2] {
                (1, 0)
            } else {
                (1, 1)
            };
            u = (u << 1) | a;
            v = (v << 1) | b;
        }
        (u, v)
    });
    // The permutation: Fisher-Yates with its own stream.
    let n = 1usize << scale;
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut r = rng(seed, u64::MAX);
    for i in (1..n).rev() {
        perm.swap(i, r.below(i as u64 + 1) as usize);
    }
    edges
        .par_iter_mut()
        .for_each(|e| *e = (perm[e.0 as usize], perm[e.1 as usize]));
    Ok(edges)
}

/// A uniform random graph: `m` undirected edges between uniformly chosen vertices of `n`.
pub fn uniform(
    n: u32,
    m: u64,
    seed: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<(u32, u32)>> {
    if n == 0 {
        bail!("a graph needs vertices");
    }
    Ok(edges_by_blocks(m, seed, progress, |r| {
        (r.below(n as u64) as u32, r.below(n as u64) as u32)
    }))
}

/// Reads a SNAP/GAP edge list: `u v` per line (whitespace separated, a third weight
/// column ignored), lines starting with `#` or `%` are comments. Returns (vertices =
/// largest id + 1, edges).
pub fn read_edge_list(path: &std::path::Path) -> Result<(u32, Vec<(u32, u32)>)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut edges = Vec::new();
    let mut max = 0u32;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with('%') {
            continue;
        }
        let mut w = l.split_whitespace();
        let mut id = || -> Result<u32> {
            let s = w.next().context("expected two vertex ids")?;
            let v: u64 = s
                .parse()
                .with_context(|| format!("`{s}` is not a vertex id"))?;
            u32::try_from(v)
                .ok()
                .filter(|&v| v < u32::MAX)
                .context("vertex id too large")
        };
        let (u, v) = (|| Ok::<_, anyhow::Error>((id()?, id()?)))()
            .with_context(|| format!("{}:{}: `{line}`", path.display(), i + 1))?;
        max = max.max(u).max(v);
        edges.push((u, v));
    }
    if edges.is_empty() {
        bail!("{}: no edges", path.display());
    }
    Ok((max + 1, edges))
}

/// The CSR of an undirected graph: each edge (u, v) stored in both directions, self loops
/// dropped, duplicates kept (as Graph500 does); lists in arbitrary order unless `sort`.
/// Parallel: degrees counted with atomics, a prefix sum, a scatter with atomic cursors.
pub fn build_csr(
    vertices: u32,
    edges: Vec<(u32, u32)>,
    sort: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Csr> {
    let n = vertices as usize;
    if let Some(e) = edges
        .par_iter()
        .find_any(|e| e.0 >= vertices || e.1 >= vertices)
    {
        bail!("edge {e:?} names a vertex outside 0..{vertices}");
    }
    let deg: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    edges.par_iter().filter(|e| e.0 != e.1).for_each(|&(u, v)| {
        deg[u as usize].fetch_add(1, Ordering::Relaxed);
        deg[v as usize].fetch_add(1, Ordering::Relaxed);
    });
    let mut offsets = vec![0u64; n + 1];
    for i in 0..n {
        offsets[i + 1] = offsets[i] + deg[i].load(Ordering::Relaxed) as u64;
    }
    drop(deg);
    let total = offsets[n] as usize;
    let cursor: Vec<AtomicU64> = offsets[..n].iter().map(|&o| AtomicU64::new(o)).collect();
    let out: Vec<AtomicU32> = (0..total)
        .into_par_iter()
        .map(|_| AtomicU32::new(0))
        .collect();
    let done = AtomicU64::new(0);
    edges.par_chunks(1 << 20).for_each(|c| {
        for &(u, v) in c.iter().filter(|e| e.0 != e.1) {
            out[cursor[u as usize].fetch_add(1, Ordering::Relaxed) as usize]
                .store(v, Ordering::Relaxed);
            out[cursor[v as usize].fetch_add(1, Ordering::Relaxed) as usize]
                .store(u, Ordering::Relaxed);
        }
        progress(done.fetch_add(c.len() as u64, Ordering::Relaxed) + c.len() as u64);
    });
    drop(edges);
    drop(cursor);
    let mut flat: Vec<u32> = out.into_par_iter().map(AtomicU32::into_inner).collect();
    if sort {
        let mut lists: Vec<&mut [u32]> = Vec::with_capacity(n);
        let mut rest = flat.as_mut_slice();
        for i in 0..n {
            let (h, t) = rest.split_at_mut((offsets[i + 1] - offsets[i]) as usize);
            lists.push(h);
            rest = t;
        }
        lists.par_iter_mut().for_each(|l| l.sort_unstable());
    }
    Ok(Csr {
        offsets,
        edges: flat,
    })
}

/// CPU reference BFS: the level of every vertex from `source` (u32::MAX: unreachable),
/// level-synchronous and parallel.
pub fn bfs_levels(g: &Csr, source: u32) -> Vec<u32> {
    let n = g.vertices();
    let level: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(u32::MAX)).collect();
    if (source as usize) >= n {
        return vec![u32::MAX; n];
    }
    level[source as usize].store(0, Ordering::Relaxed);
    let mut front = vec![source];
    let mut l = 0u32;
    while !front.is_empty() {
        front = front
            .par_iter()
            .fold(Vec::new, |mut next, &v| {
                for &u in g.neighbours(v) {
                    if level[u as usize].load(Ordering::Relaxed) == u32::MAX
                        && level[u as usize]
                            .compare_exchange(u32::MAX, l + 1, Ordering::Relaxed, Ordering::Relaxed)
                            .is_ok()
                    {
                        next.push(u);
                    }
                }
                next
            })
            .reduce(Vec::new, |mut a, mut b| {
                a.append(&mut b);
                a
            });
        l += 1;
    }
    level.into_iter().map(AtomicU32::into_inner).collect()
}

/// Root of `x` with path halving; roots are the smallest id of their tree.
fn find(p: &[AtomicU32], mut x: u32) -> u32 {
    loop {
        let px = p[x as usize].load(Ordering::Relaxed);
        if px == x {
            return x;
        }
        let gp = p[px as usize].load(Ordering::Relaxed);
        let _ = p[x as usize].compare_exchange(px, gp, Ordering::Relaxed, Ordering::Relaxed);
        x = gp;
    }
}

/// CPU reference connected components: for every vertex the smallest vertex id of its
/// component (a concurrent union-find, linking the larger root under the smaller).
pub fn cc_labels(g: &Csr) -> Vec<u32> {
    let n = g.vertices();
    let p: Vec<AtomicU32> = (0..n as u32).map(AtomicU32::new).collect();
    (0..n as u32).into_par_iter().for_each(|v| {
        for &u in g.neighbours(v) {
            loop {
                let (a, b) = (find(&p, v), find(&p, u));
                if a == b {
                    break;
                }
                let (hi, lo) = if a > b { (a, b) } else { (b, a) };
                if p[hi as usize]
                    .compare_exchange(hi, lo, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
            }
        }
    });
    (0..n as u32).into_par_iter().map(|v| find(&p, v)).collect()
}

/// Differences between a reference and a GPU result: how many, and the first few as
/// (vertex, expected, got).
pub fn compare(expected: &[u32], got: &[u32]) -> (usize, Vec<(usize, u32, u32)>) {
    if expected.len() != got.len() {
        return (
            expected.len().max(got.len()),
            vec![(usize::MAX, expected.len() as u32, got.len() as u32)],
        );
    }
    let n = expected.par_iter().zip(got).filter(|(a, b)| a != b).count();
    let first = expected
        .iter()
        .zip(got)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .take(5)
        .map(|(i, (a, b))| (i, *a, *b))
        .collect();
    (n, first)
}

/// A source vertex with at least one neighbour, chosen from `seed` (Graph500 picks
/// random non-isolated roots); `None` when the graph has no edges.
pub fn pick_source(g: &Csr, seed: u64) -> Option<u32> {
    let n = g.vertices() as u64;
    if n == 0 || g.edge_count() == 0 {
        return None;
    }
    let mut r = rng(seed, 0xB0F5);
    for _ in 0..1000 {
        let v = r.below(n) as u32;
        if g.degree(v) > 0 {
            return Some(v);
        }
    }
    (0..n as u32).find(|&v| g.degree(v) > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two components {0, 1, 2, 3} (a path with a duplicate edge) and {4, 5}, a self loop
    /// on 6 (isolated), vertex 7 alone.
    fn small() -> Csr {
        build_csr(
            8,
            vec![(0, 1), (1, 2), (2, 3), (1, 2), (5, 4), (6, 6)],
            true,
            &|_| {},
        )
        .unwrap()
    }

    #[test]
    fn csr_of_a_small_graph() {
        let g = small();
        g.validate().unwrap();
        assert_eq!(g.edge_count(), 10);
        assert_eq!(g.neighbours(1), &[0, 2, 2]);
        assert_eq!(g.degree(6), 0);
        assert!(build_csr(3, vec![(0, 3)], false, &|_| {}).is_err());
    }

    #[test]
    fn bfs_and_cc_of_a_small_graph() {
        let g = small();
        let m = u32::MAX;
        assert_eq!(bfs_levels(&g, 0), vec![0, 1, 2, 3, m, m, m, m]);
        assert_eq!(cc_labels(&g), vec![0, 0, 0, 0, 4, 4, 6, 7]);
        assert_eq!(compare(&[1, 2, 3], &[1, 5, 3]), (1, vec![(1, 2, 5)]));
    }

    fn naive_bfs(g: &Csr, s: u32) -> Vec<u32> {
        let mut l = vec![u32::MAX; g.vertices()];
        let mut q = std::collections::VecDeque::from([s]);
        l[s as usize] = 0;
        while let Some(v) = q.pop_front() {
            for &u in g.neighbours(v) {
                if l[u as usize] == u32::MAX {
                    l[u as usize] = l[v as usize] + 1;
                    q.push_back(u);
                }
            }
        }
        l
    }

    fn naive_cc(g: &Csr) -> Vec<u32> {
        let mut c: Vec<u32> = (0..g.vertices() as u32).collect();
        loop {
            let mut moved = false;
            for v in 0..g.vertices() as u32 {
                for &u in g.neighbours(v) {
                    let m = c[v as usize].min(c[u as usize]);
                    if c[v as usize] != m || c[u as usize] != m {
                        c[v as usize] = m;
                        c[u as usize] = m;
                        moved = true;
                    }
                }
            }
            if !moved {
                return c;
            }
        }
    }

    #[test]
    fn kronecker_is_deterministic_and_matches_naive_references() {
        let a = kronecker(12, 8, 3, &|_| {}).unwrap();
        assert_eq!(a.len(), 8 << 12);
        assert_eq!(a, kronecker(12, 8, 3, &|_| {}).unwrap());
        let g = build_csr(1 << 12, a, false, &|_| {}).unwrap();
        g.validate().unwrap();
        let s = pick_source(&g, 1).unwrap();
        assert_eq!(bfs_levels(&g, s), naive_bfs(&g, s));
        assert_eq!(cc_labels(&g), naive_cc(&g));
        // Power law: the largest degree is far above the mean (16).
        let max = (0..1u32 << 12).map(|v| g.degree(v)).max().unwrap();
        assert!(max > 100, "max degree {max}");
        assert!(kronecker(0, 16, 1, &|_| {}).is_err());
    }

    #[test]
    fn uniform_graph_components() {
        let e = uniform(5000, 3000, 2, &|_| {}).unwrap();
        let g = build_csr(5000, e, false, &|_| {}).unwrap();
        assert_eq!(cc_labels(&g), naive_cc(&g));
    }

    #[test]
    fn edge_list_files() {
        let p = std::env::temp_dir().join(format!("edges-{}.el", std::process::id()));
        std::fs::write(&p, "# SNAP\n% GAP\n0 1\n1\t2 0.5\n\n5 2\n").unwrap();
        let (n, e) = read_edge_list(&p).unwrap();
        assert_eq!((n, e), (6, vec![(0, 1), (1, 2), (5, 2)]));
        std::fs::write(&p, "0 1\n1 x\n").unwrap();
        let err = read_edge_list(&p).unwrap_err();
        assert!(format!("{err:#}").contains(":2:"), "{err:#}");
        std::fs::remove_file(&p).ok();
    }
}
