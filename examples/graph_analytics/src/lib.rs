//! Host side of the graph example: the Graph500 Kronecker and uniform random generators,
//! a reader of SNAP/GAP edge lists, the CSR build (undirected: both directions stored),
//! and the CPU references of BFS (levels) and connected components (smallest vertex id
//! of each component), all parallel over the host's cores with rayon.
//!
//! Sizes: at Graph500 scale 26 (edge factor 16) the edge list is 1.07 G pairs (8.6 GB)
//! and the CSR 2.1 G `u32` entries (8.6 GB) plus 0.5 GB of offsets. The generators
//! write their output once, in place; [`build_csr`] holds the pairs, the entries and
//! the offsets at its peak (about 2x the CSR) and nothing else of that size.
//!
//! ```
//! let e = graph_analytics::kronecker(10, 16, 1, &|_| {}).unwrap();
//! let g = graph_analytics::build_csr(1 << 10, e, false, &|_| {}).unwrap();
//! let src = graph_analytics::pick_source(&g, 1).unwrap();
//! let levels = graph_analytics::bfs_levels(&g, src);
//! assert_eq!(levels[src as usize], 0);
//! ```

mod edge_list;
mod generate;

pub use edge_list::read_edge_list;
pub use generate::{kronecker, uniform};

use anyhow::{anyhow, bail, Result};
use example_support::SplitMix64;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// An undirected edge (or one direction of it) as two vertex ids.
pub type Edge = (u32, u32);

/// Items per parallel task of the passes over edge lists and vertex arrays: large
/// enough to make a task's overhead vanish, small enough to balance 16+ cores.
const TASK: usize = 1 << 16;

/// Adjacency entries below which a run of lists is sorted by one task.
const SORT_TASK: usize = 1 << 15;

/// At most 2^RANGE_BITS vertex ranges in the CSR build (see [`route`]).
const RANGE_BITS: u32 = 8;

/// Entries per batch handed to a range in the CSR build.
const BATCH: usize = 512;

/// Domain of the random stream that picks BFS sources.
const SOURCE_DOMAIN: u64 = 0x3C6E_F372_FE94_F82B;

// The atomic views below rely on the atomics having the plain integers' alignment.
const _: () = assert!(std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>());
const _: () = assert!(std::mem::align_of::<AtomicU32>() == std::mem::align_of::<u32>());

/// `s` as atomics, to update it from many threads without a second array.
fn atomic_u64(s: &mut [u64]) -> &[AtomicU64] {
    // SAFETY: AtomicU64 has the size and bit validity of u64 and (checked above) its
    // alignment; the exclusive borrow of `s` lasts as long as the view, so nothing
    // reads or writes the integers other than through the atomics meanwhile.
    unsafe { &*(s as *mut [u64] as *const [AtomicU64]) }
}

/// `s` as atomics (see [`atomic_u64`]).
fn atomic_u32(s: &mut [u32]) -> &[AtomicU32] {
    // SAFETY: as in atomic_u64.
    unsafe { &*(s as *mut [u32] as *const [AtomicU32]) }
}

/// An error for a failed allocation of `len` items of `T` for `what`.
fn alloc_error<T>(what: &str, len: usize, e: impl std::fmt::Display) -> anyhow::Error {
    let gb = len as f64 * std::mem::size_of::<T>() as f64 / 1e9;
    anyhow!("cannot allocate {what} ({len} entries, {gb:.2} GB): {e}")
}

/// A vector of `len` copies of `value`, allocated fallibly and filled in parallel (so
/// that its pages are first touched by many threads).
pub(crate) fn filled_vec<T: Copy + Send + Sync>(
    len: usize,
    value: T,
    what: &str,
) -> Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|e| alloc_error::<T>(what, len, e))?;
    v.spare_capacity_mut()[..len]
        .par_chunks_mut(TASK)
        .for_each(|c| c.iter_mut().for_each(|x| _ = x.write(value)));
    // SAFETY: the first `len` entries were all written just above.
    unsafe { v.set_len(len) };
    Ok(v)
}

/// `m` edges made in parallel in blocks of `block`: block `b` comes from the
/// generator `make(b)`, so the result does not depend on the thread count.
/// `progress(edges_done)` is called after each block.
pub(crate) fn fill_by_blocks<G: FnMut() -> Edge>(
    m: u64,
    block: usize,
    what: &str,
    progress: &(dyn Fn(u64) + Sync),
    make: impl Fn(usize) -> G + Sync,
) -> Result<Vec<Edge>> {
    let len = usize::try_from(m).map_err(|e| alloc_error::<Edge>(what, usize::MAX, e))?;
    let mut v: Vec<Edge> = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|e| alloc_error::<Edge>(what, len, e))?;
    let done = AtomicU64::new(0);
    v.spare_capacity_mut()[..len]
        .par_chunks_mut(block)
        .enumerate()
        .for_each(|(b, chunk): (usize, &mut [MaybeUninit<Edge>])| {
            let mut next = make(b);
            for e in chunk.iter_mut() {
                e.write(next());
            }
            progress(done.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64);
        });
    // SAFETY: every one of the first `len` entries was written by its block above.
    unsafe { v.set_len(len) };
    Ok(v)
}

