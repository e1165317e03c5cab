//! Two "GPUs" sharing one controller (`--shared`).

use crate::queue::{qps_of, Ctx};
use crate::stub::{counters, open_stub, StubMem};
use crate::verify::{final_check, verified_io};
use crate::{Device, BASE_LBA, DOORBELLS, SLOT_BYTES};
use anyhow::{ensure, Result};
use bam::io::attach::{attach_queues, bring_up, Attached, DoorbellWindow, Regions, Sizes};
use bam::io::IoConfig;
use bam_nvme::Transport;
use std::sync::Arc;

/// Two "GPUs" (two allocations of the stand-in's memory) sharing one controller, as
/// `IoArray::on_shared` does: the controller is brought up once with queue pairs for
/// both, each attaches its own (distinct queue ids), verified I/O runs through each on
/// its own LBAs, the second detaches (its queue pairs deleted on the controller) while
/// the first's go on working, then the first detaches and the stand-in's counters are
/// back where they were.
pub(crate) fn run_shared(dev: &Device, cfg: &IoConfig, ios: u64) -> Result<()> {
    let (t, bar0, c0) = (&dev.t, dev.bar0, dev.c0);
    let sizes = Sizes::of(cfg);
    let stub = open_stub()?;
    let transport: Arc<dyn Transport> = t.clone();
    let ctrls = bring_up(&[transport], 2 * cfg.queues)?;
    let window = DoorbellWindow {
        addr: DOORBELLS,
        len: bar0,
        mmio: true,
    };
    let mut gpus = Vec::new();
    for _ in 0..2 {
        let queues = StubMem::alloc(&stub, sizes.queue_stride as usize)?;
        let buf = StubMem::alloc(&stub, sizes.buf_len as usize)?;
        let regions = Regions {
            queues: queues.dev(),
            queue_stride: sizes.queue_stride,
            buf: buf.dev(),
        };
        let a = attach_queues(&ctrls, &[window], regions, cfg, true)?;
        let prp_bytes: Vec<u8> = a.prp_lists.iter().flat_map(|p| p.to_le_bytes()).collect();
        buf.write(a.buf.prp_off, &prp_bytes);
        gpus.push((queues, buf, a));
    }
    let qids = |a: &Attached| a.qps.iter().map(|q| q.qid).collect::<Vec<_>>();
    let (q0, q1) = (qids(&gpus[0].2), qids(&gpus[1].2));
    ensure!(
        q0.iter().all(|q| !q1.contains(q)),
        "the two attachments share queue ids: {q0:?} and {q1:?}"
    );
    println!("shared controller: attachment 0 has qids {q0:?}, attachment 1 {q1:?}");
    let slots_per_qp = cfg.nslots as u64 / cfg.queues as u64;
    // Each attachment's slots on their own LBAs.
    let span = cfg.nslots as u64 * SLOT_BYTES / gpus[0].2.lba_size as u64;
    ensure!(
        gpus[0].2.ns_blocks >= BASE_LBA + 2 * span,
        "namespace too small for two attachments"
    );
    let mut lasts = Vec::new();
    let mut qpss = Vec::new();
    for (g, (queues, buf, a)) in gpus.iter().enumerate() {
        let mut cx = Ctx::new(t, a, queues, buf, cfg.timeout);
        cx.base_lba = BASE_LBA + g as u64 * span;
        let mut qps = qps_of(a, queues.dev());
        let mut last = vec![None; cfg.nslots as usize];
        let n = verified_io(&cx, &mut qps, ios, slots_per_qp, &mut last)?;
        println!("attachment {g}: {n} verified I/Os over qids {:?}", qids(a));
        lasts.push(last);
        qpss.push(qps);
    }
    // Attachment 1 detaches: its queue pairs are deleted; the controller stays up.
    let (q1m, b1m, a1) = gpus.pop().expect("two attachments");
    ensure!(a1.release(), "deleting attachment 1's queue pairs failed");
    drop((b1m, q1m));
    let (queues, buf, a0) = &gpus[0];
    let cx = Ctx::new(t, a0, queues, buf, cfg.timeout);
    let m = final_check(&cx, &mut qpss[0], slots_per_qp, &lasts[0])?;
    let mut last = lasts[0].clone();
    let n = verified_io(&cx, &mut qpss[0], ios / 2, slots_per_qp, &mut last)?;
    println!("after attachment 1 detached: attachment 0 re-read {m} slots and did {n} more verified I/Os");
    let (q0m, b0m, a0) = gpus.pop().expect("attachment 0");
    ensure!(a0.release(), "deleting attachment 0's queue pairs failed");
    drop((b0m, q0m));
    drop(ctrls);
    let c2 = counters()?;
    ensure!(
        c2 == c0,
        "stub counters after both detached {c2:?}, before {c0:?}"
    );
    Ok(())
}
