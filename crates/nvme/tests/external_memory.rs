//! The controller model serving I/O queues that live in external memory (as the GPU
//! runtime's host-side controller does with GPU memory), reached only through an
//! [`ExternalMemory`] DMA engine: queues created there, commands fetched in batches,
//! contiguous PRP pages moved in one access, data verified, and a failing DMA engine
//! turning into error statuses rather than wrong data.

use bam_nvme::model::{ExternalMemory, ModelConfig, ModelTransport};
use bam_nvme::spec::status::GenericStatus;
use bam_nvme::spec::{Cqe, Sqe};
use bam_nvme::{Controller, ControllerOptions, Transport};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Base "device address" of the fake GPU memory.
const BASE: u64 = 0x7f00_0000_0000;
const PAGE: u64 = 4096;

/// GPU memory stand-in: bytes at BASE, with a count of the DMA accesses.
struct FakeGpu {
    bytes: Mutex<Vec<u8>>,
    reads: AtomicUsize,
    writes: AtomicUsize,
    broken: AtomicBool,
}

impl FakeGpu {
    fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, String> {
        if self.broken.load(Ordering::Relaxed) {
            return Err("copy engine fault".into());
        }
        let o = addr.checked_sub(BASE).ok_or("below the memory")? as usize;
        Ok(o..o + len)
    }
    fn put(&self, addr: u64, data: &[u8]) {
        let o = (addr - BASE) as usize;
        self.bytes.lock()[o..o + data.len()].copy_from_slice(data);
    }
    fn get(&self, addr: u64, len: usize) -> Vec<u8> {
        let o = (addr - BASE) as usize;
        self.bytes.lock()[o..o + len].to_vec()
    }
}

impl ExternalMemory for FakeGpu {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String> {
        let r = self.range(addr, out.len())?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        out.copy_from_slice(&self.bytes.lock()[r]);
        Ok(())
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        let r = self.range(addr, data.len())?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes.lock()[r].copy_from_slice(data);
        Ok(())
    }
}

/// Layout of the fake memory: SQ, CQ, a PRP list page, then data pages.
const DEPTH: u32 = 64;
const SQ: u64 = BASE;
const CQ: u64 = BASE + 64 * DEPTH as u64;
const PRP_LIST: u64 = CQ + PAGE; // the CQ takes 1 KiB; lists start on a page
const DATA: u64 = PRP_LIST + PAGE;
const LEN: usize = (DATA - BASE) as usize + (1 << 20);

struct Rig {
    gpu: Arc<FakeGpu>,
    t: Arc<dyn Transport>,
    ctrl: Controller,
    _map: bam_nvme::transport::GpuMapping,
    raw: bam_nvme::RawQueuePair,
    qid: u16,
    sq_db: usize,
    cq_db: usize,
    tail: u32,
    head: u32,
    phase: bool,
}

fn rig() -> Rig {
    let gpu = Arc::new(FakeGpu {
        bytes: Mutex::new(vec![0; LEN]),
        reads: AtomicUsize::new(0),
        writes: AtomicUsize::new(0),
        broken: AtomicBool::new(false),
    });
    let model = ModelConfig::ram(8 << 20).build().unwrap();
    model.dma().set_external_memory(gpu.clone());
    let t: Arc<dyn Transport> = Arc::new(ModelTransport::new(model));
    let map = t.map_gpu(BASE, LEN).unwrap();
    let ctrl = Controller::new(t.clone(), ControllerOptions::default()).unwrap();
    // SAFETY: SQ and CQ lie in the external region `map` registered above, which the rig
    // keeps alive as long as the controller.
    let raw = unsafe { ctrl.create_raw_queue_pair(SQ, CQ, DEPTH) }.unwrap();
    Rig {
        gpu,
        t,
        ctrl,
        _map: map,
        raw,
        qid: raw.qid,
        sq_db: raw.sq_doorbell,
        cq_db: raw.cq_doorbell,
        tail: 0,
        head: 0,
        phase: true,
    }
}

impl Rig {
    /// Writes `cmds` into the SQ (data at DATA + i * stride, PRP list at PRP_LIST for
    /// transfers over two pages) and rings the doorbell once.
    fn submit(&mut self, cmds: &[Sqe]) {
        for c in cmds {
            self.gpu.put(SQ + 64 * self.tail as u64, &c.to_bytes());
            self.tail = (self.tail + 1) % DEPTH;
        }
        // SAFETY: this rig's own SQ doorbell; its queues and data live in the registered
        // external memory for the whole test.
        unsafe { self.t.write32(self.sq_db, self.tail) };
    }

    /// Takes `n` completions (the model completes inline, before the doorbell returns).
    fn reap(&mut self, n: usize) -> Vec<Cqe> {
        let mut out = Vec::new();
        for _ in 0..n {
            let b: [u8; 16] = self
                .gpu
                .get(CQ + 16 * self.head as u64, 16)
                .try_into()
                .unwrap();
            let c = Cqe::from_bytes(&b);
            assert_eq!(c.phase(), self.phase, "completion {} not posted", self.head);
            assert_eq!(c.sq_id, self.qid);
            out.push(c);
            self.head += 1;
            if self.head == DEPTH {
                self.head = 0;
                self.phase = !self.phase;
            }
        }
        // SAFETY: this rig's own CQ head doorbell, past the entries just consumed.
        unsafe { self.t.write32(self.cq_db, self.head) };
        out
    }
}

fn rw(write: bool, cid: u16, slba: u64, blocks: u32, prp1: u64, prp2: u64) -> Sqe {
    let mut s = if write {
        Sqe::write(1, slba, blocks)
    } else {
        Sqe::read(1, slba, blocks)
    };
    s.set_cid(cid);
    s.set_prps(prp1, prp2);
    s
}

