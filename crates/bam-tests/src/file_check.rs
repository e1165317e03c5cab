//! The file backend's CPU service driven from the CPU alone: [`Producer`] plays the GPU
//! forwarder's part of the ring protocol (crates/bam/cuda/src/file_abi.h), and
//! [`check`] runs the service's verification on a file or block device (verified writes,
//! flush, verified reads; an expected error range; a full file system). Used by
//! `tests/file_service.rs` and by `bam-file-check` in the QEMU guest (an NVMe-oF
//! namespace, a device-mapper error target, a full tmpfs).

use bam::storage::file::abi::*;
use bam::storage::file::rings::QueueRings;
use bam::storage::file::service::{status, Files, Service};
use bam::storage::file::{FileConfig, FileMode};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes per staging slot of the rings the checks use.
pub const SLOT: u32 = 8192;

/// The forwarder's side of one queue's rings: free slots, request and completion counts.
pub struct Producer {
    /// The rings.
    pub rings: QueueRings,
    /// Staging slots not in flight.
    pub free: VecDeque<u16>,
    /// Requests posted.
    pub req_prod: u32,
    /// Completions taken.
    pub cpl_cons: u32,
}

impl Producer {
    /// A producer on fresh `rings`.
    pub fn new(rings: QueueRings) -> Self {
        let n = rings.layout().nslots as u16;
        Producer {
            rings,
            free: (0..n).collect(),
            req_prod: 0,
            cpl_cons: 0,
        }
    }

    /// Posts a request; `fill` writes its staging slot first (writes). None when no slot
    /// is free.
    pub fn post(
        &mut self,
        op: u8,
        ssd: u16,
        offset: u64,
        bytes: u32,
        fill: impl FnOnce(&mut [u8]),
    ) -> Option<u16> {
        let slot = self.free.pop_front()?;
        let p = self.rings.staging(slot)?;
        // SAFETY: the slot is ours (free, so the service does not touch it) and SLOT
        // bytes long.
        fill(unsafe { std::slice::from_raw_parts_mut(p, SLOT as usize) });
        self.post_raw(FileReq {
            offset,
            bytes,
            slot,
            op,
            pad: 0,
            ssd,
            status: 0,
            seq: self.req_prod,
        });
        Some(slot)
    }

    /// Posts `r` as it is (malformed requests too).
    pub fn post_raw(&mut self, r: FileReq) {
        self.rings.set_req(self.req_prod, r);
        self.req_prod += 1;
        self.rings.publish_reqs(self.req_prod);
    }

    /// Waits (bounded: 20 s) for the next completion: (slot, status, the slot's bytes).
    pub fn complete_next(&mut self) -> Result<(u16, u16, Vec<u8>), String> {
        let t0 = Instant::now();
        while self.rings.cpl_prod() == self.cpl_cons {
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(format!(
                    "no completion in 20 s ({} requests posted, {} completions taken)",
                    self.req_prod, self.cpl_cons
                ));
            }
            std::thread::yield_now();
        }
        let c = self.rings.cpl(self.cpl_cons);
        self.cpl_cons += 1;
        let p = self
            .rings
            .staging(c.slot)
            .ok_or_else(|| format!("completion names slot {}", c.slot))?;
        // SAFETY: the completed slot is ours again, SLOT bytes long.
        let data = unsafe { std::slice::from_raw_parts(p, SLOT as usize) }.to_vec();
        self.free.push_back(c.slot);
        Ok((c.slot, c.status, data))
    }
}

/// The verification pattern of file `ssd` at byte `off`, generation `gen`.
pub fn pattern(ssd: u32, off: u64, len: usize, gen: u32) -> Vec<u8> {
    let mut v = vec![0u8; len];
    bam::pattern::fill(&mut v, ssd, off, gen);
    v
}

/// What [`check`] does.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// The file or block device (written: its data is lost).
    pub path: PathBuf,
    /// `O_DIRECT`.
    pub direct: bool,
    /// Bytes checked from the start (at most the file's size).
    pub bytes: u64,
    /// Bytes `[start, end)` that must fail: reads with a media error, writes with a
    /// write fault (a device-mapper error target there).
    pub error_range: Option<(u64, u64)>,
    /// The file is larger than its file system has room for: writes must end with
    /// Capacity Exceeded before the end, and none may claim success that did not land.
    pub expect_full: bool,
}

