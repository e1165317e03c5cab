//! The element-type matrix: element sizes and line sizes with partial warps and
//! divergent lanes.

use super::torture::{error_summary, launch_bounded, MediaModel};
use crate::backend::fail;
use crate::backend::TestBackend;
use crate::cache_kernels::sim;
use bam::cache::{ArrayView, Cache, Element, Layout};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::{KernelParam, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cache_kernels::protocol_config;
use bam::pattern::mix32;

/// A struct element type as a user declares one (24 bytes: tests.cu's `elem24`, three
/// 8-byte fields): plain old data through bytemuck's derive, an `Element` by promise.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bam::abi::Pod, bam::abi::Zeroable)]
#[bytemuck(crate = "bam::abi::bytemuck")]
pub(super) struct Edge {
    pub src: u64,
    pub dst: u64,
    pub weight: f64,
}

// SAFETY: three 8-byte fields, no padding (the Pod derive checks it); every bit pattern is
// a valid Edge; the kernel's elem24 has the same layout.
unsafe impl Element for Edge {}

/// make_elem<T> of cache_kernels.cu, as bytes.
pub(super) fn make_elem(size: usize, i: u64, gen: u32) -> Vec<u8> {
    let words = size.div_ceil(4);
    let mut v = Vec::with_capacity(words * 4);
    for k in 0..words {
        v.extend_from_slice(
            &mix32(
                (i.wrapping_mul(7).wrapping_add(k as u64) as u32) ^ gen.wrapping_mul(0x9e3779b9),
            )
            .to_le_bytes(),
        );
    }
    v.truncate(size);
    v
}

/// Elements 0 .. n of make_elem(size, _, gen), as the array's bytes.
pub(super) fn elems_bytes(size: usize, n: u64, gen: u32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(n as usize * size);
    for i in 0..n {
        bytes.extend_from_slice(&make_elem(size, i, gen));
    }
    bytes
}

/// Element types, line sizes, partial warps and divergent lanes. `slots_per_warp` slots
/// for each resident warp: 3 runs the array_ref pass too (it pins up to two lines per
/// warp); 1 gives the cache exactly as many slots as resident warps, which only the
/// accesses that never hold a line while they wait can use (coalesced and line-wise).
pub(super) fn types_case<T: Element + Default>(
    gpu: &Arc<Gpu>,
    backend: TestBackend,
    line: u32,
    slots_per_warp: u32,
) -> Result<String> {
    let size = std::mem::size_of::<T>();
    // 100 threads per block: every block ends with a partial warp (4 lanes). 48 blocks
    // (192 warps) are resident at once next to the simulator's SMs.
    let (blocks, block) = (48u32, 100u32);
    let warps = blocks * block.div_ceil(32);
    let use_ref = slots_per_warp >= 3;
    let slots = slots_per_warp * warps;
    let cfg = protocol_config(line, slots);
    // The data is twice the cache (less for 64 KiB lines).
    let data_bytes = (line as u64 * slots as u64 * 2).min(48 << 20);
    let n = data_bytes / size as u64 - 3; // a partial last line
    let arr = backend.build(
        gpu,
        sim(1, &cfg, data_bytes + (1 << 20), Duration::from_secs(5)),
    )?;
    let lba = arr.io().geometry().lba_size as u64;
    let cache = Cache::new(arr.io(), cfg)?;
    let a = cache.array::<T>(n, 0, Layout::Stripe)?;
    let res = DeviceBuffer::zeroed(gpu, 8 * 16)?;
    let gen = 0x51u32 + size as u32;
    // write and check with partial warps; check again with full warps, which adds the
    // cache-line-aware passes (for_each_element with groups of 4, 16 and 32 lanes, one
    // after the other in the same kernel).
    for (kind, bs) in [("write", block), ("check", block), ("check", 128)] {
        let name = format!("bam_cache_types_{kind}_{size}");
        let t0 = Instant::now();
        // What the threads had finished when a kernel does not end (types_check counts
        // the threads past each pass in res[10..15]).
        let progress = || {
            let mut r = [0u64; 16];
            match res.read(0, &mut r) {
                Ok(()) => format!(
                    "threads past array_ref / a[i] / lines4 / lines16 / lines32: {:?} (of {} per launch)",
                    &r[10..15],
                    blocks * bs
                ),
                Err(e) => format!("progress unreadable: {e}"),
            }
        };
        launch_types(
            &cache,
            size,
            kind == "check",
            a.view(),
            gen,
            use_ref,
            &res,
            (blocks, bs),
            &progress,
        )?;
        eprintln!(
            "  {name} ({blocks} x {bs}): {:.3} s, {:?}",
            t0.elapsed().as_secs_f64(),
            cache.stats()?
        );
        if let Err(e) = cache.check_errors() {
            return fail(format!(
                "{name} ({blocks} x {bs} threads) failed after {:.2} s: {e}; {}",
                t0.elapsed().as_secs_f64(),
                error_summary(&e)
            ));
        }
    }
    let mut r = [0u64; 10];
    res.read(0, &mut r)?;
    let (bad_ref, failed, bad_coal) = (r[0], r[1], r[2]);
    let bad_lines = [r[3], r[8], r[9]];
    if bad_ref + bad_coal + bad_lines.iter().sum::<u64>() != 0 || failed != 0 {
        let pass = [
            "array_ref",
            "a[i]/try_read",
            "lines/4 lanes",
            "lines/16 lanes",
            "lines/32 lanes",
        ]
        .get(r[5] as usize)
        .copied()
        .unwrap_or("?");
        let kind = [
            "not a value this test wrote",
            "the element's overwritten value",
            "a nearby element's value",
        ]
        .get(r[7] as usize)
        .copied()
        .unwrap_or("?");
        // What the element holds now, read through the cache by the host.
        let first = r[4].wrapping_sub(1);
        let mut now = vec![T::default(); 1];
        let now_ok = first < n && a.read(first, &mut now).is_ok();
        let now_bytes = bam::abi::as_bytes(&now).to_vec();
        return fail(format!(
            "wrong values: {bad_ref} via array_ref, {bad_coal} via a[i]/try_read, {} / {} / {} via for_each_element with 4 / 16 / 32 lanes; {failed} failed accesses; first wrong: element {first} ({pass}) read {:#018x} = {kind}; it now reads {} ({})",
            bad_lines[0], bad_lines[1], bad_lines[2], r[6],
            if now_ok { format!("{:02x?}", &now_bytes[..now_bytes.len().min(8)]) } else { "?".into() },
            if now_ok && now_bytes == make_elem(size, first, gen) { "right" } else { "wrong" }
        ));
    }
    cache.flush()?;
    let mut model = MediaModel::fresh(&*arr);
    model.lay(
        &a,
        Layout::Stripe,
        lba,
        line as usize,
        &elems_bytes(size, n, gen),
    );
    model.compare(&*arr)?;
    let st = cache.stats()?;
    a.close()?;
    cache.close()?;
    Ok(format!("{n} elements of {size} B, {line} B lines, {slots} slots for {warps} resident warps{}; {} misses, {} evictions", if use_ref { " (array_ref pass too)" } else { "" }, st.misses, st.evictions))
}

/// Launches the type matrix's write kernel for `size`-byte elements
/// (bam_cache_types_write_<size>) or, if `check`, its check kernel
/// (bam_cache_types_check_<size>, with the array_ref pass if `use_ref`) over `view` on
/// `grid` (blocks, threads), results in `res` (16 counters), and waits (bounded; `diag`
/// says what the threads had done if it does not end).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch_types(
    cache: &Cache<'_>,
    size: usize,
    check: bool,
    view: ArrayView,
    gen: u32,
    use_ref: bool,
    res: &DeviceBuffer,
    grid: (u32, u32),
    diag: &dyn Fn() -> String,
) -> Result<()> {
    let name = format!(
        "bam_cache_types_{}_{size}",
        if check { "check" } else { "write" }
    );
    let (v, g, u, r) = (view, gen, use_ref as u32, res.ptr());
    let check_params = [
        KernelParam::new(&v),
        KernelParam::new(&g),
        KernelParam::new(&u),
        KernelParam::new(&r),
    ];
    let write_params = [check_params[0], check_params[1], check_params[3]];
    let params: &[KernelParam] = if check { &check_params } else { &write_params };
    // SAFETY: matches bam_cache_types_write_*(bam_array_view, uint32_t, unsigned long
    // long*) and bam_cache_types_check_*(bam_array_view, uint32_t, uint32_t, unsigned long
    // long*); `v`, `g`, `u`, `r` and `res` live until launch_bounded has synchronised.
    unsafe { launch_bounded(cache, &name, grid, params, Duration::from_secs(60), diag) }
}

/// Runs the type matrix's kernels for 4-byte elements (write, or check with the array_ref
/// pass if `use_ref`) over `view` on 48 blocks of 100 threads (a partial warp in every
/// block); returns (wrong values, failed accesses).
pub(super) fn types_u32_pass(
    cache: &Cache<'_>,
    view: ArrayView,
    gen: u32,
    check: bool,
    use_ref: bool,
) -> Result<(u64, u64)> {
    let res = DeviceBuffer::zeroed(cache.gpu(), 8 * 16)?;
    launch_types(
        cache,
        4,
        check,
        view,
        gen,
        use_ref,
        &res,
        (48, 100),
        &String::new,
    )?;
    cache.check_errors()?;
    let mut c = [0u64; 10];
    res.read(0, &mut c)?;
    Ok((c[0] + c[2] + c[3] + c[8] + c[9], c[1]))
}
