//! Atomics on `bam::array<T>` (fetch_add ... compare_exchange) from many lanes, warps and
//! blocks at once, through a cache a quarter of the data: loaded, updated, flushed, read
//! back, and read again from storage through a new cache, each time against a host model
//! that replays every operation; the same through a resident view.

use super::torture::launch_bounded;
use crate::backend::{fail, TestBackend};
use crate::cache_kernels::protocol_config;
use crate::cache_kernels::sim;
use bam::cache::{Array, ArrayView, Cache, Element, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::{KernelParam, Result};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

/// The operations of `atomics_run` in tests.cu, by their codes there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Add = 0,
    Sub = 1,
    Min = 2,
    Max = 3,
    And = 4,
    Or = 5,
    Xor = 6,
    /// element += x by a compare_exchange loop.
    CasAdd = 7,
}

/// splitmix64's finaliser, as bam/pattern.cuh's mix64.
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d049bb133111eb);
    x ^= x >> 31;
    x
}

/// An element type of the test: its kernel, its values and the host's model of each
/// operation (tests.cu's atomics_operand and the operations' C++ semantics).
pub(super) trait AtomicElem:
    Element + Copy + PartialEq + Debug + Default + Send + 'static
{
    const SUFFIX: &'static str;
    /// Element i's value before the operations. Small for floating point (every sum the
    /// test makes is exact), anything for integers; the ticket element (the last) 1000.
    fn init(i: u64, n: u64) -> Self;
    /// The operand of `op` for hash `h` (tests.cu's atomics_operand).
    fn operand(op: Op, h: u64) -> Self;
    /// What `op` with operand `x` leaves in an element that held `self`.
    fn apply(self, op: Op, x: Self) -> Self;
    /// `self + 1`: a ticket taken.
    fn plus_one(self) -> Self;
}

macro_rules! int_elem {
    ($t:ty, $suffix:literal) => {
        impl AtomicElem for $t {
            const SUFFIX: &'static str = $suffix;
            fn init(i: u64, n: u64) -> Self {
                if i == n - 1 {
                    1000
                } else {
                    mix64(i ^ 0xa70) as $t
                }
            }
            fn operand(op: Op, h: u64) -> Self {
                let bits = 8 * std::mem::size_of::<$t>() as u64;
                match op {
                    Op::Min | Op::Max | Op::Xor => h as $t,
                    Op::And => !(1u64 << (h % bits)) as $t,
                    Op::Or => (1u64 << (h % bits)) as $t,
                    Op::Add | Op::Sub | Op::CasAdd => ((h >> 48) & 0xff) as $t,
                }
            }
            fn apply(self, op: Op, x: Self) -> Self {
                match op {
                    Op::Add | Op::CasAdd => self.wrapping_add(x),
                    Op::Sub => self.wrapping_sub(x),
                    Op::Min => self.min(x),
                    Op::Max => self.max(x),
                    Op::And => self & x,
                    Op::Or => self | x,
                    Op::Xor => self ^ x,
                }
            }
            fn plus_one(self) -> Self {
                self.wrapping_add(1)
            }
        }
    };
}
int_elem!(u32, "u32");
int_elem!(u64, "u64");
int_elem!(i32, "i32");
int_elem!(i64, "i64");

macro_rules! float_elem {
    ($t:ty, $suffix:literal) => {
        impl AtomicElem for $t {
            const SUFFIX: &'static str = $suffix;
            fn init(i: u64, n: u64) -> Self {
                if i == n - 1 {
                    1000.0
                } else {
                    (i % 1000) as $t
                }
            }
            fn operand(_op: Op, h: u64) -> Self {
                ((h >> 48) & 0xff) as $t
            }
            fn apply(self, op: Op, x: Self) -> Self {
                match op {
                    Op::Sub => self - x,
                    _ => self + x,
                }
            }
            fn plus_one(self) -> Self {
                self + 1.0
            }
        }
    };
}
float_elem!(f32, "f32");
float_elem!(f64, "f64");

/// The grid: 48 blocks of 100 threads, a partial warp in every block.
const GRID: (u32, u32) = (48, 100);

/// The host model of one launch of `bam_cache_atomics_<T>`: `vals` (the array's elements
/// before) as every operation leaves them (tests.cu's atomics_run, thread by thread; the
/// operations the test uses are commutative, so the order does not matter). Returns the
/// operations made, tickets included.
fn replay<T: AtomicElem>(vals: &mut [T], op: Op, ops: u32, seed: u64) -> u64 {
    let n = vals.len() as u64;
    let threads = GRID.0 as u64 * GRID.1 as u64;
    let mut made = threads;
    for t in 0..threads {
        vals[(n - 1) as usize] = vals[(n - 1) as usize].plus_one();
        for k in 0..ops as u64 {
            let h = mix64(seed ^ (t << 20) ^ k);
            if (h & 0xff) % 7 == 3 {
                continue;
            }
            let i = if (h >> 32) & 3 == 0 {
                (h >> 40) & 7
            } else {
                (h >> 8) % (n - 1)
            };
            vals[i as usize] = vals[i as usize].apply(op, T::operand(op, h));
            made += 1;
        }
    }
    made
}