/// One round of [`check`]: up to 16 blocks of 4 KiB a queue from block `*b` on (`op`: a
/// write carries the block's generation-5 pattern), then each completion handed to
/// `done` (block, status, the slot's bytes).
fn round(
    prods: &mut [Producer],
    op: u8,
    b: &mut u64,
    blocks: u64,
    mut done: impl FnMut(u64, u16, &[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let mut posted: Vec<Vec<(u16, u64)>> = vec![Vec::new(); prods.len()];
    for (qi, p) in prods.iter_mut().enumerate() {
        while posted[qi].len() < 16 && *b < blocks {
            let off = *b * 4096;
            let slot = p
                .post(op, 0, off, 4096, |s| {
                    if op == BAM_FILE_OP_WRITE {
                        s[..4096].copy_from_slice(&pattern(0, off, 4096, 5))
                    }
                })
                .ok_or("no free slot")?;
            posted[qi].push((slot, *b));
            *b += 1;
        }
    }
    for (qi, p) in prods.iter_mut().enumerate() {
        for _ in 0..posted[qi].len() {
            let (slot, st, data) = p.complete_next()?;
            let &(_, blk) = posted[qi]
                .iter()
                .find(|x| x.0 == slot)
                .ok_or("unknown slot")?;
            done(blk, st, &data)?;
        }
    }
    Ok(())
}

/// Verified writes (generation 5) over the checked bytes in 4 KiB blocks from 4 queues
/// on 2 threads, a flush, then verified reads; with `error_range`, the blocks there must
/// fail with their media status instead. With `expect_full`, writes go on until the file
/// system is full. Returns a line saying what was checked.
pub fn check(o: &CheckOptions) -> Result<String, String> {
    let cfg = FileConfig {
        mode: if o.direct {
            FileMode::Direct
        } else {
            FileMode::Buffered
        },
        writable: true,
        ..FileConfig::new(vec![o.path.clone()])
    };
    let files = Files::open(&cfg).map_err(|e| e.to_string())?;
    let size = files.media[0].size;
    let files = Arc::new(files);
    let rings: Vec<QueueRings> = (0..4)
        .map(|_| QueueRings::in_host_memory(32, SLOT).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let mut svc = Service::start(files, rings.clone(), 2).map_err(|e| e.to_string())?;
    let mut prods: Vec<Producer> = rings.into_iter().map(Producer::new).collect();
    let blocks = o.bytes.min(size) / 4096;
    let in_error = |b: u64| {
        o.error_range
            .is_some_and(|(s, e)| b * 4096 < e && s < (b + 1) * 4096)
    };
    let mut written = vec![false; blocks as usize];
    let mut full_at = None;
    // Through the page cache a write into the error range is taken by the cache; its
    // failure must come at the flush.
    let mut deferred = 0u64;
    // Writes, 16 blocks a queue a round, then their completions.
    let mut b = 0;
    while b < blocks && full_at.is_none() {
        round(
            &mut prods,
            BAM_FILE_OP_WRITE,
            &mut b,
            blocks,
            |blk, st, _| {
                let want_err = in_error(blk);
                match st {
                    0 if !want_err => written[blk as usize] = true,
                    0 if !o.direct => deferred += 1,
                    status::WRITE_FAULT if want_err => {}
                    status::CAPACITY_EXCEEDED if o.expect_full => {
                        full_at = Some(full_at.map_or(blk, |f: u64| f.min(blk)))
                    }
                    _ => {
                        return Err(format!(
                            "write of block {blk} (byte {}): status {st:#x}{}",
                            blk * 4096,
                            if want_err {
                                ", expected a write fault"
                            } else {
                                ""
                            }
                        ))
                    }
                }
                Ok(())
            },
        )?;
    }
    if o.expect_full && full_at.is_none() {
        return Err(format!(
            "{} blocks written without Capacity Exceeded on a file larger than its file system",
            blocks
        ));
    }
    prods[0]
        .post(BAM_FILE_OP_FLUSH, 0, 0, 0, |_| {})
        .ok_or("no free slot")?;
    let (_, st, _) = prods[0].complete_next()?;
    if deferred > 0 {
        if st != status::WRITE_FAULT {
            return Err(format!(
                "{deferred} writes into the error range were taken by the page cache and the \
                 flush completed with {st:#x}, not a write fault: a lost write reported as written"
            ));
        }
    } else if st != 0 && !o.expect_full {
        return Err(format!("flush: status {st:#x}"));
    }
    // Reads of every block: written ones verified, error ones failing.
    let (mut verified, mut failed) = (0u64, 0u64);
    let mut b = 0;
    while b < blocks {
        round(
            &mut prods,
            BAM_FILE_OP_READ,
            &mut b,
            blocks,
            |blk, st, data| {
                let off = blk * 4096;
                if in_error(blk) {
                    // Through the page cache, a block whose write-back failed may still be
                    // read from the cache.
                    if st == 0 && !o.direct {
                        return Ok(());
                    }
                    if st != status::UNRECOVERED_READ {
                        return Err(format!(
                            "read of block {blk} in the error range: status {st:#x}"
                        ));
                    }
                    failed += 1;
                } else if st != 0 {
                    return Err(format!("read of block {blk} (byte {off}): status {st:#x}"));
                } else if written[blk as usize] {
                    if data[..4096] != pattern(0, off, 4096, 5)[..] {
                        return Err(format!(
                            "block {blk} (byte {off}) reads other bytes than were written"
                        ));
                    }
                    verified += 1;
                }
                Ok(())
            },
        )?;
    }
    svc.stop();
    let errors = svc.control().errors();
    Ok(format!(
        "{} blocks of {} B: {verified} written and read back verified, {failed} failed as expected{}{}; {} errors recorded by the service{}",
        blocks,
        4096,
        if deferred > 0 {
            format!(", {deferred} writes taken by the page cache failed at the flush")
        } else {
            String::new()
        },
        full_at.map_or(String::new(), |f| format!(", file system full at block {f}")),
        errors.len(),
        errors.first().map_or(String::new(), |e| format!(" (first: {}, errno {})", e.what, e.errno))
    ))
}
