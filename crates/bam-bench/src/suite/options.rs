//! What the suite runs: its kernels, their variants and forms, and the options with
//! their checks and the data sizes they give.

use bam::{Error, Result};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Cache slots of the all-hits variants per line of data, in quarters: 5/4, slack on top
/// of the preload (suite_touch_*), which is what keeps every line in: a streaming kernel's
/// own first run wraps the clock hand (concurrent misses on one line each draw from it),
/// and then every fill evicts a valid line, for good. Without the preload the all-hits
/// runs miss, with a quarter more slots than lines as with exactly as many; with it they
/// do not.
const HIT_SLOTS_QUARTERS: u64 = 5;

/// A kernel of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kernel {
    /// CSR sparse matrix times vector.
    Spmv,
    /// Breadth-first search.
    Bfs,
    /// Random gather.
    Gather,
    /// Streaming 256-bin histogram.
    Histogram,
    /// Histogram with its bins in storage: an atomic add per element.
    HistogramAtomic,
    /// Read-modify-write of every element.
    Rmw,
    /// One PageRank pull iteration, a thread per vertex.
    Pagerank,
    /// Group-by count into a hash table in storage (compare-and-swap, atomic add).
    HashCount,
    /// Embedding-bag sums of random table rows.
    EmbeddingBag,
}

impl Kernel {
    /// Every kernel, in the order the suite runs them.
    pub const ALL: [Kernel; 9] = [
        Kernel::Spmv,
        Kernel::Bfs,
        Kernel::Gather,
        Kernel::Histogram,
        Kernel::HistogramAtomic,
        Kernel::Rmw,
        Kernel::Pagerank,
        Kernel::HashCount,
        Kernel::EmbeddingBag,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Spmv => "spmv",
            Kernel::Bfs => "bfs",
            Kernel::Gather => "gather",
            Kernel::Histogram => "histogram",
            Kernel::HistogramAtomic => "histogram-atomic",
            Kernel::Rmw => "rmw",
            Kernel::Pagerank => "pagerank",
            Kernel::HashCount => "hash-count",
            Kernel::EmbeddingBag => "embedding-bag",
        }
    }

    /// The kernel's part of its symbols in suite.cu (`suite_<symbol>_<form>`).
    pub(super) fn symbol(self) -> &'static str {
        match self {
            Kernel::Histogram => "hist",
            Kernel::HistogramAtomic => "ahist",
            Kernel::HashCount => "hcount",
            Kernel::EmbeddingBag => "embag",
            k => k.name(),
        }
    }

    /// What the kernel does, in one line.
    pub fn about(self) -> &'static str {
        match self {
            Kernel::Spmv => "CSR SpMV, a warp per row, shuffle reduction; col and val from storage",
            Kernel::Bfs => "top-down BFS from vertex 0, a warp per frontier vertex; rowptr and col from storage",
            Kernel::Gather => "sum of uniformly random u64 elements, every value checked",
            Kernel::Histogram => "256-bin histogram of a byte of every u32 element (shared memory)",
            Kernel::HistogramAtomic => {
                "histogram of u32 elements into u64 bins in storage, an atomic add per element"
            }
            Kernel::Rmw => "a[i] = 3 a[i] + 1 over every u64 element, checked afterwards",
            Kernel::Pagerank => {
                "a PageRank pull iteration, a thread per vertex; rowptr and col from storage"
            }
            Kernel::HashCount => {
                "group-by count of u32 keys into a linear-probing hash table in storage (CAS, atomic add)"
            }
            Kernel::EmbeddingBag => {
                "embedding bags: sums of 32 random 512-byte rows of an f32 table, a warp per bag"
            }
        }
    }

    /// What the kernel's `work` counts.
    pub(super) fn work_unit(self) -> &'static str {
        match self {
            Kernel::Spmv => "nonzeros",
            Kernel::Bfs | Kernel::Pagerank => "edges",
            Kernel::Gather => "reads",
            Kernel::EmbeddingBag => "lookups",
            Kernel::Histogram | Kernel::HistogramAtomic | Kernel::Rmw | Kernel::HashCount => {
                "elements"
            }
        }
    }

    /// The cache configuration the porting guide recommends for the kernel's access
    /// pattern, which its ported variants use unless `--line` / `--readahead` override it
    /// (docs/porting-guide.md, "Pick the line size"): the scans (spmv, histogram, rmw)
    /// 4 KiB lines and read-ahead 8, the random readers (gather's single elements, bfs's
    /// neighbour lists of scattered vertices) 512-byte lines and no read-ahead. Each miss
    /// of a random reader uses a few bytes of its line, and what a fill costs grows with
    /// the line; a scan uses every byte, and the read-ahead keeps its fills in flight.
    /// pagerank and hash-count stream their first array in order (scans); embedding-bag
    /// reads random 512-byte rows (a random reader whose line is its row).
    pub fn cache_profile(self) -> CacheProfile {
        match self {
            Kernel::Spmv
            | Kernel::Histogram
            | Kernel::HistogramAtomic
            | Kernel::Rmw
            | Kernel::Pagerank
            | Kernel::HashCount => CacheProfile {
                line_bytes: 4096,
                readahead: 8,
            },
            Kernel::Bfs | Kernel::Gather | Kernel::EmbeddingBag => CacheProfile {
                line_bytes: 512,
                readahead: 0,
            },
        }
    }

    /// Storage-array bytes read and written per work unit (None: not meaningful).
    pub(super) fn bytes_per_unit(self) -> Option<f64> {
        match self {
            Kernel::Spmv => Some(8.0), // col (4 B) and val (4 B) per nonzero
            Kernel::Bfs => None,
            Kernel::Gather => Some(8.0),
            Kernel::Histogram => Some(4.0),
            Kernel::HistogramAtomic => Some(20.0), // read 4 B, read and write an 8 B bin
            Kernel::Rmw => Some(16.0),             // read and write 8 B
            Kernel::Pagerank => Some(4.0),         // col (4 B) per edge (rowptr: 8 B a vertex)
            Kernel::HashCount => None,             // 4 B of key, then probes
            Kernel::EmbeddingBag => Some(512.0),   // a 128-column f32 row per lookup
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        by_name("kernel", &Kernel::ALL, Kernel::name, s)
    }
}