#[test]
fn queues_in_external_memory_move_verified_data_in_few_accesses() {
    let mut r = rig();
    // 64 KiB write: 16 contiguous pages described by a PRP list.
    let data: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    r.gpu.put(DATA, &data);
    let list: Vec<u8> = (1..16u64)
        .flat_map(|p| (DATA + p * PAGE).to_le_bytes())
        .collect();
    r.gpu.put(PRP_LIST, &list);
    let (reads0, writes0) = (
        r.gpu.reads.load(Ordering::Relaxed),
        r.gpu.writes.load(Ordering::Relaxed),
    );
    r.submit(&[rw(true, 1, 8, 128, DATA, PRP_LIST)]);
    let c = r.reap(1);
    assert!(c[0].status().is_success(), "{}", c[0].status());
    // One SQE fetch, one PRP list read, one data read; one CQE (two writes: status last).
    assert_eq!(r.gpu.reads.load(Ordering::Relaxed) - reads0, 3);
    assert_eq!(r.gpu.writes.load(Ordering::Relaxed) - writes0, 2);

    // Read it back elsewhere, with eight 4 KiB reads submitted at once: one SQE fetch.
    let (reads0, writes0) = (
        r.gpu.reads.load(Ordering::Relaxed),
        r.gpu.writes.load(Ordering::Relaxed),
    );
    let back = DATA + (512 << 10);
    let cmds: Vec<Sqe> = (0..8u64)
        .map(|i| rw(false, 10 + i as u16, 8 + 8 * i, 8, back + i * PAGE, 0))
        .collect();
    r.submit(&cmds);
    for c in r.reap(8) {
        assert!(c.status().is_success(), "{}", c.status());
    }
    assert_eq!(
        r.gpu.reads.load(Ordering::Relaxed) - reads0,
        1,
        "SQEs fetched in one batch"
    );
    assert_eq!(r.gpu.writes.load(Ordering::Relaxed) - writes0, 8 + 16);
    assert_eq!(r.gpu.get(back, 32768), data[..32768]);
}

#[test]
fn wrapping_batches_and_a_failing_dma_engine() {
    let mut r = rig();
    // Many rounds of 40 commands: the SQ wraps inside a batch.
    for round in 0..20u64 {
        let cmds: Vec<Sqe> = (0..40u64)
            .map(|i| {
                let lba = (round * 40 + i) % 1000;
                rw(i % 2 == 0, i as u16, lba, 1, DATA + i * PAGE, 0)
            })
            .collect();
        r.submit(&cmds);
        for (i, c) in r.reap(40).iter().enumerate() {
            assert!(
                c.status().is_success(),
                "round {round} cmd {i}: {}",
                c.status()
            );
        }
    }
    // A copy engine that fails: the queue memory itself becomes unreachable, so the
    // controller cannot fetch the command; it reports Controller Fatal Status rather
    // than completing anything (or hanging).
    r.gpu.put(DATA, &[0xAB; 512]);
    r.submit(&[rw(true, 7, 0, 1, DATA, 0)]);
    assert!(r.reap(1)[0].status().is_success());
    r.gpu.broken.store(true, Ordering::Relaxed);
    r.submit(&[rw(false, 8, 0, 1, DATA, 0)]);
    let csts = r.t.read32(0x1c);
    assert_eq!(
        csts & 2,
        2,
        "CSTS.CFS after the queue memory became unreachable"
    );
}

#[test]
fn unregistered_data_addresses_fail_with_data_transfer_error() {
    let mut r = rig();
    // PRP below the registered range: the model refuses it as it would under an IOMMU.
    r.submit(&[rw(false, 3, 0, 1, BASE - 2 * PAGE, 0)]);
    let c = r.reap(1);
    assert_eq!(
        c[0].status().generic_code(),
        Some(GenericStatus::DataTransferError),
        "{}",
        c[0].status()
    );
}

/// The recovery of a failed queue pair: deleted with its queue id kept, its CQ zeroed,
/// created again at the same memory; it starts empty (tail, head 0, phase 1) and carries
/// I/O again through the same doorbells.
#[test]
fn a_queue_pair_deleted_for_reuse_is_created_again_empty() {
    let mut r = rig();
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8).collect();
    r.gpu.put(DATA, &data);
    for i in 0..5u16 {
        r.submit(&[rw(true, i, 16 + i as u64 * 8, 8, DATA, 0)]);
        assert!(r.reap(1)[0].status().is_success());
    }
    r.ctrl.delete_raw_queue_pair_for_reuse(r.raw).unwrap();
    // Deleted: a second deletion names a queue that does not exist.
    assert!(r.ctrl.delete_raw_queue_pair_for_reuse(r.raw).is_err());
    r.gpu.put(CQ, &[0u8; 16 * DEPTH as usize]);
    // SAFETY: the same memory as before, still registered and alive (the rig's).
    unsafe { r.ctrl.recreate_raw_queue_pair(r.raw, SQ, CQ) }.unwrap();
    (r.tail, r.head, r.phase) = (0, 0, true);
    let back = DATA + 8 * PAGE;
    r.submit(&[rw(false, 0, 16 + 4 * 8, 8, back, 0)]);
    let c = r.reap(1);
    assert!(c[0].status().is_success(), "{}", c[0].status());
    assert_eq!(c[0].sq_head, 1, "the new queue starts at SQ head 0");
    assert_eq!(r.gpu.get(back, 4096), data);
}
