//! `qemu-guest-io`: the whole-stack I/O check that `cargo xtask qemu-test` runs inside
//! its QEMU guest, against real (emulated) NVMe controllers.
//!
//! ```text
//! qemu-guest-io --queues 16 --depth 32 --ios 12000 DEVICE...
//! ```
//!
//! For every DEVICE (`kmod:/dev/bam-nvmeN`, `kmod:BDF` or `vfio:BDF`) it brings the
//! controller up, creates `--queues` I/O queue pairs and runs one thread per queue pair,
//! all devices at once. Each thread owns a disjoint LBA region and does rounds of: a
//! batch of up to `--depth` random writes (random slot, 1..=8 blocks, content derived
//! from LBA and round), then reads of the same batch, verified byte for byte. At the end
//! every slot ever written is read back once more and checked against its last write.
//! It prints the I/O count per device and exits non-zero on any error or mismatch.

use anyhow::{bail, Context, Result};
use bam_nvme::transport::{kmod::KmodTransport, vfio::VfioTransport, Transport};
use bam_nvme::{Controller, ControllerOptions};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

const SLOT_BLOCKS: u64 = 8;

struct Args {
    devices: Vec<String>,
    queues: u16,
    depth: u32,
    ios: u64,
    seed: u64,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        devices: Vec::new(),
        queues: 16,
        depth: 32,
        ios: 12_000,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut val = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match s.as_str() {
            "--queues" => a.queues = val("--queues")?.parse()?,
            "--depth" => a.depth = val("--depth")?.parse()?,
            "--ios" => a.ios = val("--ios")?.parse()?,
            "--seed" => a.seed = val("--seed")?.parse()?,
            d if !d.starts_with('-') => a.devices.push(d.to_string()),
            other => bail!("unknown option {other}"),
        }
    }
    if a.devices.is_empty() {
        bail!("usage: qemu-guest-io [--queues N] [--depth N] [--ios N] [--seed N] DEVICE...");
    }
    Ok(a)
}