/// The one of `all` whose `name` is `s` (trimmed), or an error that lists the names.
fn by_name<T: Copy>(what: &str, all: &[T], name: fn(T) -> &'static str, s: &str) -> Result<T> {
    all.iter()
        .copied()
        .find(|&x| name(x) == s.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|&x| name(x)).collect();
            Error::InvalidArgument(format!("unknown {what} `{s}` ({})", names.join(", ")))
        })
}

/// The cache configuration of a kernel's ported variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CacheProfile {
    /// Cache line size (`CacheConfig::new`'s line).
    pub line_bytes: u32,
    /// Read-ahead of streaming misses, in grid strides (`CacheConfig::readahead`; 0: off).
    pub readahead: u32,
}

/// Where a kernel's storage arrays live, and which form of the kernel reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Variant {
    /// Plain kernel, GPU memory: the baseline of every ratio.
    #[serde(rename = "hbm")]
    Hbm,
    /// Plain kernel, pinned host memory mapped into the GPU.
    #[serde(rename = "zerocopy")]
    Zerocopy,
    /// Ported kernel, every line cached, media in GPU memory.
    #[serde(rename = "bam-hit")]
    BamHit,
    /// Ported kernel through `pin_port` (read_pinned), every line cached.
    #[serde(rename = "bam-pin-hit")]
    BamPinHit,
    /// Ported kernel as a porter writes it, without `__launch_bounds__` (the compiler
    /// picks the registers), every line cached.
    #[serde(rename = "bam-hit-unbounded")]
    BamHitUnbounded,
    /// Ported kernel like `bam-hit`, its arrays' views counting every access and hit (as
    /// with `CacheConfig::count_hits`): what the counting costs.
    #[serde(rename = "bam-hit-counting")]
    BamHitCounting,
    /// Ported kernel like `bam-hit`, compiled under `__launch_bounds__(256, 8)` (32
    /// registers, 8 blocks per SM, as many warps as the plain kernels run) instead of
    /// `(256, 6)`.
    #[serde(rename = "bam-hit-8")]
    BamHit8,
    /// `bam-hit`'s kernel and cache, the arrays made resident (`Array::make_resident`,
    /// after `Array::invalidate` of every array so that each can take one run of slots):
    /// every line pinned while the kernel runs, which reads through plain loads.
    #[serde(rename = "bam-resident")]
    BamResident,
    /// `bam-resident` with `bam-hit-8`'s kernel.
    #[serde(rename = "bam-resident-8")]
    BamResident8,
    /// `bam-hit`'s kernel and cache, given the views `Array::view` returns with the
    /// default `CacheConfig`: what a port gets without asking (arrays that fit in the
    /// cache's share for it are made resident by their first view, the others stay
    /// ordinary).
    #[serde(rename = "bam-default")]
    BamDefault,
    /// Ported kernel, a quarter of the lines cached, media in pinned host memory.
    #[serde(rename = "bam-quarter")]
    BamQuarter,
    /// `bam-quarter` with `bam-hit-8`'s kernel (8 blocks of 256 threads per SM).
    #[serde(rename = "bam-quarter-8")]
    BamQuarter8,
    /// Plain kernel, managed memory at 2x oversubscription.
    #[serde(rename = "uvm-2x")]
    Uvm2x,
    /// Plain kernel, managed memory at 4x oversubscription.
    #[serde(rename = "uvm-4x")]
    Uvm4x,
}