/// Replaces `a` by its exclusive prefix sums in parallel; returns the total.
fn exclusive_scan(a: &mut [u64]) -> u64 {
    let sums: Vec<u64> = a.par_chunks(TASK).map(|c| c.iter().sum()).collect();
    let mut bases = Vec::with_capacity(sums.len());
    let mut total = 0u64;
    for s in sums {
        bases.push(total);
        total += s;
    }
    a.par_chunks_mut(TASK).zip(bases).for_each(|(c, mut base)| {
        for x in c {
            let d = *x;
            *x = base;
            base += d;
        }
    });
    total
}

/// A graph in compressed sparse row form: vertex v's neighbours are
/// `edges[offsets[v]..offsets[v + 1]]`. The layout the GPU kernels read (offsets in
/// device memory, the entries on storage), and what the CPU references walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Csr {
    /// vertices + 1 offsets into `edges`, from 0 to `edges.len()`.
    pub offsets: Vec<u64>,
    /// Neighbour lists, one after the other.
    pub edges: Vec<u32>,
}

impl Csr {
    /// Number of vertices (the offsets less one).
    pub fn vertices(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Directed edge entries: twice the undirected edges less self loops, for a graph
    /// from [`build_csr`].
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// Entries in `v`'s list (duplicate edges count each time). `v` must be a vertex:
    /// panics otherwise, like slice indexing.
    pub fn degree(&self, v: u32) -> u64 {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }

    /// The neighbours of `v` (with repeats for duplicate edges). `v` must be a vertex
    /// of a CSR that passes [`Csr::validate`]: panics otherwise, like slice indexing.
    pub fn neighbours(&self, v: u32) -> &[u32] {
        &self.edges[self.offsets[v as usize] as usize..self.offsets[v as usize + 1] as usize]
    }

    /// Checks the invariants the traversals rely on, so that a CSR from elsewhere
    /// (a file, a GPU) can be trusted: offsets start at 0, never decrease and end at
    /// the entry count, and every entry is a vertex.
    pub fn validate(&self) -> Result<()> {
        let (Some(&first), Some(&last)) = (self.offsets.first(), self.offsets.last()) else {
            bail!("a CSR needs at least one offset (vertices + 1)");
        };
        if first != 0 {
            bail!("offsets[0] is {first}, not 0");
        }
        if last != self.edges.len() as u64 {
            bail!(
                "the last offset is {last} but there are {} entries",
                self.edges.len()
            );
        }
        if let Some(i) = self.offsets.par_windows(2).position_any(|w| w[0] > w[1]) {
            bail!(
                "offsets decrease at vertex {i}: {} then {}",
                self.offsets[i],
                self.offsets[i + 1]
            );
        }
        let n = self.vertices() as u64;
        if let Some(i) = self.edges.par_iter().position_any(|&e| e as u64 >= n) {
            bail!(
                "entry {i} is vertex {} but there are {n} vertices",
                self.edges[i]
            );
        }
        Ok(())
    }
}

/// Builds the CSR of an undirected graph on `vertices` vertices: each edge (u, v) is
/// stored in both directions, self loops are dropped, duplicate edges are kept (as
/// Graph500 does). Each adjacency list is in arbitrary order (it depends on the thread
/// schedule) unless `sort`, then it is sorted ascending and the CSR is deterministic.
///
/// Parallel (rayon) in three passes: degrees counted with atomic increments into the
/// offsets array itself, an exclusive prefix sum, then a scatter of both directions of
/// every edge through atomic per-vertex cursors (the offsets again: each vertex's
/// cursor ends at the next one's start, so one shift afterwards gives the offsets).
/// `edges` is consumed and dropped as soon as the scatter ends, so the peak is the
/// pairs, the entries and the offsets: no second copy of either.
///
/// `progress(n)` is called from any thread with n growing to `edges.len()`: the first
/// half of the range during the degree count, the second during the scatter.
///
/// Errors if an edge names a vertex outside 0..`vertices` (the message gives the edge's
/// index) or if the CSR cannot be allocated.
pub fn build_csr(
    vertices: u32,
    edges: Vec<Edge>,
    sort: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Csr> {
    let n = vertices as usize;
    let m = edges.len() as u64;
    let done = AtomicU64::new(0);
    let report = |k: usize| progress((done.fetch_add(k as u64, Ordering::Relaxed) + k as u64) / 2);
    let shift = range_shift(n);

    // 1. Degrees, counted at offsets[v] (offsets[n] stays 0 for the scan).
    let mut offsets = filled_vec(n + 1, 0u64, "the CSR offsets")?;
    {
        let ranges: Vec<Mutex<(u32, &mut [u64])>> = offsets[..n]
            .chunks_mut(1 << shift)
            .enumerate()
            .map(|(r, d)| Mutex::new(((r << shift) as u32, d)))
            .collect();
        let routed = route(&edges, vertices, shift, &ranges, &report, |(base, degree), batch| {
            for &(s, _) in batch {
                degree[(s - *base) as usize] += 1;
            }
        });
        if let Err(i) = routed {
            bail!(
                "edge {i} ({}, {}) names a vertex outside 0..{vertices}",
                edges[i].0,
                edges[i].1
            );
        }
    }

    // 2. Each vertex's start; offsets[n] = the entry count.
    let total = exclusive_scan(&mut offsets);
    let total = usize::try_from(total)
        .map_err(|e| alloc_error::<u32>("the CSR entries", usize::MAX, e))?;
    let mut flat = filled_vec(total, 0u32, "the CSR entries")?;

    // 3. Scatter through the cursors offsets[..n], which end at each vertex's end.
    {
        let starts: Vec<u64> = offsets[..n].iter().step_by(1 << shift).copied().collect();
        let mut rest = flat.as_mut_slice();
        let mut ranges = Vec::with_capacity(starts.len());
        for (r, cursor) in offsets[..n].chunks_mut(1 << shift).enumerate() {
            let end = starts.get(r + 1).copied().unwrap_or(total as u64);
            let (region, tail) = std::mem::take(&mut rest).split_at_mut((end - starts[r]) as usize);
            rest = tail;
            ranges.push(Mutex::new(((r << shift) as u32, cursor, starts[r], region)));
        }
        let routed = route(&edges, vertices, shift, &ranges, &report, |(base, cursor, start, region), batch| {
            for &(s, d) in batch {
                let c = &mut cursor[(s - *base) as usize];
                region[(*c - *start) as usize] = d;
                *c += 1;
            }
        });
        debug_assert!(routed.is_ok());
    }
    drop(edges);
    // Vertex v's end is v + 1's start.
    offsets.copy_within(0..n, 1);
    offsets[0] = 0;
    debug_assert_eq!(offsets[n] as usize, total);
    progress(m);

    if sort {
        sort_lists(&offsets, &mut flat);
    }
    Ok(Csr {
        offsets,
        edges: flat,
    })
}

/// log2 of the vertices per range of [`route`]: at most 2^RANGE_BITS ranges.
fn range_shift(n: usize) -> u32 {
    let bits = usize::BITS - n.saturating_sub(1).leading_zeros();
    bits.saturating_sub(RANGE_BITS)
}

/// Routes both directions (s, d) of every edge that is not a self loop to the range of
/// its source, `s >> shift`, through per-task buffers, and hands them over in batches
/// to `apply` under the range's lock. Each range's state is thus updated by one thread
/// at a time with plain stores (no atomic per entry, whose serialization would leave
/// one cache miss at a time in flight per core), and a batch's updates stay in the
/// range's slice of the arrays. A busy range is retried while its buffer grows to 4
/// batches, then waited for. Returns the index of an edge naming a vertex outside
/// 0..`vertices` (such edges are skipped).
fn route<S: Send>(
    edges: &[Edge],
    vertices: u32,
    shift: u32,
    ranges: &[Mutex<S>],
    report: &(dyn Fn(usize) + Sync),
    apply: impl Fn(&mut S, &[Edge]) + Sync,
) -> Result<(), usize> {
    let bad = std::sync::atomic::AtomicUsize::new(usize::MAX);
    let lock = |r: usize| ranges[r].lock().unwrap_or_else(|e| e.into_inner());
    edges.par_chunks(TASK).enumerate().for_each_init(
        || vec![Vec::with_capacity(BATCH); ranges.len()],
        |buffers: &mut Vec<Vec<Edge>>, (c, chunk)| {
            for (i, &(u, v)) in chunk.iter().enumerate() {
                if u >= vertices || v >= vertices {
                    bad.fetch_min(c * TASK + i, Ordering::Relaxed);
                    continue;
                }
                if u == v {
                    continue;
                }
                for (s, d) in [(u, v), (v, u)] {
                    let r = (s >> shift) as usize;
                    let b = &mut buffers[r];
                    b.push((s, d));
                    if b.len() % BATCH == 0 {
                        let guard = if b.len() >= 4 * BATCH {
                            Some(lock(r))
                        } else {
                            ranges[r].try_lock().ok()
                        };
                        if let Some(mut state) = guard {
                            apply(&mut state, b);
                            b.clear();
                        }
                    }
                }
            }
            for (r, b) in buffers.iter_mut().enumerate() {
                if !b.is_empty() {
                    apply(&mut lock(r), b);
                    b.clear();
                }
            }
            report(chunk.len());
        },
    );
    match bad.into_inner() {
        usize::MAX => Ok(()),
        i => Err(i),
    }
}

pub(crate) fn build_csr_atomic(
    vertices: u32,
    edges: Vec<Edge>,
    sort: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Csr> {
    let n = vertices as usize;
    let m = edges.len() as u64;
    let done = AtomicU64::new(0);
    let report = |k: usize| progress((done.fetch_add(k as u64, Ordering::Relaxed) + k as u64) / 2);

    // 1. Degrees, counted at offsets[v] (offsets[n] stays 0 for the scan).
    let mut offsets = filled_vec(n + 1, 0u64, "the CSR offsets")?;
    {
        let degree = atomic_u64(&mut offsets);
        let bad = edges
            .par_chunks(TASK)
            .enumerate()
            .try_for_each(|(c, chunk)| {
                for (i, &(u, v)) in chunk.iter().enumerate() {
                    if u >= vertices || v >= vertices {
                        return Err(c * TASK + i);
                    }
                    if u != v {
                        degree[u as usize].fetch_add(1, Ordering::Relaxed);
                        degree[v as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
                report(chunk.len());
                Ok(())
            });
        if let Err(i) = bad {
            bail!(
                "edge {i} ({}, {}) names a vertex outside 0..{vertices}",
                edges[i].0,
                edges[i].1
            );
        }
    }

    // 2. Each vertex's start; offsets[n] = the entry count.
    let total = exclusive_scan(&mut offsets);
    let total =
        usize::try_from(total).map_err(|e| alloc_error::<u32>("the CSR entries", usize::MAX, e))?;
    let mut flat = filled_vec(total, 0u32, "the CSR entries")?;

    // 3. Scatter through the cursors offsets[..n], which end at each vertex's end.
    {
        let (cursor, out) = (atomic_u64(&mut offsets[..n]), atomic_u32(&mut flat));
        edges.par_chunks(TASK).for_each(|chunk| {
            for &(u, v) in chunk {
                if u != v {
                    let i = cursor[u as usize].fetch_add(1, Ordering::Relaxed);
                    out[i as usize].store(v, Ordering::Relaxed);
                    let j = cursor[v as usize].fetch_add(1, Ordering::Relaxed);
                    out[j as usize].store(u, Ordering::Relaxed);
                }
            }
            report(chunk.len());
        });
    }
    drop(edges);
    // Vertex v's end is v + 1's start.
    offsets.copy_within(0..n, 1);
    offsets[0] = 0;
    debug_assert_eq!(offsets[n] as usize, total);
    progress(m);

    if sort {
        sort_lists(&offsets, &mut flat);
    }
    Ok(Csr {
        offsets,
        edges: flat,
    })
}

/// Sorts every list of the CSR run `entries` whose offsets are `off` (absolute, one
/// more than the lists), splitting the run in two halves of entries until a half is
/// small or a single list (which is then sorted in parallel itself if large).
fn sort_lists(off: &[u64], entries: &mut [u32]) {
    let lists = off.len() - 1;
    if lists == 1 {
        if entries.len() > SORT_TASK {
            entries.par_sort_unstable();
        } else {
            entries.sort_unstable();
        }
        return;
    }
    let base = off[0];
    if entries.len() <= SORT_TASK {
        for w in off.windows(2) {
            entries[(w[0] - base) as usize..(w[1] - base) as usize].sort_unstable();
        }
        return;
    }
    // The first list boundary at or after the middle entry, strictly inside the run.
    let middle = base + entries.len() as u64 / 2;
    let mid = off.partition_point(|&o| o < middle).clamp(1, lists - 1);
    let (left, right) = entries.split_at_mut((off[mid] - base) as usize);
    rayon::join(
        || sort_lists(&off[..=mid], left),
        || sort_lists(&off[mid..], right),
    );
}

/// CPU reference BFS: the level (hops from `source`) of every vertex, `u32::MAX` for
/// the unreachable ones; all `u32::MAX` if `source` is not a vertex. Follows each
/// vertex's list as given (out-edges), so it is right for directed CSRs too.
///
/// Level-synchronous and parallel (rayon): the vertices of a frontier expand
/// concurrently, each unvisited neighbour claimed by one compare-and-swap, so the
/// levels are exact whatever the schedule. `g` must pass [`Csr::validate`].
pub fn bfs_levels(g: &Csr, source: u32) -> Vec<u32> {
    let n = g.vertices();
    let mut levels = vec![u32::MAX; n];
    if (source as usize) >= n {
        return levels;
    }
    {
        let level = atomic_u32(&mut levels);
        level[source as usize].store(0, Ordering::Relaxed);
        let mut front = vec![source];
        let mut l = 0u32;
        while !front.is_empty() {
            l += 1;
            front = front
                .par_iter()
                .with_min_len(64)
                .fold(Vec::new, |mut next, &v| {
                    for &u in g.neighbours(v) {
                        let lu = &level[u as usize];
                        if lu.load(Ordering::Relaxed) == u32::MAX
                            && lu
                                .compare_exchange(u32::MAX, l, Ordering::Relaxed, Ordering::Relaxed)
                                .is_ok()
                        {
                            next.push(u);
                        }
                    }
                    next
                })
                .reduce(Vec::new, |mut a, mut b| {
                    if a.len() < b.len() {
                        std::mem::swap(&mut a, &mut b);
                    }
                    a.append(&mut b);
                    a
                });
        }
    }
    levels
}

/// Root of `x`'s tree, halving the path on the way (each visited vertex is pointed at
/// its grandparent). Parents never exceed their children, so a root is the smallest
/// vertex of its tree.
fn find(parent: &[AtomicU32], mut x: u32) -> u32 {
    loop {
        let p = parent[x as usize].load(Ordering::Relaxed);
        if p == x {
            return x;
        }
        let gp = parent[p as usize].load(Ordering::Relaxed);
        if gp != p {
            // Losing this race only leaves a longer path.
            let _ =
                parent[x as usize].compare_exchange(p, gp, Ordering::Relaxed, Ordering::Relaxed);
        }
        x = gp;
    }
}

/// CPU reference connected components: for every vertex the smallest vertex id of its
/// component, the labels the GPU's CC converges to. A concurrent union-find over the
/// vertices' lists in parallel (rayon): roots are linked larger under smaller by a
/// compare-and-swap that only succeeds on a root, paths are halved during finds, and a
/// last pass points every vertex at its root. Treats each entry as an undirected edge
/// (weak components of a directed CSR). `g` must pass [`Csr::validate`].
pub fn cc_labels(g: &Csr) -> Vec<u32> {
    let n = g.vertices();
    let mut parent: Vec<u32> = (0..n).into_par_iter().map(|v| v as u32).collect();
    {
        let p = atomic_u32(&mut parent);
        (0..n).into_par_iter().with_min_len(256).for_each(|v| {
            let v = v as u32;
            let nbrs = g.neighbours(v);
            if nbrs.is_empty() {
                return;
            }
            // A recent root of v's set: a hint, refreshed when a link fails.
            let mut rv = find(p, v);
            for &u in nbrs {
                let mut ru = find(p, u);
                while ru != rv {
                    let (hi, lo) = if ru > rv { (ru, rv) } else { (rv, ru) };
                    if p[hi as usize]
                        .compare_exchange(hi, lo, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                    {
                        rv = lo;
                        break;
                    }
                    ru = find(p, ru);
                    rv = find(p, rv);
                }
            }
        });
        (0..n).into_par_iter().with_min_len(1024).for_each(|v| {
            let r = find(p, v as u32);
            p[v].store(r, Ordering::Relaxed);
        });
    }
    parent
}

/// Checks a GPU result (BFS levels or CC labels) against the CPU reference: returns the
/// number of differing vertices and the first few (up to 8) as (vertex, expected, got).
/// If the lengths differ, every vertex past the shorter one differs and its missing
/// value shows as `u32::MAX`.
pub fn compare(expected: &[u32], got: &[u32]) -> (usize, Vec<(usize, u32, u32)>) {
    let common = expected.len().min(got.len());
    let wrong = expected[..common]
        .par_iter()
        .zip(&got[..common])
        .filter(|(a, b)| a != b)
        .count()
        + (expected.len().max(got.len()) - common);
    let at = |v: &[u32], i: usize| v.get(i).copied().unwrap_or(u32::MAX);
    let first = (0..expected.len().max(got.len()))
        .filter(|&i| i >= common || expected[i] != got[i])
        .take(8)
        .map(|i| (i, at(expected, i), at(got, i)))
        .collect();
    (wrong, first)
}

/// A BFS source with at least one neighbour, chosen deterministically from `seed`
/// (Graph500 searches from random non-isolated roots): the first vertex with edges
/// among up to 1000 uniform draws, else the first vertex with edges. `None` when no
/// vertex has an edge.
pub fn pick_source(g: &Csr, seed: u64) -> Option<u32> {
    let n = g.vertices() as u64;
    if n == 0 || g.edge_count() == 0 {
        return None;
    }
    let mut r = SplitMix64::new(seed, 0, SOURCE_DOMAIN);
    for _ in 0..1000 {
        let v = r.below(n) as u32;
        if g.degree(v) > 0 {
            return Some(v);
        }
    }
    (0..n as u32)
        .into_par_iter()
        .find_first(|&v| g.degree(v) > 0)
}

/// Summary of a graph and its reference results for the JSON output and the log.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GraphStats {
    /// Vertices.
    pub vertices: u64,
    /// Directed edge entries of the CSR (both directions of each undirected edge).
    pub edge_entries: u64,
    /// Largest list length.
    pub max_degree: u64,
    /// Vertices without entries (including those with only self loops).
    pub isolated: u64,
    /// Vertices reachable from the BFS source, itself included (given levels).
    pub reachable: Option<u64>,
    /// Largest finite BFS level: the source's eccentricity (given levels).
    pub bfs_depth: Option<u32>,
    /// Connected components, isolated vertices included (given labels).
    pub components: Option<u64>,
    /// Vertices of the largest component (given labels).
    pub largest_component: Option<u64>,
}

impl GraphStats {
    /// The statistics of `g`, with those of BFS `levels` (from [`bfs_levels`]) and CC
    /// `labels` (any labelling with one id below the vertex count per component, such
    /// as [`cc_labels`]'s) when given. Errors if a result's length is not the vertex
    /// count or a label is not a vertex.
    pub fn new(g: &Csr, levels: Option<&[u32]>, labels: Option<&[u32]>) -> Result<Self> {
        let n = g.vertices();
        let (max_degree, isolated) = g
            .offsets
            .par_windows(2)
            .map(|w| (w[1] - w[0], (w[1] == w[0]) as u64))
            .reduce(|| (0, 0), |a, b| (a.0.max(b.0), a.1 + b.1));
        let mut s = GraphStats {
            vertices: n as u64,
            edge_entries: g.edge_count() as u64,
            max_degree,
            isolated,
            reachable: None,
            bfs_depth: None,
            components: None,
            largest_component: None,
        };
        if let Some(l) = levels {
            if l.len() != n {
                bail!("{} BFS levels for {n} vertices", l.len());
            }
            let (reached, depth) = l
                .par_iter()
                .filter(|&&x| x != u32::MAX)
                .map(|&x| (1u64, x))
                .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.max(b.1)));
            s.reachable = Some(reached);
            s.bfs_depth = (reached > 0).then_some(depth);
        }
        if let Some(c) = labels {
            if c.len() != n {
                bail!("{} component labels for {n} vertices", c.len());
            }
            let mut sizes = filled_vec(n, 0u32, "the component sizes")?;
            let size = atomic_u32(&mut sizes);
            if let Some(v) = c.par_iter().position_any(|&x| x as usize >= n) {
                bail!("vertex {v} has component label {}, not a vertex", c[v]);
            }
            c.par_iter().for_each(|&x| {
                size[x as usize].fetch_add(1, Ordering::Relaxed);
            });
            let (count, largest) = sizes
                .par_iter()
                .filter(|&&k| k > 0)
                .map(|&k| (1u64, k as u64))
                .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.max(b.1)));
            s.components = Some(count);
            s.largest_component = Some(largest);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two components with edges, {0, 1, 2, 3} (a path, the edge 1-2 twice) and {4, 5};
    /// 6 has only a self loop, 7 nothing.
    fn small_edges() -> Vec<Edge> {
        vec![(0, 1), (1, 2), (2, 3), (2, 1), (5, 4), (6, 6)]
    }

    fn small(sort: bool) -> Csr {
        build_csr(8, small_edges(), sort, &|_| {}).unwrap()
    }

    #[test]
    fn csr_of_a_small_graph() {
        let g = small(true);
        g.validate().unwrap();
        assert_eq!(g.vertices(), 8);
        assert_eq!(g.edge_count(), 10);
        assert_eq!(g.offsets, vec![0, 1, 4, 7, 8, 9, 10, 10, 10]);
        assert_eq!(g.edges, vec![1, 0, 2, 2, 1, 1, 3, 2, 5, 4]);
        assert_eq!(g.neighbours(1), &[0, 2, 2]);
        assert_eq!((g.degree(2), g.degree(6), g.degree(7)), (3, 0, 0));
        // Unsorted: the same lists up to order.
        let mut u = small(false);
        u.validate().unwrap();
        for v in 0..8 {
            let (a, b) = (u.offsets[v] as usize, u.offsets[v + 1] as usize);
            u.edges[a..b].sort_unstable();
        }
        assert_eq!(u, g);
        // Progress reaches the edge count.
        let last = AtomicU64::new(0);
        build_csr(8, small_edges(), false, &|d| {
            last.fetch_max(d, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(last.into_inner(), 6);
        // Bad input.
        let err = build_csr(3, vec![(0, 1), (0, 3)], false, &|_| {}).unwrap_err();
        assert!(err.to_string().contains("edge 1 (0, 3)"), "{err}");
        let empty = build_csr(0, vec![], true, &|_| {}).unwrap();
        empty.validate().unwrap();
        assert_eq!((empty.vertices(), empty.edge_count()), (0, 0));
    }

    #[test]
    fn validate_finds_broken_csrs() {
        let g = small(false);
        let mut b = g.clone();
        b.edges[3] = 8;
        assert!(b.validate().unwrap_err().to_string().contains("entry 3"));
        let mut b = g.clone();
        b.offsets[2] = 0;
        assert!(b.validate().unwrap_err().to_string().contains("decrease"));
        let mut b = g.clone();
        b.edges.pop();
        assert!(b
            .validate()
            .unwrap_err()
            .to_string()
            .contains("last offset"));
        let mut b = g.clone();
        b.offsets[0] = 1;
        assert!(b.validate().unwrap_err().to_string().contains("offsets[0]"));
        let b = Csr {
            offsets: vec![],
            edges: vec![],
        };
        assert!(b.validate().is_err());
    }

    #[test]
    fn bfs_cc_and_stats_of_a_small_graph() {
        let g = small(false);
        let m = u32::MAX;
        let levels = bfs_levels(&g, 0);
        assert_eq!(levels, vec![0, 1, 2, 3, m, m, m, m]);
        assert_eq!(bfs_levels(&g, 5), vec![m, m, m, m, 1, 0, m, m]);
        assert_eq!(bfs_levels(&g, 6), vec![m, m, m, m, m, m, 0, m]);
        assert_eq!(bfs_levels(&g, 8), vec![m; 8]);
        let labels = cc_labels(&g);
        assert_eq!(labels, vec![0, 0, 0, 0, 4, 4, 6, 7]);
        let s = GraphStats::new(&g, Some(&levels), Some(&labels)).unwrap();
        assert_eq!(
            s,
            GraphStats {
                vertices: 8,
                edge_entries: 10,
                max_degree: 3,
                isolated: 2,
                reachable: Some(4),
                bfs_depth: Some(3),
                components: Some(4),
                largest_component: Some(4),
            }
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["components"], 4);
        let s = GraphStats::new(&g, None, None).unwrap();
        assert_eq!((s.reachable, s.components), (None, None));
        assert!(GraphStats::new(&g, Some(&levels[..3]), None).is_err());
        assert!(GraphStats::new(&g, None, Some(&[9; 8])).is_err());
    }

    #[test]
    fn compare_counts_and_lists_differences() {
        assert_eq!(compare(&[1, 2, 3], &[1, 2, 3]), (0, vec![]));
        assert_eq!(compare(&[1, 2, 3], &[1, 5, 3]), (1, vec![(1, 2, 5)]));
        assert_eq!(
            compare(&[1, 2, 3], &[1]),
            (2, vec![(1, 2, u32::MAX), (2, 3, u32::MAX)])
        );
        let (k, first) = compare(&vec![0; 100], &vec![1; 100]);
        assert_eq!((k, first.len()), (100, 8));
    }

    #[test]
    fn pick_source_avoids_isolated_vertices() {
        let g = small(false);
        for seed in 0..50 {
            let s = pick_source(&g, seed).unwrap();
            assert!(g.degree(s) > 0);
            assert_eq!(pick_source(&g, seed), Some(s));
        }
        let lonely = build_csr(4, vec![(1, 1)], false, &|_| {}).unwrap();
        assert_eq!(pick_source(&lonely, 1), None);
        // One vertex with edges among many: the fallback scan finds it.
        let sparse = build_csr(1 << 20, vec![(77_777, 77_778)], false, &|_| {}).unwrap();
        assert!(matches!(pick_source(&sparse, 3), Some(77_777 | 77_778)));
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

    /// Label propagation until nothing moves: each vertex ends with its component's
    /// smallest id.
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
    fn kronecker_scale_12_against_naive_references() {
        let e = kronecker(12, 16, 3, &|_| {}).unwrap();
        let loops = e.iter().filter(|e| e.0 == e.1).count();
        let g = build_csr(1 << 12, e, true, &|_| {}).unwrap();
        g.validate().unwrap();
        assert_eq!(g.edge_count(), 2 * ((16 << 12) - loops));
        for v in 0..1u32 << 12 {
            assert!(g.neighbours(v).windows(2).all(|w| w[0] <= w[1]));
        }
        // Power law: the largest degree is far above the mean (32).
        let stats = GraphStats::new(&g, None, None).unwrap();
        assert!(stats.max_degree > 500, "{stats:?}");
        assert!(stats.isolated > 100, "{stats:?}");
        for seed in 0..4 {
            let s = pick_source(&g, seed).unwrap();
            assert_eq!(bfs_levels(&g, s), naive_bfs(&g, s), "source {s}");
        }
        assert_eq!(cc_labels(&g), naive_cc(&g));
    }

    #[test]
    fn cc_of_random_graphs_against_label_propagation() {
        // Below, near and above the giant component's threshold (m = n / 2).
        for (m, seed) in [(1500, 1), (2500, 2), (3000, 3), (8000, 4)] {
            let e = uniform(5000, m, seed, &|_| {}).unwrap();
            let g = build_csr(5000, e, false, &|_| {}).unwrap();
            let labels = cc_labels(&g);
            assert_eq!(labels, naive_cc(&g), "m = {m}");
            let s = pick_source(&g, seed).unwrap();
            assert_eq!(bfs_levels(&g, s), naive_bfs(&g, s));
        }
    }

    #[test]
    fn sorted_lists_split_across_tasks() {
        // Enough entries for sort_lists to split, with one list far larger than a task.
        let mut e: Vec<Edge> = (1..100_000u32).map(|v| (0, v % 5000 + 1)).collect();
        e.extend(uniform(5001, 200_000, 9, &|_| {}).unwrap());
        let g = build_csr(5001, e.clone(), true, &|_| {}).unwrap();
        let mut naive = vec![Vec::new(); 5001];
        for &(u, v) in e.iter().filter(|e| e.0 != e.1) {
            naive[u as usize].push(v);
            naive[v as usize].push(u);
        }
        for (v, mut l) in naive.into_iter().enumerate() {
            l.sort_unstable();
            assert_eq!(g.neighbours(v as u32), &l[..], "vertex {v}");
        }
    }

    #[test]
    fn exclusive_scan_across_tasks() {
        let mut a: Vec<u64> = (0..3 * TASK as u64 + 5).collect();
        let want: Vec<u64> = a
            .iter()
            .scan(0, |s, &x| {
                let r = *s;
                *s += x;
                Some(r)
            })
            .collect();
        let total = exclusive_scan(&mut a);
        assert_eq!(a, want);
        assert_eq!(total, want.last().unwrap() + 3 * TASK as u64 + 4);
    }

    /// Speed of generation and CSR build at scale 20, on one thread and on all:
    /// `cargo test --release -p graph-analytics --lib -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing; run with --release --ignored --nocapture"]
    fn time_scale_20() {
        let scale = 20;
        let m = 16u64 << scale;
        let all = rayon::current_num_threads();
        for threads in [1, all] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let rate = |t: std::time::Instant| m as f64 / t.elapsed().as_secs_f64() / 1e6;
                let t = std::time::Instant::now();
                let e = kronecker(scale, 16, 1, &|_| {}).unwrap();
                let kron = rate(t);
                let t = std::time::Instant::now();
                let u = uniform(1 << scale, m, 1, &|_| {}).unwrap();
                let unif = rate(t);
                drop(u);
                let t = std::time::Instant::now();
                let g = build_csr(1 << scale, e.clone(), false, &|_| {}).unwrap();
                let csr = rate(t);
                drop(g);
                let t = std::time::Instant::now();
                let g = build_csr(1 << scale, e, true, &|_| {}).unwrap();
                let sorted = rate(t);
                let s = pick_source(&g, 1).unwrap();
                let t = std::time::Instant::now();
                let l = bfs_levels(&g, s);
                let bfs = g.edge_count() as f64 / t.elapsed().as_secs_f64() / 1e6;
                let t = std::time::Instant::now();
                let c = cc_labels(&g);
                let cc = g.edge_count() as f64 / t.elapsed().as_secs_f64() / 1e6;
                let stats = GraphStats::new(&g, Some(&l), Some(&c)).unwrap();
                println!(
                    "scale {scale}, {threads} thread(s): kronecker {kron:.1} M edges/s, uniform {unif:.1} M edges/s, \
                     build_csr {csr:.1} M edges/s ({sorted:.1} sorted); BFS {bfs:.0} M entries/s, CC {cc:.0} M entries/s; {}",
                    serde_json::to_string(&stats).unwrap()
                );
            });
        }
    }
}
#[cfg(test)]
mod scratch_csr {
    use super::*;
    #[test]
    #[ignore]
    fn scratch_csr_scale() {
        let scale: u32 = std::env::var("SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(22);
        let m = 16u64 << scale;
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let t = std::time::Instant::now();
                let e = kronecker(scale, 16, 1, &|_| {}).unwrap();
                let k = t.elapsed().as_secs_f64();
                let t = std::time::Instant::now();
                let g = build_csr(1 << scale, e.clone(), false, &|_| {}).unwrap();
                let c = t.elapsed().as_secs_f64();
                drop(g);
                let t = std::time::Instant::now();
                let g = build_csr_atomic(1 << scale, e, false, &|_| {}).unwrap();
                let a = t.elapsed().as_secs_f64();
                println!("scale {scale} threads {threads}: kron {:.1} M/s ({k:.2}s) csr {:.1} M/s ({c:.2}s) atomic {:.1} M/s {}", m as f64 / k / 1e6, m as f64 / c / 1e6, m as f64 / a / 1e6, g.edge_count());
            });
        }
    }
}