/// Launches `bam_cache_atomics_<T>` over `view` and checks what only the GPU sees: no
/// operation failed, and every thread's ticket (the old value its fetch_add returned) was
/// handed out exactly once.
fn launch<T: AtomicElem>(
    cache: &Cache<'_>,
    view: ArrayView,
    op: Op,
    ops: u32,
    seed: u64,
    ticket0: T,
) -> Result<()> {
    let gpu = cache.gpu();
    let threads = (GRID.0 * GRID.1) as usize;
    let tickets = DeviceBuffer::zeroed(gpu, 4 * threads)?;
    let res = DeviceBuffer::zeroed(gpu, 16)?;
    let name = format!("bam_cache_atomics_{}", T::SUFFIX);
    let (opc, tp, rp) = (op as u32, tickets.ptr(), res.ptr());
    let params = [
        KernelParam::new(&view),
        KernelParam::new(&opc),
        KernelParam::new(&ops),
        KernelParam::new(&seed),
        KernelParam::new(&ticket0),
        KernelParam::new(&tp),
        KernelParam::new(&rp),
    ];
    // SAFETY: matches bam_cache_atomics_<T>(bam_array_view, uint32_t, uint32_t, uint64_t,
    // T, uint32_t*, unsigned long long*); `tickets` holds one counter per thread, `res`
    // two; both live until launch_bounded has synchronised.
    unsafe {
        launch_bounded(
            cache,
            &name,
            GRID,
            &params,
            Duration::from_secs(120),
            &String::new,
        )?
    };
    cache.check_errors()?;
    let mut r = [0u64; 2];
    res.read(0, &mut r)?;
    let mut t = vec![0u32; threads];
    tickets.read(0, &mut t)?;
    let bad = t.iter().filter(|&&c| c != 1).count();
    if r[0] != 0 || r[1] != 0 || bad != 0 {
        return fail(format!(
            "{name} op {op:?}: {} operations failed; {} tickets out of range, {bad} of {threads} tickets not handed out exactly once",
            r[0], r[1]
        ));
    }
    Ok(())
}

/// Compares what `a` reads back with the model; names the first difference.
fn compare<T: AtomicElem>(what: &str, a: &Array<'_, T>, want: &[T]) -> Result<()> {
    let mut got = vec![T::default(); want.len()];
    a.read(0, &mut got)?;
    let wrong = got.iter().zip(want).filter(|(g, w)| g != w).count();
    if wrong != 0 {
        let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
        return fail(format!(
            "{what}: {wrong} of {} elements differ from the host model; first: element {i} reads {:?}, expected {:?}",
            want.len(),
            got[i],
            want[i]
        ));
    }
    Ok(())
}

/// Atomics of type `T`, each of `ops`: the documented path (load, a kernel of atomics,
/// flush, read back) through a cache of 64 lines of 4 KiB over 256 lines of data, then a
/// new cache over the same storage reads the last result back, and a resident array of 32
/// lines takes the first operation through its view.
pub(super) fn atomics_case<T: AtomicElem>(
    gpu: &Arc<Gpu>,
    backend: TestBackend,
    ops_list: &[Op],
) -> Result<String> {
    let full = backend == TestBackend::Sim;
    let per_thread = if full { 64 } else { 16 };
    let size = std::mem::size_of::<T>() as u64;
    let cfg = protocol_config(4096, 64);
    let n = (1u64 << 20) / size - 3; // 256 lines, the last one partial
    let nb = 32 * 4096 / size; // the resident array
    let arr = backend.build(gpu, sim(1, &cfg, 4 << 20, Duration::from_secs(5)))?;
    let lba = arr.io().geometry().lba_size as u64;
    let b_lba = (2u64 << 20) / lba;
    let init: Vec<T> = (0..n).map(|i| T::init(i, n)).collect();
    let mut model = init.clone();
    let mut done = 0u64;
    {
        let cache = Cache::new(arr.io(), cfg.clone())?;
        let a = cache.array::<T>(n, 0, Layout::Stripe)?;
        for (k, &op) in ops_list.iter().enumerate() {
            let seed = 0xa7_0000 + k as u64;
            a.load(&init, 0)?;
            launch::<T>(
                &cache,
                a.view(),
                op,
                per_thread,
                seed,
                init[(n - 1) as usize],
            )?;
            cache.flush()?;
            model.clone_from(&init);
            done += replay(&mut model, op, per_thread, seed);
            compare(&format!("{op:?}, read back after flush"), &a, &model)?;
        }
        a.close()?;
        cache.close()?;
    }
    // A new cache: what the last kernel left reached storage.
    let cache = Cache::new(arr.io(), cfg)?;
    let op = ops_list[0];
    let binit: Vec<T> = (0..nb).map(|i| T::init(i, nb)).collect();
    let b = cache.array::<T>(nb, b_lba, Layout::Stripe)?;
    b.load(&binit, 0)?;
    cache.flush()?;
    {
        let r = b.make_resident()?;
        launch::<T>(
            &cache,
            r.view(),
            op,
            per_thread,
            0xb0b,
            binit[(nb - 1) as usize],
        )?;
        r.release()?;
    }
    cache.flush()?;
    let mut bmodel = binit.clone();
    replay(&mut bmodel, op, per_thread, 0xb0b);
    compare(&format!("{op:?} through a resident view"), &b, &bmodel)?;
    b.close()?;
    let a = cache.array::<T>(n, 0, Layout::Stripe)?;
    compare(
        "the last operation's result, read by a new cache",
        &a,
        &model,
    )?;
    a.close()?;
    cache.close()?;
    Ok(format!(
        "{}: {:?}, {done} operations by {} threads in partial warps ({per_thread} a thread, a quarter on 8 hot elements) over {n} elements, 4x the cache; every ticket once, each result equal to the host model after flush and from storage; {op:?} through a resident view too",
        T::SUFFIX,
        ops_list,
        GRID.0 * GRID.1
    ))
}
