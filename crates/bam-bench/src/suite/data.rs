//! The kernels' data: the element types and source copies of the storage arrays, the
//! generators that make inputs on the GPU (random arrays, the CSR matrix), and the copies
//! the plain variants place in GPU, pinned host or managed memory.

use super::exec::{Ctx, KArg};
use super::report::ArrayInfo;
use bam::cuda::{DeviceBuffer, Gpu, PinnedBuffer};
use bam::Result;
use cudarc::driver::sys;
use std::sync::Arc;

/// The element type of a storage array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Elem {
    U32,
    F32,
    U64,
}

impl Elem {
    pub(super) fn bytes(self) -> u32 {
        match self {
            Elem::U32 | Elem::F32 => 4,
            Elem::U64 => 8,
        }
    }

    /// The generator of random elements of this type (suite.cu's suite_fill_*).
    fn fill(self) -> &'static str {
        match self {
            Elem::U32 => "suite_fill_u32",
            Elem::F32 => "suite_fill_f32",
            Elem::U64 => "suite_fill_u64",
        }
    }
}

/// The source copy of a storage array, in GPU memory: every variant's data is copied
/// from it.
pub(super) struct Master {
    pub(super) name: &'static str,
    pub(super) elem: Elem,
    pub(super) len: u64,
    pub(super) buf: DeviceBuffer,
}

impl Master {
    /// A storage array of `n` random elements of `elem` from `seed`.
    pub(super) fn generated(
        c: &Ctx,
        name: &'static str,
        elem: Elem,
        n: u64,
        seed: u64,
    ) -> Result<Self> {
        Ok(Master {
            name,
            elem,
            len: n,
            buf: generated(c, elem, n, seed)?,
        })
    }

    pub(super) fn bytes(&self) -> u64 {
        self.len * self.elem.bytes() as u64
    }

    pub(super) fn info(&self) -> ArrayInfo {
        ArrayInfo {
            name: self.name.into(),
            elem_bytes: self.elem.bytes(),
            len: self.len,
        }
    }
}

/// A zeroed GPU buffer for `n` elements of `elem`, filled by its generator (taking
/// (ptr, n, seed)).
pub(super) fn generated(c: &Ctx, elem: Elem, n: u64, seed: u64) -> Result<DeviceBuffer> {
    let buf = DeviceBuffer::zeroed(c.gpu, (n * elem.bytes() as u64) as usize)?;
    let a = [KArg::U64(buf.ptr()), KArg::U64(n), KArg::U64(seed)];
    // SAFETY: suite_fill_{u64,u32,f32}(T*, uint64_t, uint64_t) over the n elements of
    // `buf`, which outlives the wait.
    unsafe { c.helper(elem.fill(), &a)? };
    c.wait()?;
    Ok(buf)
}

/// A GPU buffer of `n` u32, element i = offset + mix64(i ^ seed) % bound (suite.cu's
/// suite_fill_below): hash-count's keys, embedding-bag's row indices.
pub(super) fn generated_below(
    c: &Ctx,
    n: u64,
    bound: u64,
    offset: u32,
    seed: u64,
) -> Result<DeviceBuffer> {
    let buf = DeviceBuffer::zeroed(c.gpu, (4 * n) as usize)?;
    let a = [
        KArg::U64(buf.ptr()),
        KArg::U64(n),
        KArg::U64(bound),
        KArg::U32(offset),
        KArg::U64(seed),
    ];
    // SAFETY: suite_fill_below(uint32_t*, uint64_t, uint64_t, uint32_t, uint64_t) over
    // the n elements of `buf`, which outlives the wait.
    unsafe { c.helper("suite_fill_below", &a)? };
    c.wait()?;
    Ok(buf)
}

/// Chunk of a plain copy (copy_lines onto one SSD is a plain copy; any multiple of 4 B).
const PLAIN_COPY_CHUNK: u64 = 4096;

/// Copies the lines of `bytes` bytes at `src` that stripe onto SSD `ssd` of `nssd` to
/// `dst` (nssd = 1: a plain copy), and waits.
pub(super) fn copy_lines(
    c: &Ctx,
    src: u64,
    bytes: u64,
    dst: u64,
    line: u64,
    nssd: u32,
    ssd: u32,
) -> Result<()> {
    let a = [
        KArg::U64(src),
        KArg::U64(bytes / 4),
        KArg::U32((line / 4) as u32),
        KArg::U32(nssd),
        KArg::U32(ssd),
        KArg::U64(dst),
    ];
    // SAFETY: suite_copy_lines(const uint32_t*, uint64_t, uint32_t, uint32_t, uint32_t,
    // uint32_t*); the caller's src holds `bytes`, dst that SSD's share of the lines; both
    // outlive the wait below.
    unsafe { c.helper("suite_copy_lines", &a)? };
    c.wait()
}

/// A CSR matrix: the row pointers (host and GPU), columns, values.
pub(super) struct Csr {
    pub(super) nnz: u64,
    pub(super) rowptr_host: Vec<u64>,
    pub(super) rowptr: DeviceBuffer,
    pub(super) col: DeviceBuffer,
    pub(super) val: DeviceBuffer,
}

