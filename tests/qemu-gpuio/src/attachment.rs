//! One attachment of the controller in the stand-in's memory: attached through
//! [`attach`], checked, and driven with verified I/O.

use crate::queue::{qps_of, Ctx, Qp};
use crate::stub::{counters, open_stub, Counters, StubMem};
use crate::verify::{final_check, verified_io};
use crate::{Device, BASE_LBA, DOORBELLS, PAGE, SLOT_BYTES};
use anyhow::{ensure, Result};
use bam::io::attach::{attach, Attached, ControllerLink, Regions, Sizes};
use bam::io::IoConfig;
use std::time::Instant;

/// An attachment and the stand-in's memory under it.
pub(crate) struct Attachment {
    /// The queue region.
    pub(crate) queues: StubMem,
    /// The I/O buffer region.
    pub(crate) buf: StubMem,
    pub(crate) a: Attached,
    pub(crate) sizes: Sizes,
    /// The stand-in's counters right after the attach.
    pub(crate) c1: Counters,
}

/// Allocates the queue and buffer regions (sizes from [`Sizes::of`]), attaches the
/// controller with both, checks what the attach made and writes the PRP lists into the
/// buffer region.
pub(crate) fn attach_one(dev: &Device, cfg: &IoConfig) -> Result<Attachment> {
    let sizes = Sizes::of(cfg);
    let stub = open_stub()?;
    let queues = StubMem::alloc(&stub, sizes.queue_stride as usize)?;
    let buf = StubMem::alloc(&stub, sizes.buf_len as usize)?;
    println!(
        "stub memory: queues {:#x}+{:#x}, buffer {:#x}+{:#x} (prp_off {:#x}, prp_stride {})",
        queues.dev(),
        queues.len,
        buf.dev(),
        buf.len,
        sizes.prp_off,
        sizes.prp_stride
    );
    let link = ControllerLink {
        transport: dev.t.clone(),
        doorbells: DOORBELLS,
        doorbells_len: dev.bar0,
        mmio: true,
    };
    let regions = Regions {
        queues: queues.dev(),
        queue_stride: sizes.queue_stride,
        buf: buf.dev(),
    };
    let a = attach(vec![link], regions, cfg)?;
    let c1 = counters()?;
    let att = Attachment {
        queues,
        buf,
        a,
        sizes,
        c1,
    };
    check_attachment(&att, dev.c0, cfg)?;
    // the "device library's" tables: PRP lists at prp_off of the buffer region
    let a = &att.a;
    let prp_bytes: Vec<u8> = a.prp_lists.iter().flat_map(|p| p.to_le_bytes()).collect();
    att.buf.write(a.buf.prp_off, &prp_bytes);
    Ok(att)
}

/// Checks what the attach made: two stub mappings held, the queue pairs asked for, the
/// buffer where it was put on 64 KiB pages, blocks the I/O can use and a namespace that
/// holds every slot.
fn check_attachment(att: &Attachment, c0: Counters, cfg: &IoConfig) -> Result<()> {
    let (a, c1, sizes) = (&att.a, att.c1, &att.sizes);
    ensure!(
        c1.live_dma_mappings == c0.live_dma_mappings + 2
            && c1.live_page_tables == c0.live_page_tables + 2,
        "attach should hold two stub mappings: {c0:?} -> {c1:?}"
    );
    ensure!(a.qps.len() == cfg.queues as usize && a.ssds.len() == 1);
    ensure!(a.buf.base == att.buf.dev() && a.buf.len == sizes.buf_len);
    ensure!(
        a.buf.iova_shift == 16,
        "stub pages are 64 KiB, iova_shift {}",
        a.buf.iova_shift
    );
    let table_len = a.iova_table.as_ref().map_or(0, |t| t.len());
    println!(
        "attached: {} queue pairs of {} entries (qids {:?}), {} B blocks, {} blocks; \
         IOVA table {} entries ({}), {} PRP list entries",
        a.qps.len(),
        cfg.depth,
        a.qps.iter().map(|q| q.qid).collect::<Vec<_>>(),
        a.lba_size,
        a.ns_blocks,
        table_len,
        if a.iova_table.is_some() {
            "translated"
        } else {
            "identity"
        },
        a.prp_lists.len()
    );
    ensure!(a.lba_size.is_power_of_two() && a.lba_size as u64 <= PAGE);
    ensure!(
        a.ns_blocks >= BASE_LBA + cfg.nslots as u64 * SLOT_BYTES / a.lba_size as u64,
        "namespace too small"
    );
    Ok(())
}

/// Verified I/O through every queue pair of the attachment, then every written slot read
/// once more; returns the CPU's queue pairs for what follows.
pub(crate) fn verify_attachment(
    dev: &Device,
    att: &Attachment,
    cfg: &IoConfig,
    ios: u64,
) -> Result<Vec<Qp>> {
    let mut qps = qps_of(&att.a, att.queues.dev());
    let cx = Ctx::new(&dev.t, &att.a, &att.queues, &att.buf, cfg.timeout);
    let slots_per_qp = cfg.nslots as u64 / cfg.queues as u64;
    let mut last = vec![None; cfg.nslots as usize];
    let t0 = Instant::now();
    let n = verified_io(&cx, &mut qps, ios, slots_per_qp, &mut last)?;
    let m = final_check(&cx, &mut qps, slots_per_qp, &last)?;
    println!(
        "verified I/O: {n} I/Os over {} queue pairs, {m} slots re-read, in {:.1} s",
        qps.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(qps)
}