fn open(dev: &str) -> Result<Arc<dyn Transport>> {
    if let Some(p) = dev.strip_prefix("kmod:") {
        Ok(KmodTransport::open(p)?)
    } else if let Some(b) = dev.strip_prefix("vfio:") {
        Ok(VfioTransport::open(b)?)
    } else {
        bail!("device must be kmod:... or vfio:..., not {dev}")
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Content of `blocks` blocks at `lba` written in `round`: every 8 bytes name the
/// device, the LBA, the round and the byte offset, so a misplaced block is caught.
fn fill(buf: &mut [u8], dev: usize, lba: u64, round: u64) {
    for (i, c) in buf.chunks_exact_mut(8).enumerate() {
        let v = ((dev as u64) << 60) ^ (lba << 24) ^ (round << 40) ^ i as u64;
        c.copy_from_slice(&v.to_le_bytes());
    }
}

fn worker(
    dev_idx: usize,
    ctrl: &Controller,
    ns_id: u32,
    region: (u64, u64),
    depth: u32,
    ios: u64,
    seed: u64,
) -> Result<u64> {
    let ns = ctrl.namespace(ns_id)?;
    let bs = ns.block_size as usize;
    let mut qp = ctrl.create_io_queue_pair(depth.max(2))?;
    let slots = (region.1 - region.0) / SLOT_BLOCKS;
    if slots < depth as u64 {
        bail!("region too small: {slots} slots");
    }
    let mut rng = Rng(seed | 1);
    // slot -> (blocks, round) of its last write
    let mut written: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut done = 0u64;
    let mut round = 0u64;
    while done < ios {
        round += 1;
        let n = (depth as u64).min((ios - done).div_ceil(2)).max(1) as usize;
        // distinct slots for this batch
        let mut batch: Vec<(u64, u64)> = Vec::with_capacity(n);
        while batch.len() < n {
            let slot = rng.next() % slots;
            if batch.iter().all(|(s, _)| *s != slot) {
                batch.push((slot, 1 + rng.next() % SLOT_BLOCKS));
            }
        }
        let bufs: Vec<(u64, Vec<u8>)> = batch
            .iter()
            .map(|&(slot, blocks)| {
                let lba = region.0 + slot * SLOT_BLOCKS;
                let mut b = vec![0u8; blocks as usize * bs];
                fill(&mut b, dev_idx, lba, round);
                (lba, b)
            })
            .collect();
        let reqs: Vec<(u64, &[u8])> = bufs.iter().map(|(l, b)| (*l, b.as_slice())).collect();
        qp.write_many(&ns, &reqs)?;
        let mut back: Vec<(u64, Vec<u8>)> =
            bufs.iter().map(|(l, b)| (*l, vec![0u8; b.len()])).collect();
        {
            let mut rreqs: Vec<(u64, &mut [u8])> = back
                .iter_mut()
                .map(|(l, b)| (*l, b.as_mut_slice()))
                .collect();
            qp.read_many(&ns, &mut rreqs)?;
        }
        for ((lba, want), (_, got)) in bufs.iter().zip(&back) {
            if want != got {
                bail!("device {dev_idx}: read-back of LBA {lba} (round {round}) differs from what was written");
            }
        }
        for &(slot, blocks) in &batch {
            written.insert(slot, (blocks, round));
        }
        done += 2 * n as u64;
    }
    // final pass: every slot holds its last write
    for (&slot, &(blocks, r)) in &written {
        let lba = region.0 + slot * SLOT_BLOCKS;
        let mut want = vec![0u8; blocks as usize * bs];
        fill(&mut want, dev_idx, lba, r);
        let mut got = vec![0u8; want.len()];
        qp.read_into(&ns, lba, &mut got)?;
        done += 1;
        if got != want {
            bail!("device {dev_idx}: final check of LBA {lba} failed (last written in round {r})");
        }
    }
    Ok(done)
}

fn main() -> Result<()> {
    let a = parse_args()?;
    let t0 = Instant::now();
    let mut ctrls = Vec::new();
    for d in &a.devices {
        let t = open(d).with_context(|| format!("opening {d}"))?;
        let opts = ControllerOptions {
            io_queue_pairs: a.queues,
            ..ControllerOptions::default()
        };
        let c = Controller::new(t, opts).with_context(|| format!("bringing up {d}"))?;
        println!(
            "{d}: {} I/O queue pairs granted, namespace 1: {} blocks of {} bytes",
            c.io_queue_pairs(),
            c.namespace(1)?.blocks,
            c.namespace(1)?.block_size
        );
        if c.io_queue_pairs() < a.queues {
            bail!(
                "{d}: asked for {} queue pairs, got {}",
                a.queues,
                c.io_queue_pairs()
            );
        }
        ctrls.push(c);
    }
    let per_thread = a.ios / (a.devices.len() as u64 * a.queues as u64);
    let results: Vec<Result<u64>> = std::thread::scope(|s| {
        let mut hs = Vec::new();
        for (di, c) in ctrls.iter().enumerate() {
            let ns = c.namespace(1).expect("namespace 1");
            // the upper half of the namespace; the lower half is for the bam CLI tests
            let half = ns.blocks / 2;
            let span = half / a.queues as u64;
            for q in 0..a.queues as u64 {
                let region = (half + q * span, half + (q + 1) * span);
                let seed = a.seed ^ ((di as u64 + 1) << 32) ^ ((q + 1) * 0x9E37_79B9);
                hs.push(s.spawn(move || worker(di, c, 1, region, a.depth, per_thread, seed)));
            }
        }
        hs.into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let mut total = 0;
    for r in results {
        total += r?;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{total} verified I/Os on {} controller(s) x {} queue pairs in {secs:.1} s ({:.0} IOPS)",
        a.devices.len(),
        a.queues,
        total as f64 / secs
    );
    if total < a.ios {
        bail!("only {total} I/Os done, {} asked for", a.ios);
    }
    Ok(())
}