impl Variant {
    /// Every variant, in the order they run.
    pub const ALL: [Variant; 14] = [
        Variant::Hbm,
        Variant::Zerocopy,
        Variant::BamHit,
        Variant::BamPinHit,
        Variant::BamHitUnbounded,
        Variant::BamHitCounting,
        Variant::BamHit8,
        Variant::BamResident,
        Variant::BamResident8,
        Variant::BamDefault,
        Variant::BamQuarter,
        Variant::BamQuarter8,
        Variant::Uvm2x,
        Variant::Uvm4x,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Hbm => "hbm",
            Variant::Zerocopy => "zerocopy",
            Variant::BamHit => "bam-hit",
            Variant::BamPinHit => "bam-pin-hit",
            Variant::BamHitUnbounded => "bam-hit-unbounded",
            Variant::BamHitCounting => "bam-hit-counting",
            Variant::BamHit8 => "bam-hit-8",
            Variant::BamResident => "bam-resident",
            Variant::BamResident8 => "bam-resident-8",
            Variant::BamDefault => "bam-default",
            Variant::BamQuarter => "bam-quarter",
            Variant::BamQuarter8 => "bam-quarter-8",
            Variant::Uvm2x => "uvm-2x",
            Variant::Uvm4x => "uvm-4x",
        }
    }

    /// The form of the kernel the variant runs.
    pub fn form(self) -> Form {
        match self {
            Variant::BamHit
            | Variant::BamHitCounting
            | Variant::BamResident
            | Variant::BamDefault
            | Variant::BamQuarter => Form::Bam,
            Variant::BamPinHit => Form::Pin,
            Variant::BamHitUnbounded => Form::BamUnbounded,
            Variant::BamHit8 | Variant::BamResident8 | Variant::BamQuarter8 => Form::Bam8,
            _ => Form::Plain,
        }
    }

    /// Whether the variant's kernel gets resident views (`Array::make_resident`).
    pub fn resident(self) -> bool {
        matches!(self, Variant::BamResident | Variant::BamResident8)
    }

    /// Whether the variant runs under the time budget (it can be slow).
    pub fn budgeted(self) -> bool {
        matches!(
            self,
            Variant::BamQuarter | Variant::BamQuarter8 | Variant::Uvm2x | Variant::Uvm4x
        )
    }

    /// Data / GPU memory left, for the UVM variants.
    pub fn oversubscription(self) -> Option<u64> {
        match self {
            Variant::Uvm2x => Some(2),
            Variant::Uvm4x => Some(4),
            _ => None,
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        by_name("variant", &Variant::ALL, Variant::name, s)
    }
}

