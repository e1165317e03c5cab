//! The revocation (`--revoke`): the buffer region freed under queued commands, and every
//! check that nothing reached the freed memory or the disk.

use crate::attachment::Attachment;
use crate::dmesg::{check_dmesg, kmsg};
use crate::queue::{run_batch, Ctx, GpuIoError, Io, Qp};
use crate::stub::{counters, Counters, StubMem};
use crate::verify::fill;
use crate::{Args, Device, Log, BASE_LBA, SLOT_BYTES};
use anyhow::{bail, ensure, Context, Result};
use bam::io::attach::{Attached, Sizes, GPU_PAGE};
use bam::io::IoConfig;
use bam_nvme::transport::kmod::KmodTransport;
use bam_nvme::{Controller, ControllerOptions, Transport};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Commands of each kind queued when the buffer is revoked.
const REVOKE_CMDS: usize = 8;

/// Frees the buffer region under queued writes and reads of queue pair 0 and checks the
/// outcome: the controller stopped, every command failed or timed out, the queue memory
/// untouched, REVOKED reported at release, the disk unchanged and every DMAR fault at a
/// revoked address of this controller.
pub(crate) fn revoke(
    dev: Device,
    att: Attachment,
    mut qps: Vec<Qp>,
    cfg: &IoConfig,
    args: &Args,
    log: &Log,
) -> Result<()> {
    let Attachment {
        queues,
        mut buf,
        a,
        sizes,
        c1,
    } = att;
    let t = &dev.t;
    let cx = Ctx::new(t, &a, &queues, &buf, cfg.timeout);
    let slot_blocks = (SLOT_BYTES / cx.lba_size) as u32;
    // slots 0..8 of queue pair 0 are written (round 1000), verified; 8..16 are read
    let w_slots: Vec<u64> = (0..REVOKE_CMDS as u64).collect();
    let queued = queue_doomed(&cx, &mut qps, &w_slots, cfg)?;
    let revoked_pages: Vec<u64> = a.iova_table.clone().unwrap_or_else(|| {
        (0..buf.len as u64 / GPU_PAGE)
            .map(|i| buf.dev() + i * GPU_PAGE)
            .collect()
    });
    let marker = format!(
        "bam-gpuio: {}: revoking the I/O buffer under {} queued commands",
        dev.bdf,
        queued.len()
    );
    kmsg(&marker)?;
    buf.free()?;
    check_freed(t, c1)?;
    // the queue memory is still there; only the buffer is gone
    let cx = Ctx::new(t, &a, &queues, &buf, cfg.timeout);
    cx.ring(&mut qps[0]);
    let outcome = reap_revoked(&cx, &mut qps[0], &queued)?;
    println!("revocation: {outcome}");
    // let the kernel print the IOMMU faults of the blocked accesses
    std::thread::sleep(Duration::from_secs(2));
    let end_marker = format!("bam-gpuio: {}: revocation done", dev.bdf);
    kmsg(&end_marker)?;

    check_queue_memory(&queues, &a, &sizes, &qps[0], cfg)?;
    release_revoked(a, log, dev.c0)?;
    drop(queues);
    // a revoked file maps nothing more (ENOTRECOVERABLE): close it and open the device anew
    let Device { t, bdf, .. } = dev;
    drop(t);
    let t = reopen(args.path())?;
    check_disk(&t, &w_slots, slot_blocks)?;

    // the IOMMU faults logged meanwhile: only this controller, only revoked addresses
    check_dmesg(
        &bdf,
        (&marker, &end_marker),
        &revoked_pages,
        args.allowed_dmesg.as_deref(),
    )?;
    Ok(())
}

/// A whole slot `s` of the buffer to or from its LBAs.
fn full(cx: &Ctx, s: u64, write: bool) -> Io {
    let slot_blocks = (SLOT_BYTES / cx.lba_size) as u32;
    Io {
        write,
        lba: BASE_LBA + s * slot_blocks as u64,
        blocks: slot_blocks,
        buf_off: s * SLOT_BYTES,
    }
}