/// Generates the suite's matrix: `rows` x `rows`, row degrees from a discrete Pareto
/// (alpha = 2, mean about `degree`, at most 32768), random columns (suite.cu's
/// suite_csr_degrees / suite_csr_fill); the degrees' prefix sum is taken on the host.
pub(super) fn gen_csr(c: &Ctx, rows: u64, degree: u32, seed: u64) -> Result<Csr> {
    let deg = DeviceBuffer::zeroed(c.gpu, (4 * rows) as usize)?;
    let a = [
        KArg::U64(deg.ptr()),
        KArg::U64(rows),
        KArg::F64(degree as f64 / 2.0),
        KArg::U32(32768),
        KArg::U64(seed),
    ];
    // SAFETY: suite_csr_degrees(uint32_t*, uint64_t, double, uint32_t, uint64_t) over the
    // rows of `deg`, which outlives the wait.
    unsafe { c.helper("suite_csr_degrees", &a)? };
    c.wait()?;
    let mut d = vec![0u32; rows as usize];
    deg.read(0, &mut d)?;
    drop(deg);
    let mut rowptr_host = Vec::with_capacity(rows as usize + 1);
    let mut sum = 0u64;
    rowptr_host.push(0);
    for &x in &d {
        sum += x as u64;
        rowptr_host.push(sum);
    }
    let nnz = sum;
    let rowptr = DeviceBuffer::zeroed(c.gpu, 8 * (rows as usize + 1))?;
    rowptr.write(0, &rowptr_host)?;
    let col = DeviceBuffer::zeroed(c.gpu, (4 * nnz.max(1)) as usize)?;
    let val = DeviceBuffer::zeroed(c.gpu, (4 * nnz.max(1)) as usize)?;
    let a = [
        KArg::U64(col.ptr()),
        KArg::U64(val.ptr()),
        KArg::U64(nnz),
        KArg::U64(rows),
        KArg::U64(seed.rotate_left(17)),
    ];
    // SAFETY: suite_csr_fill(uint32_t*, float*, uint64_t, uint64_t, uint64_t) over the nnz
    // elements of `col` and `val`, which outlive the wait.
    unsafe { c.helper("suite_csr_fill", &a)? };
    c.wait()?;
    Ok(Csr {
        nnz,
        rowptr_host,
        rowptr,
        col,
        val,
    })
}

/// The storage arrays of a graph kernel (bfs, pagerank): the CSR's row pointers (`rows +
/// 1` u64) and columns (`nnz` u32).
pub(super) fn graph_masters(
    rows: u64,
    nnz: u64,
    rowptr: DeviceBuffer,
    col: DeviceBuffer,
) -> Vec<Master> {
    vec![
        Master {
            name: "rowptr",
            elem: Elem::U64,
            len: rows + 1,
            buf: rowptr,
        },
        Master {
            name: "col",
            elem: Elem::U32,
            len: nnz.max(1),
            buf: col,
        },
    ]
}

/// Rows of a CSR matrix (`rowptr_host`: rows + 1 entries) whose results the host
/// recomputes: `samples` evenly spaced, and the longest row.
pub(super) fn sample_rows(rowptr_host: &[u64], samples: u64) -> Vec<u64> {
    let rows = rowptr_host.len().saturating_sub(1) as u64;
    let mut v: Vec<u64> = (0..samples).map(|k| k * rows / samples).collect();
    let longest = (0..rows)
        .max_by_key(|&r| rowptr_host[r as usize + 1] - rowptr_host[r as usize])
        .unwrap_or(0);
    v.push(longest);
    v
}

/// The elements of row `r` of a CSR array (`buf`: one element per nonzero) as the source
/// copy holds them.
pub(super) fn row_of<T: bam::abi::Pod + Default + Clone>(
    rowptr_host: &[u64],
    buf: &DeviceBuffer,
    r: u64,
) -> Result<Vec<T>> {
    let (b, e) = (rowptr_host[r as usize], rowptr_host[r as usize + 1]);
    let mut v = vec![T::default(); (e - b) as usize];
    buf.read(std::mem::size_of::<T>() * b as usize, &mut v)?;
    Ok(v)
}

/// Where a plain variant's copy of a storage array lives.
pub(super) enum Mem {
    /// GPU memory (hbm).
    Hbm(DeviceBuffer),
    /// Pinned host memory mapped into the GPU (zerocopy).
    Pinned(PinnedBuffer),
    /// Managed memory (the UVM variants).
    Managed(Managed),
}

impl Mem {
    fn ptr(&self) -> u64 {
        match self {
            Mem::Hbm(b) => b.ptr(),
            Mem::Pinned(b) => b.dev_ptr(),
            Mem::Managed(b) => b.ptr,
        }
    }

    /// Copies of `masters` in the memory `alloc` gives (bytes → a buffer), written by the
    /// GPU; with the pointers a plain kernel takes, in the same order.
    pub(super) fn copies(
        c: &Ctx,
        masters: &[Master],
        alloc: impl Fn(usize) -> Result<Mem>,
    ) -> Result<(Vec<Mem>, Vec<KArg>)> {
        let mut mems = Vec::new();
        for m in masters {
            let mem = alloc(m.bytes() as usize)?;
            copy_lines(c, m.buf.ptr(), m.bytes(), mem.ptr(), PLAIN_COPY_CHUNK, 1, 0)?;
            mems.push(mem);
        }
        let st = mems.iter().map(|m| KArg::U64(m.ptr())).collect();
        Ok((mems, st))
    }
}

/// Managed memory (cuMemAllocManaged, attached globally), freed on drop.
pub(super) struct Managed {
    gpu: Arc<Gpu>,
    ptr: u64,
}

impl Managed {
    pub(super) fn new(gpu: &Arc<Gpu>, len: usize) -> Result<Self> {
        gpu.bind()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: plain allocation into a valid out-pointer; freed in Drop.
        unsafe {
            sys::cuMemAllocManaged(
                &mut ptr,
                len.max(1),
                sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
            )
        }
        .result()?;
        Ok(Managed {
            gpu: gpu.clone(),
            ptr,
        })
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: allocated by cuMemAllocManaged, freed once. cuMemFree waits for the
        // device; the UVM variants run while no persistent (simulated controller) kernel
        // does, so the wait ends.
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}