/// The instantiation of a kernel's template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Form {
    /// `T*`.
    #[serde(rename = "plain")]
    Plain,
    /// `bam::array<T>`.
    #[serde(rename = "bam::array")]
    Bam,
    /// `pin_port<T>`: `bam::array<T>` read with `read_pinned`.
    #[serde(rename = "pin_port")]
    Pin,
    /// `bam::array<T>`, the kernel without `__launch_bounds__`.
    #[serde(rename = "bam::array (no launch bounds)")]
    BamUnbounded,
    /// `bam::array<T>`, the kernel under `__launch_bounds__(256, 8)`.
    #[serde(rename = "bam::array (launch bounds 256, 8)")]
    Bam8,
}

impl Form {
    /// The form's part of the kernels' symbols in suite.cu (`suite_<kernel>_<suffix>`).
    pub(super) fn suffix(self) -> &'static str {
        match self {
            Form::Plain => "plain",
            Form::Bam => "bam",
            Form::Pin => "pin",
            Form::BamUnbounded => "bamu",
            Form::Bam8 => "bam8",
        }
    }
}

/// Options of the kernel suite.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteOptions {
    /// Multiplies every data size (1: about 0.5 to 1.1 GB of storage arrays per kernel).
    pub scale: f64,
    /// Average nonzeros per row of the SpMV / BFS matrix.
    pub degree: u32,
    /// Cache line size of every kernel (`None`: each kernel's own,
    /// [`Kernel::cache_profile`]).
    pub line_bytes: Option<u32>,
    /// Timed runs per variant (after one warm-up run).
    pub reps: u32,
    /// Kernels to run, in this order.
    pub kernels: Vec<Kernel>,
    /// Variants to run (always in [`Variant::ALL`]'s order); must include `hbm`.
    pub variants: Vec<Variant>,
    /// Wall-clock budget of each variant that can be slow (bam-quarter, uvm-2x, uvm-4x):
    /// warm-up and timed runs together, seconds.
    pub budget_s: f64,
    /// The UVM variants of `gather` do 1/this of the reads (random reads thrash at 2x and
    /// 4x oversubscription; rates are per read, so ratios stay comparable).
    pub uvm_gather_divisor: u32,
    /// I/O queues per simulated SSD.
    pub queues: u32,
    /// SMs for the simulated controllers.
    pub sim_sms: u32,
    /// SMs for the simulated controllers of the all-hits variants (bam-hit and its
    /// peers): they serve no I/O while those runs are timed (every line is cached), and a
    /// real SSD takes no SM at all, so their SMs go to the kernel.
    pub hit_sim_sms: u32,
    /// Blocks of the cache's fill service (one SM each; `CacheConfig::fill_blocks`).
    pub fill_blocks: u32,
    /// Read-ahead of streaming misses of every kernel, in grid strides
    /// (`CacheConfig::readahead`, which is off by default; `None`: each kernel's own,
    /// [`Kernel::cache_profile`]: on for the scans, as the host side of their port would
    /// set it, one field of the cache's configuration; the kernels are unchanged).
    pub readahead: Option<u32>,
    /// Seed of every input.
    pub seed: u64,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions {
            scale: 1.0,
            degree: 16,
            line_bytes: None,
            reps: 3,
            kernels: Kernel::ALL.to_vec(),
            variants: Variant::ALL.to_vec(),
            budget_s: 15.0,
            uvm_gather_divisor: 16,
            queues: 64,
            sim_sms: 16,
            hit_sim_sms: 1,
            fill_blocks: bam::cache::CacheConfig::new(4096, 1).fill_blocks,
            readahead: None,
            seed: 0x5eed_ba5e,
        }
    }
}