/// Writes the slots `w_slots` of queue pair 0 (round 1000) and verifies them, then queues
/// (without ringing) writes of new content (round 2000) to them and reads of as many
/// slots after them; returns the queued commands, in command id order.
fn queue_doomed(cx: &Ctx, qps: &mut [Qp], w_slots: &[u64], cfg: &IoConfig) -> Result<Vec<Io>> {
    let slots_per_qp = cfg.nslots as u64 / cfg.queues as u64;
    let r_slots: Vec<u64> = (REVOKE_CMDS as u64..2 * REVOKE_CMDS as u64).collect();
    ensure!(2 * REVOKE_CMDS as u64 <= slots_per_qp && 2 * REVOKE_CMDS < cfg.depth as usize);
    let before: Vec<Io> = w_slots.iter().map(|&s| full(cx, s, true)).collect();
    for io in &before {
        cx.buf
            .write(io.buf_off, &fill(io.lba, 1000, SLOT_BYTES as usize));
    }
    let mut batches: Vec<Vec<Io>> = vec![Vec::new(); qps.len()];
    batches[0] = before;
    run_batch(cx, qps, &batches)?;
    // new content for the writes that must not land
    let mut queued = Vec::new();
    for &s in w_slots {
        let io = full(cx, s, true);
        cx.buf
            .write(io.buf_off, &fill(io.lba, 2000, SLOT_BYTES as usize));
        queued.push(io);
    }
    queued.extend(r_slots.iter().map(|&s| full(cx, s, false)));
    for (i, io) in queued.iter().enumerate() {
        cx.submit(&mut qps[0], io, i as u16);
    }
    Ok(queued)
}

/// Checks that freeing the buffer ran one free callback of the stand-in and that the
/// module's callback stopped the controller before it released the DMA mapping.
fn check_freed(t: &KmodTransport, c1: Counters) -> Result<()> {
    let c2 = counters()?;
    ensure!(
        c2.callbacks == c1.callbacks + 1
            && c2.live_dma_mappings == c1.live_dma_mappings - 1
            && c2.live_page_tables == c1.live_page_tables - 1,
        "freeing the buffer should run one free callback: {c1:?} -> {c2:?}"
    );
    println!("buffer freed under the mapping: stub counters {c1:?} -> {c2:?}");
    // the module's free callback stopped the controller before it released the DMA
    // mapping (CC.EN = 0, bus mastering off): nothing can reach the freed addresses
    let (cc, csts) = (t.read32(0x14), t.read32(0x1c));
    ensure!(
        cc & 1 == 0 && csts & 1 == 0,
        "the revocation should have stopped the controller: CC {cc:#x} CSTS {csts:#x}"
    );
    println!("controller stopped by the revocation: CC {cc:#x} CSTS {csts:#x}");
    Ok(())
}

/// Waits for the revoked commands of `q`: every one must fail with an NVMe status, or
/// the bounded wait end (what a stopped controller gives); says which.
fn reap_revoked(cx: &Ctx, q: &mut Qp, queued: &[Io]) -> Result<String> {
    Ok(match cx.reap(q, queued.len()) {
        Ok(done) => {
            let mut bad = Vec::new();
            for (cid, status) in &done {
                println!(
                    "  revoked {} (cid {cid}): {status}",
                    if queued[*cid as usize].write {
                        "write"
                    } else {
                        "read"
                    }
                );
                if status.is_success() {
                    bad.push(*cid);
                }
            }
            ensure!(
                bad.is_empty(),
                "commands {bad:?} succeeded although their PRP lists were revoked"
            );
            let e = GpuIoError::Nvme {
                qid: q.qid,
                cid: done[0].0,
                status: done[0].1,
            };
            format!("every command failed with an NVMe status, e.g. {e}")
        }
        Err(e @ GpuIoError::Timeout { .. }) => format!("bounded wait ended: {e}"),
        Err(e) => return Err(e.into()),
    })
}

