//! Verified I/O through the CPU-driven queue pairs: writes of a known pattern, read back
//! and compared byte for byte.

use crate::queue::{run_batch, Ctx, GpuIoError, Io, Qp};
use crate::SLOT_BYTES;
use anyhow::Result;

/// Content of `len` bytes at `lba` written in `round`: every 8 bytes name the LBA, the
/// round and the byte, so a misplaced or stale block is caught.
pub(crate) fn fill(lba: u64, round: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    for i in 0..len / 8 {
        let x = (lba << 24) ^ (round << 44) ^ (i as u64) ^ 0x5bd1_e995_0000_0000;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

/// A xorshift generator of the slots and sizes of the I/Os.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The verified I/O phase; returns the number of I/Os done. `last` records the last
/// round written to every slot.
pub(crate) fn verified_io(
    cx: &Ctx,
    qps: &mut [Qp],
    ios: u64,
    slots_per_qp: u64,
    last: &mut [Option<(u32, u64)>],
) -> Result<u64> {
    let slot_blocks = (SLOT_BYTES / cx.lba_size) as u32;
    let batch = (qps[0].depth - 1).min(slots_per_qp as u32) as usize;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut done = 0u64;
    let mut round = 0u64;
    while done < ios {
        round += 1;
        let mut writes: Vec<Vec<Io>> = Vec::new();
        let mut datas: Vec<Vec<Vec<u8>>> = Vec::new();
        for qi in 0..qps.len() as u64 {
            let mut b: Vec<Io> = Vec::new();
            let mut d = Vec::new();
            while b.len() < batch {
                let slot = qi * slots_per_qp + rng.next() % slots_per_qp;
                let slot_off = slot * SLOT_BYTES;
                if b.iter().any(|io| io.buf_off / SLOT_BYTES == slot) {
                    continue;
                }
                // 1..=slot_blocks blocks at a block offset inside the slot: PRP1 only,
                // PRP1+PRP2, and PRP lists, page-aligned or not
                let blocks = 1 + (rng.next() % slot_blocks as u64) as u32;
                let shift = rng.next() % (slot_blocks - blocks + 1) as u64;
                let io = Io {
                    write: true,
                    lba: cx.base_lba + slot * slot_blocks as u64,
                    blocks,
                    buf_off: slot_off + shift * cx.lba_size,
                };
                let data = fill(io.lba, round, blocks as usize * cx.lba_size as usize);
                cx.buf.write(io.buf_off, &data);
                last[slot as usize] = Some((blocks, round));
                b.push(io);
                d.push(data);
            }
            writes.push(b);
            datas.push(d);
        }
        run_batch(cx, qps, &writes)?;
        // scribble over the slots, read back into them
        let reads: Vec<Vec<Io>> = writes
            .iter()
            .map(|b| {
                b.iter()
                    .map(|io| {
                        cx.buf.write(
                            io.buf_off,
                            &vec![0xa5; io.blocks as usize * cx.lba_size as usize],
                        );
                        Io {
                            write: false,
                            ..*io
                        }
                    })
                    .collect()
            })
            .collect();
        run_batch(cx, qps, &reads)?;
        for (b, d) in reads.iter().zip(&datas) {
            for (io, want) in b.iter().zip(d) {
                let mut got = vec![0u8; want.len()];
                cx.buf.read(io.buf_off, &mut got);
                if let Some(at) = got.iter().zip(want).position(|(x, y)| x != y) {
                    return Err(GpuIoError::Mismatch { lba: io.lba, at }.into());
                }
            }
            done += 2 * b.len() as u64;
        }
    }
    Ok(done)
}

/// Reads every written slot once more (full slots, through PRP lists) and checks its
/// last write.
pub(crate) fn final_check(
    cx: &Ctx,
    qps: &mut [Qp],
    slots_per_qp: u64,
    last: &[Option<(u32, u64)>],
) -> Result<u64> {
    let slot_blocks = (SLOT_BYTES / cx.lba_size) as u32;
    let batch = (qps[0].depth - 1) as u64;
    let mut n = 0;
    let mut start = 0u64;
    while start < slots_per_qp {
        let end = (start + batch).min(slots_per_qp);
        let mut reads: Vec<Vec<Io>> = Vec::new();
        for qi in 0..qps.len() as u64 {
            let b: Vec<Io> = (start..end)
                .map(|s| qi * slots_per_qp + s)
                .filter(|&s| last[s as usize].is_some())
                .map(|s| {
                    cx.buf.write(s * SLOT_BYTES, &[0x5a; SLOT_BYTES as usize]);
                    Io {
                        write: false,
                        lba: cx.base_lba + s * slot_blocks as u64,
                        blocks: slot_blocks,
                        buf_off: s * SLOT_BYTES,
                    }
                })
                .collect();
            reads.push(b);
        }
        run_batch(cx, qps, &reads)?;
        for b in &reads {
            for io in b {
                let slot = (io.buf_off / SLOT_BYTES) as usize;
                let (blocks, round) = last[slot].unwrap();
                let want = fill(io.lba, round, blocks as usize * cx.lba_size as usize);
                let mut got = vec![0u8; want.len()];
                cx.buf.read(io.buf_off, &mut got);
                if let Some(at) = got.iter().zip(&want).position(|(x, y)| x != y) {
                    return Err(GpuIoError::Mismatch { lba: io.lba, at }.into());
                }
                n += 1;
            }
        }
        start = end;
    }
    Ok(n)
}