/// The data sizes the options give (elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Sizes {
    /// Rows (= columns = vertices) of the SpMV / BFS matrix.
    pub rows: u64,
    /// Elements of the gather array (u64).
    pub gather_elems: u64,
    /// Reads per gather run.
    pub gather_reads: u64,
    /// Elements of the histogram array (u32).
    pub hist_elems: u64,
    /// Elements of the atomic histogram's input (u32).
    pub ahist_elems: u64,
    /// Bins of the atomic histogram (u64).
    pub ahist_bins: u64,
    /// Elements of the rmw array (u64).
    pub rmw_elems: u64,
    /// Keys hash-count counts (u32).
    pub hcount_elems: u64,
    /// Distinct key values of hash-count (the table has the next power of two above
    /// twice as many slots).
    pub hcount_keys: u64,
    /// Rows of embedding-bag's table (512-byte rows of 128 f32).
    pub emb_rows: u64,
    /// Bags per embedding-bag run (32 lookups each).
    pub emb_bags: u64,
}

impl Sizes {
    /// Slots of hash-count's table (u64): a power of two, at least twice the distinct
    /// keys (load factor at most 1/2).
    pub fn hcount_slots(&self) -> u64 {
        (2 * self.hcount_keys).next_power_of_two()
    }
}

/// Bytes of a row of embedding-bag's table (suite.cu's EMB_DIM f32).
pub(super) const EMB_ROW_BYTES: u64 = 512;
/// Lookups (rows summed) per embedding bag.
pub(super) const EMB_PER_BAG: u64 = 32;

/// Smallest and largest `--scale`.
pub const SCALE_RANGE: (f64, f64) = (1.0 / 1024.0, 16.0);

impl SuiteOptions {
    /// Element counts at this scale: 8 Mi rows, 1 GiB of u64 to gather from (1/8 of its
    /// elements read per run), 1 GiB of u32 to histogram, 256 MiB of u32 into 128 MiB of
    /// u64 bins for the atomic histogram, 512 MiB of u64 to rmw, 256 MiB of u32 keys (4 Mi
    /// distinct) to count into a 64 MiB table, a 1 GiB embedding table read by 256 Ki bags
    /// at scale 1; whole multiples of 1024.
    pub fn sizes(&self) -> Sizes {
        let at = |base: u64| (((base as f64 * self.scale) / 1024.0).round() as u64).max(1) * 1024;
        let gather_elems = at(1 << 27);
        Sizes {
            rows: at(8 << 20),
            gather_elems,
            gather_reads: gather_elems / 8,
            hist_elems: at(1 << 28),
            ahist_elems: at(1 << 26),
            ahist_bins: at(1 << 24),
            rmw_elems: at(1 << 26),
            hcount_elems: at(1 << 26),
            hcount_keys: at(1 << 22),
            emb_rows: at(1 << 21),
            emb_bags: at(1 << 18),
        }
    }

