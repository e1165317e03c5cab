//! The UVM variants (`uvm-2x`, `uvm-4x`): the plain kernel over managed memory, with GPU
//! memory taken by a balloon allocation so that the data is 2x / 4x what is left.

use super::bench::Bench;
use super::data::{Managed, Master, Mem};
use super::exec::{Ctx, Exec};
use super::measure::measure;
use super::options::{Form, Variant};
use super::report::Step;
use super::report::{UvmInfo, VariantResult};
use bam::cuda::{DeviceBuffer, Gpu};
use bam::Result;
use std::sync::Arc;

/// The UVM balloon leaves the GPU memory it aims at within this (cuMemAlloc rounds to
/// 2 MiB pages and takes some memory of its own).
const BALLOON_TOLERANCE: u64 = 4 << 20;
/// GPU memory left free for the driver on top of data / oversubscription in the UVM
/// variants (page tables, fault buffers, launch resources).
pub const UVM_DRIVER_MARGIN: u64 = 32 << 20;

/// Allocates GPU memory (the balloon, in parts) until `left` bytes stay free, within
/// BALLOON_TOLERANCE. cuMemAlloc takes a little more than it is asked for and fails near
/// the limit, so each step measures again: a part that does not fit is halved, what an
/// allocation took beyond its size is subtracted from the next, and an overshoot gives
/// the last part back. Returns the parts and the free memory left.
fn inflate(gpu: &Arc<Gpu>, left: u64) -> Result<(Vec<DeviceBuffer>, u64)> {
    let free = || -> Result<u64> {
        gpu.bind()?;
        Ok(cudarc::driver::result::mem_get_info()?.0 as u64)
    };
    let mut parts: Vec<DeviceBuffer> = Vec::new();
    let mut extra = 0u64;
    for _ in 0..32 {
        let f = free()?;
        if f > left + BALLOON_TOLERANCE {
            let mut want = (f - left).saturating_sub(extra).max(2 << 20);
            loop {
                match DeviceBuffer::zeroed(gpu, want as usize) {
                    Ok(part) => {
                        extra = extra.max(f.saturating_sub(free()?).saturating_sub(want));
                        parts.push(part);
                        break;
                    }
                    Err(_) if want > 4 << 20 => want /= 2,
                    Err(_) => return Ok((parts, f)),
                }
            }
        } else if f + BALLOON_TOLERANCE < left {
            match parts.pop() {
                Some(part) => drop(part),
                None => break,
            }
        } else {
            break;
        }
    }
    Ok((parts, free()?))
}

/// `uvm-2x` and `uvm-4x`: the plain kernel over a fresh managed copy of the storage arrays
/// for each, GPU memory shrunk by a balloon.
pub(super) fn uvm_variants(c: &Ctx, b: &mut dyn Bench, vs: &[Variant], step: &mut dyn FnMut(Step)) {
    let data: u64 = b.masters().iter().map(Master::bytes).sum();
    for &v in vs {
        let over = v.oversubscription().unwrap_or(1);
        let memory = format!("managed memory (cuMemAllocManaged), {over}x the GPU memory left");
        step(Step::Starting(
            v,
            format!(
                "{over}x oversubscription, up to {} s (time budget)",
                c.o.budget_s
            ),
        ));
        let r = (|| -> Result<VariantResult> {
            // The balloon first, then a fresh managed copy written by the GPU: the copy
            // fills what the balloon left and the driver moves the rest to host memory
            // (it cannot evict the balloon). Done the other way round (copy, prefetch to
            // the host, then the balloon) the data can stay in GPU memory: uvm-4x then
            // runs at GPU-memory speed. A fresh copy for every variant, so none inherits
            // another's placement. The source copies stay in GPU memory: the balloon is
            // sized from the free memory measured with them.
            let (balloon, free_after) = inflate(c.gpu, data / over + UVM_DRIVER_MARGIN)?;
            let balloon_bytes = balloon.iter().map(|b| b.len() as u64).sum();
            let (mems, st) = Mem::copies(c, b.masters(), |bytes| {
                Ok(Mem::Managed(Managed::new(c.gpu, bytes)?))
            })?;
            b.placed();
            c.gpu.bind()?;
            let free_filled = cudarc::driver::result::mem_get_info()?.0 as u64;
            let mut x = Exec::new(c, Form::Plain, &c.stream, c.gpu.sms);
            x.uvm = true;
            x.set_budget(c.o.budget_s);
            let r = measure(b, &x, &st, v, c.o.reps, memory.clone());
            drop(mems);
            drop(balloon);
            let mut r = r?;
            let usable = free_after.saturating_sub(UVM_DRIVER_MARGIN).max(1);
            r.uvm = Some(UvmInfo {
                oversubscription: over,
                data_bytes: data,
                balloon_bytes,
                gpu_free_bytes: free_after,
                gpu_free_after_fill: free_filled,
                margin_bytes: UVM_DRIVER_MARGIN,
                effective_oversubscription: data as f64 / usable as f64,
            });
            Ok(r)
        })();
        step(Step::Done(Box::new(
            r.unwrap_or_else(|e| VariantResult::failed(v, memory, &e)),
        )));
    }
}