/// The sentinel: the queue memory outside the CQ entries that completed is unchanged
/// (SQs hold our SQEs; the queue protocol's areas and the rest must still be zero), and
/// no completion stands beyond the ones reaped from `q0`.
fn check_queue_memory(
    queues: &StubMem,
    a: &Attached,
    sizes: &Sizes,
    q0: &Qp,
    cfg: &IoConfig,
) -> Result<()> {
    let qbase = queues.dev();
    let mut qmem = vec![0u8; queues.len];
    queues.read(0, &mut qmem);
    let layout = sizes.layout;
    for (i, q) in a.qps.iter().enumerate() {
        let base = (q.sq - qbase) as usize - layout.sq;
        let zero = &qmem[base + layout.slots..base + layout.size];
        ensure!(
            zero.iter().all(|&b| b == 0),
            "queue pair {i}: its unused area was written"
        );
    }
    let used = layout.size * cfg.queues as usize;
    ensure!(
        qmem[used..].iter().all(|&b| b == 0),
        "queue memory beyond the queue pairs was written"
    );
    // no completion beyond the ones reaped
    let off = q0.cq_off as usize + q0.head as usize * 16;
    let st = u16::from_le_bytes([qmem[off + 14], qmem[off + 15]]);
    ensure!(
        st & 1 != q0.phase as u16,
        "stray completion in CQ slot {}",
        q0.head
    );
    Ok(())
}

/// Releases the attachment (controllers shut down, then UNMAP): the buffer's mapping must
/// report REVOKED once, and the stand-in's counters be back but for the one callback.
fn release_revoked(a: Attached, log: &Log, c0: Counters) -> Result<()> {
    let before_release = log.lock().unwrap().len();
    a.release();
    let text = String::from_utf8_lossy(&log.lock().unwrap()[before_release..]).into_owned();
    let revoked_warnings = text
        .matches("GPU memory was freed while still mapped")
        .count();
    ensure!(
        revoked_warnings == 1,
        "UNMAP should report the revoked mapping once, log: {text}"
    );
    println!("UNMAP reported the revoked buffer mapping (REVOKED)");
    let c3 = counters()?;
    ensure!(
        c3.live_dma_mappings == c0.live_dma_mappings
            && c3.live_page_tables == c0.live_page_tables
            && c3.callbacks == c0.callbacks + 1,
        "stub counters after release {c3:?}, at start {c0:?}"
    );
    Ok(())
}

/// Opens the device again once the previous file is released (the release runs when the
/// last reference, a BAR mapping included, is gone).
fn reopen(path: &str) -> Result<Arc<KmodTransport>> {
    let start = Instant::now();
    loop {
        match KmodTransport::open(path) {
            Ok(t) => return Ok(t),
            Err(e) if start.elapsed() < Duration::from_secs(5) => {
                tracing::debug!("reopen {path}: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e).context("reopening the device after the revocation"),
        }
    }
}

/// The disk, read through a controller of its own: the revoked writes to `w_slots` did
/// not land (the slots hold what was written before, round 1000).
fn check_disk(t: &Arc<KmodTransport>, w_slots: &[u64], slot_blocks: u32) -> Result<()> {
    let ctrl = Controller::new(
        t.clone(),
        ControllerOptions {
            io_queue_pairs: 1,
            ..Default::default()
        },
    )?;
    let ns = ctrl.namespace(1)?;
    let mut qp = ctrl.create_io_queue_pair(8)?;
    for &s in w_slots {
        let lba = BASE_LBA + s * slot_blocks as u64;
        let mut got = vec![0u8; SLOT_BYTES as usize];
        qp.read_into(&ns, lba, &mut got)?;
        let want = fill(lba, 1000, SLOT_BYTES as usize);
        if let Some(at) = got.iter().zip(&want).position(|(x, y)| x != y) {
            bail!("LBA {lba}: a revoked write changed the disk (byte {at})");
        }
    }
    println!(
        "the {} revoked writes left the disk unchanged",
        w_slots.len()
    );
    drop(qp);
    drop(ctrl);
    Ok(())
}
