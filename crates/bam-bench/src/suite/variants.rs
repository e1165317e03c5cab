//! Running a kernel's variants: every selected one, in [`Variant::ALL`]'s order, each
//! result with its ratios to the `hbm` and `zerocopy` runs; the plain variants (`hbm`,
//! `zerocopy`) here, the ported ones in `ported`, the UVM ones in `uvm`.

use super::bench::Bench;
use super::data::{Master, Mem};
use super::exec::{Ctx, Exec};
use super::measure::measure;
use super::options::{Form, Variant};
use super::ported::ported_variants;
use super::report::{ArrayInfo, KernelReport, Step, SuiteEvent, VariantResult};
use super::uvm::uvm_variants;
use bam::cuda::{DeviceBuffer, PinnedBuffer};
use bam::Result;

/// `hbm` and `zerocopy`: the plain kernel over copies of the storage arrays in GPU memory
/// or in pinned, mapped host memory.
fn plain_variant(c: &Ctx, b: &mut dyn Bench, v: Variant, memory: String) -> Result<VariantResult> {
    let (_mems, st) = Mem::copies(c, b.masters(), |bytes| {
        Ok(match v {
            Variant::Hbm => Mem::Hbm(DeviceBuffer::zeroed(c.gpu, bytes)?),
            _ => Mem::Pinned(PinnedBuffer::new(c.gpu, bytes)?),
        })
    })?;
    b.placed();
    let x = Exec::new(c, Form::Plain, &c.stream, c.gpu.sms);
    measure(b, &x, &st, v, c.o.reps, memory)
}

/// Runs every selected variant of one kernel.
pub(super) fn run_kernel(
    c: &Ctx,
    b: &mut dyn Bench,
    progress: &mut dyn FnMut(SuiteEvent<'_>),
) -> KernelReport {
    let k = b.kernel();
    let storage: Vec<ArrayInfo> = b.masters().iter().map(Master::info).collect();
    let storage_bytes = b.masters().iter().map(Master::bytes).sum();
    let mut results: Vec<VariantResult> = Vec::new();
    {
        let mut step = |s: Step| match s {
            Step::Starting(variant, detail) => progress(SuiteEvent::Starting {
                kernel: k,
                variant,
                detail,
            }),
            Step::Done(mut r) => {
                let rate_of = |v: Variant| {
                    results
                        .iter()
                        .find(|x| x.variant == v && x.error.is_none() && x.rate > 0.0)
                        .map(|x| x.rate)
                };
                if r.error.is_none() {
                    let own = (r.variant == Variant::Hbm).then_some(r.rate);
                    r.ratio_to_hbm = own.or(rate_of(Variant::Hbm)).map(|h| r.rate / h);
                    let own = (r.variant == Variant::Zerocopy).then_some(r.rate);
                    r.ratio_to_zerocopy = own.or(rate_of(Variant::Zerocopy)).map(|z| r.rate / z);
                }
                progress(SuiteEvent::Finished {
                    kernel: k,
                    result: &r,
                });
                results.push(*r);
            }
        };
        for v in [Variant::Hbm, Variant::Zerocopy] {
            if c.o.runs(v) {
                let memory = match v {
                    Variant::Hbm => "GPU memory (cuMemAlloc)",
                    _ => "pinned host memory mapped into the GPU (zero-copy over PCIe)",
                };
                step(Step::Starting(v, String::new()));
                let r = plain_variant(c, b, v, memory.into())
                    .unwrap_or_else(|e| VariantResult::failed(v, memory.into(), &e));
                step(Step::Done(Box::new(r)));
            }
        }
        let hit = c.o.selected(&[
            Variant::BamHit,
            Variant::BamPinHit,
            Variant::BamHitUnbounded,
            Variant::BamHitCounting,
            Variant::BamHit8,
            Variant::BamResident,
            Variant::BamResident8,
            Variant::BamDefault,
        ]);
        if !hit.is_empty() {
            ported_variants(c, b, false, &hit, &mut step);
        }
        let quarter = c.o.selected(&[Variant::BamQuarter, Variant::BamQuarter8]);
        if !quarter.is_empty() {
            ported_variants(c, b, true, &quarter, &mut step);
        }
        let uvm = c.o.selected(&[Variant::Uvm2x, Variant::Uvm4x]);
        if !uvm.is_empty() {
            uvm_variants(c, b, &uvm, &mut step);
        }
    }
    KernelReport {
        kernel: k,
        about: k.about().into(),
        storage,
        storage_bytes,
        work_unit: k.work_unit().into(),
        work: b.full_work(),
        cache: c.o.cache_profile(k),
        variants: results,
    }
}