    /// Checks the options before any GPU work. The error names the quantity and the rule.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        let (lo, hi) = SCALE_RANGE;
        if !self.scale.is_finite() || self.scale < lo || self.scale > hi {
            return bad(format!(
                "scale {}: must be from 1/1024 to {hi} (1 = about 0.5 to 1.1 GB of storage arrays per kernel)",
                self.scale
            ));
        }
        if !(1..=1024).contains(&self.degree) {
            return bad(format!(
                "average degree {}: must be from 1 to 1024",
                self.degree
            ));
        }
        if let Some(line) = self.line_bytes {
            if !(512..=65536).contains(&line) || !line.is_multiple_of(512) {
                return bad(format!(
                    "line size {line} B: must be a multiple of 512 B from 512 B to 64 KiB (e.g. 4096)"
                ));
            }
        }
        if !(1..=1000).contains(&self.reps) {
            return bad(format!(
                "timed runs per variant (reps) {}: must be from 1 to 1000",
                self.reps
            ));
        }
        if self.kernels.is_empty() {
            return bad("kernels: the list is empty".into());
        }
        for (i, k) in self.kernels.iter().enumerate() {
            if self.kernels[..i].contains(k) {
                return bad(format!("kernels: {k} is listed twice"));
            }
        }
        if !self.variants.contains(&Variant::Hbm) {
            return bad(
                "variants: must include hbm (the plain kernel in GPU memory, the baseline of every ratio)"
                    .into(),
            );
        }
        for (i, v) in self.variants.iter().enumerate() {
            if self.variants[..i].contains(v) {
                return bad(format!("variants: {v} is listed twice"));
            }
        }
        if !self.budget_s.is_finite() || self.budget_s <= 0.0 || self.budget_s > 3600.0 {
            return bad(format!(
                "time budget {} s (bam-quarter and UVM variants): must be more than 0 and at most 3600 s",
                self.budget_s
            ));
        }
        if self.uvm_gather_divisor == 0 {
            return bad("UVM gather divisor: must be at least 1".into());
        }
        if self.queues == 0 {
            return bad("I/O queues per SSD: must be at least 1".into());
        }
        if self.sim_sms == 0 {
            return bad("SMs for the simulated controllers: must be at least 1".into());
        }
        if self.hit_sim_sms == 0 {
            return bad(
                "SMs for the all-hits variants' simulated controllers: must be at least 1".into(),
            );
        }
        if let Some(ra) = self.readahead {
            if ra > bam::cache::CacheConfig::MAX_READAHEAD {
                return bad(format!(
                    "read-ahead {ra}: at most {} grid strides",
                    bam::cache::CacheConfig::MAX_READAHEAD
                ));
            }
        }
        if self.fill_blocks == 0 {
            return bad("fill service blocks: must be at least 1".into());
        }
        Ok(())
    }

    /// Whether `v` is selected.
    pub(super) fn runs(&self, v: Variant) -> bool {
        self.variants.contains(&v)
    }

    /// The variants of `vs` that are selected, in `vs`'s order.
    pub(super) fn selected(&self, vs: &[Variant]) -> Vec<Variant> {
        vs.iter().copied().filter(|&v| self.runs(v)).collect()
    }

    /// The cache configuration of kernel `k`'s ported variants: its own
    /// ([`Kernel::cache_profile`]) with the overrides of these options.
    pub fn cache_profile(&self, k: Kernel) -> CacheProfile {
        let own = k.cache_profile();
        CacheProfile {
            line_bytes: self.line_bytes.unwrap_or(own.line_bytes),
            readahead: self.readahead.unwrap_or(own.readahead),
        }
    }

    /// Cache slots of the all-hits variants for `lines` lines of data.
    pub fn hit_slots(lines: u64) -> u64 {
        lines * HIT_SLOTS_QUARTERS / 4 + 1
    }

    /// About how many bytes of GPU memory kernel `k` holds at its peak (while `bam-hit`
    /// runs: the storage arrays' source copies, the simulated media, the cache's slots,
    /// plus the arrays that stay in GPU memory). Estimates the matrix's nonzeros as rows x
    /// degree.
    pub fn peak_gpu_bytes(&self, k: Kernel) -> u64 {
        let s = self.sizes();
        let line = self.cache_profile(k).line_bytes as u64;
        let slot = line.next_power_of_two();
        let nnz = s.rows * self.degree as u64;
        // (storage arrays, arrays that stay in GPU memory)
        let (storage, side): (Vec<u64>, u64) = match k {
            Kernel::Spmv => (vec![4 * nnz, 4 * nnz], 16 * s.rows), // rowptr, x, y
            Kernel::Bfs => (vec![8 * s.rows, 4 * nnz], 12 * s.rows), // dist, 2 frontiers
            Kernel::Gather => (vec![8 * s.gather_elems], 0),
            Kernel::Histogram => (vec![4 * s.hist_elems], 0),
            Kernel::HistogramAtomic => (vec![4 * s.ahist_elems, 8 * s.ahist_bins], 0),
            Kernel::Rmw => (vec![8 * s.rmw_elems], 0),
            // outdeg, contrib, next
            Kernel::Pagerank => (vec![8 * (s.rows + 1), 4 * nnz], 12 * s.rows),
            // the expectation's bitmap
            Kernel::HashCount => (
                vec![4 * s.hcount_elems, 8 * s.hcount_slots()],
                s.hcount_keys / 8 + 8,
            ),
            // the bags' indices and sums
            Kernel::EmbeddingBag => (
                vec![EMB_ROW_BYTES * s.emb_rows],
                (4 * EMB_PER_BAG + EMB_ROW_BYTES) * s.emb_bags,
            ),
        };
        let data: u64 = storage.iter().sum();
        let lines: u64 = storage.iter().map(|b| b.div_ceil(line)).sum();
        side + 2 * data + Self::hit_slots(lines) * slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        SuiteOptions::default().validate().unwrap();
    }

    #[test]
    fn validate_names_the_broken_rule() {
        let msg = |f: &dyn Fn(&mut SuiteOptions)| {
            let mut o = SuiteOptions::default();
            f(&mut o);
            match o.validate() {
                Err(Error::InvalidArgument(m)) => m,
                r => panic!("expected InvalidArgument, got {r:?}"),
            }
        };
        assert!(msg(&|o| o.scale = 0.0).contains("scale 0"));
        assert!(msg(&|o| o.scale = f64::NAN).contains("scale"));
        assert!(msg(&|o| o.scale = 17.0).contains("scale 17"));
        assert!(msg(&|o| o.degree = 0).contains("average degree 0"));
        assert!(msg(&|o| o.line_bytes = Some(1000)).contains("line size 1000 B"));
        assert!(msg(&|o| o.line_bytes = Some(131072)).contains("line size"));
        assert!(msg(&|o| o.reps = 0).contains("reps"));
        assert!(msg(&|o| o.kernels.clear()).contains("kernels: the list is empty"));
        assert!(
            msg(&|o| o.kernels = vec![Kernel::Bfs, Kernel::Bfs]).contains("bfs is listed twice")
        );
        assert!(msg(&|o| o.variants = vec![Variant::BamHit]).contains("must include hbm"));
        assert!(
            msg(&|o| o.variants = vec![Variant::Hbm, Variant::Hbm]).contains("hbm is listed twice")
        );
        assert!(msg(&|o| o.budget_s = 0.0).contains("time budget 0 s"));
        assert!(msg(&|o| o.uvm_gather_divisor = 0).contains("divisor"));
        assert!(msg(&|o| o.queues = 0).contains("queues"));
        assert!(msg(&|o| o.sim_sms = 0).contains("SMs"));
        assert!(msg(&|o| o.fill_blocks = 0).contains("fill service"));
        assert!(msg(&|o| o.hit_sim_sms = 0).contains("all-hits"));
        assert!(msg(&|o| o.readahead = Some(17)).contains("read-ahead"));
    }

    #[test]
    fn cache_profiles_per_kernel_and_overrides() {
        let o = SuiteOptions::default();
        // Scans: 4 KiB lines, read-ahead on; random readers: 512 B lines, read-ahead off.
        for k in [
            Kernel::Spmv,
            Kernel::Histogram,
            Kernel::HistogramAtomic,
            Kernel::Rmw,
            Kernel::Pagerank,
            Kernel::HashCount,
        ] {
            assert_eq!(
                o.cache_profile(k),
                CacheProfile {
                    line_bytes: 4096,
                    readahead: 8
                },
                "{k}"
            );
        }
        for k in [Kernel::Gather, Kernel::Bfs, Kernel::EmbeddingBag] {
            assert_eq!(
                o.cache_profile(k),
                CacheProfile {
                    line_bytes: 512,
                    readahead: 0
                },
                "{k}"
            );
        }
        // An override applies to every kernel, each field on its own.
        let o = SuiteOptions {
            line_bytes: Some(1024),
            ..SuiteOptions::default()
        };
        assert_eq!(
            o.cache_profile(Kernel::Gather),
            CacheProfile {
                line_bytes: 1024,
                readahead: 0
            }
        );
        assert_eq!(
            o.cache_profile(Kernel::Rmw),
            CacheProfile {
                line_bytes: 1024,
                readahead: 8
            }
        );
        let o = SuiteOptions {
            readahead: Some(2),
            ..SuiteOptions::default()
        };
        assert_eq!(
            o.cache_profile(Kernel::Bfs),
            CacheProfile {
                line_bytes: 512,
                readahead: 2
            }
        );
    }

    #[test]
    fn names_round_trip() {
        for k in Kernel::ALL {
            assert_eq!(k.name().parse::<Kernel>().unwrap(), k);
            // Reports name a kernel as the command line does.
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::Value::from(k.name())
            );
        }
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>().unwrap(), v);
        }
        assert!("nope"
            .parse::<Kernel>()
            .unwrap_err()
            .to_string()
            .contains("spmv, bfs"));
        assert!("uvm"
            .parse::<Variant>()
            .unwrap_err()
            .to_string()
            .contains("uvm-2x"));
        // The names listed are every kernel's and every variant's, in their order.
        assert_eq!(
            "nope".parse::<Kernel>().unwrap_err().to_string(),
            Error::InvalidArgument(
                "unknown kernel `nope` (spmv, bfs, gather, histogram, histogram-atomic, rmw, \
                 pagerank, hash-count, embedding-bag)"
                    .into()
            )
            .to_string()
        );
        assert_eq!(
            "uvm".parse::<Variant>().unwrap_err().to_string(),
            Error::InvalidArgument(
                "unknown variant `uvm` (hbm, zerocopy, bam-hit, bam-pin-hit, bam-hit-unbounded, \
                 bam-hit-counting, bam-hit-8, bam-resident, bam-resident-8, bam-default, bam-quarter, \
                 bam-quarter-8, uvm-2x, uvm-4x)"
                    .into()
            )
            .to_string()
        );
        assert_eq!(Variant::BamPinHit.form(), Form::Pin);
        assert_eq!(Variant::BamResident8.form(), Form::Bam8);
        assert!(Variant::BamResident.resident() && !Variant::BamHit.resident());
        assert_eq!(Variant::BamQuarter.form(), Form::Bam);
        assert_eq!(Variant::Uvm4x.form(), Form::Plain);
        assert_eq!(Kernel::Histogram.symbol(), "hist");
        assert_eq!(Kernel::HistogramAtomic.symbol(), "ahist");
    }

    #[test]
    fn sizes_scale_and_stay_whole() {
        let s = SuiteOptions::default().sizes();
        assert_eq!(s.rows, 8 << 20);
        assert_eq!(s.gather_elems * 8, 1 << 30);
        assert_eq!(s.gather_reads, s.gather_elems / 8);
        assert_eq!(s.hist_elems * 4, 1 << 30);
        assert_eq!(
            (s.ahist_elems * 4, s.ahist_bins * 8),
            (256 << 20, 128 << 20)
        );
        assert_eq!(s.rmw_elems * 8, 512 << 20);
        let o = SuiteOptions {
            scale: SCALE_RANGE.0,
            ..Default::default()
        };
        o.validate().unwrap();
        let s = o.sizes();
        assert_eq!(s.rows, 8192);
        assert!(s.hist_elems.is_multiple_of(1024) && s.hist_elems > 0);
        // The default suite fits an 80 GB GPU with room to spare.
        for k in Kernel::ALL {
            assert!(SuiteOptions::default().peak_gpu_bytes(k) < 8 << 30, "{k}");
        }
    }
}
