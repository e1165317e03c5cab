//! The model's strictness, exercised with hand-built commands a correct driver never
//! sends.

use super::{ModelConfig, ModelTransport};
use crate::spec::registers::{doorbell_offset, offset};
use crate::spec::status::{CommandSpecificStatus as Cs, GenericStatus as G};
use crate::spec::{Aqa, Cc, Cqe, Csts, Sqe, Status};
use crate::transport::{DmaBuffer, Transport};

/// A minimal host that puts raw entries into queues and reads raw completions.
struct RawHost {
    t: ModelTransport,
    qs: Vec<RawQueue>,
}

struct RawQueue {
    sq: DmaBuffer,
    cq: DmaBuffer,
    sq_size: u16,
    cq_size: u16,
    tail: u16,
    head: u16,
    phase: bool,
}

impl RawQueue {
    fn new(sq: DmaBuffer, cq: DmaBuffer, sq_size: u16, cq_size: u16) -> Self {
        RawQueue {
            sq,
            cq,
            sq_size,
            cq_size,
            tail: 0,
            head: 0,
            phase: true,
        }
    }
    /// Writes an entry at the tail without ringing.
    fn put(&mut self, sqe: Sqe) {
        self.sq.write_volatile(self.tail as usize * 64, sqe);
        self.tail = (self.tail + 1) % self.sq_size;
    }
}

impl RawHost {
    fn new(cfg: ModelConfig) -> Self {
        let t = ModelTransport::new(cfg.build().unwrap());
        let sq = t.alloc_dma(16 * 64).unwrap();
        let cq = t.alloc_dma(16 * 16).unwrap();
        t.write32(offset::AQA, Aqa::new(16, 16).0);
        t.write64(offset::ASQ, sq.bus_addr(0));
        t.write64(offset::ACQ, cq.bus_addr(0));
        t.write32(offset::CC, Cc::standard().with_enabled(true).0);
        assert!(Csts(t.read32(offset::CSTS)).ready());
        RawHost {
            t,
            qs: vec![RawQueue::new(sq, cq, 16, 16)],
        }
    }

    /// Puts `sqe` in queue `q` and rings its doorbell.
    fn push(&mut self, q: usize, sqe: Sqe) {
        self.qs[q].put(sqe);
        let v = self.qs[q].tail as u32;
        self.t.write32(doorbell_offset(q as u16, false, 4), v);
    }

    /// Takes the next completion of queue `q`, if one was posted.
    fn pop(&mut self, q: usize) -> Option<Cqe> {
        let rq = &mut self.qs[q];
        let e: Cqe = rq.cq.read_volatile(rq.head as usize * 16);
        if e.phase() != rq.phase {
            return None;
        }
        rq.head += 1;
        if rq.head == rq.cq_size {
            rq.head = 0;
            rq.phase = !rq.phase;
        }
        let h = rq.head as u32;
        self.t.write32(doorbell_offset(q as u16, true, 4), h);
        Some(e)
    }

    fn run(&mut self, q: usize, sqe: Sqe) -> Status {
        self.push(q, sqe);
        self.pop(q).expect("completion posted").status()
    }

    /// Creates I/O queue pair `qid` with `sq_size`/`cq_size` entries.
    fn create(&mut self, qid: u16, sq_size: u16, cq_size: u16) {
        let sq = self.t.alloc_dma(sq_size as usize * 64).unwrap();
        let cq = self.t.alloc_dma(cq_size as usize * 16).unwrap();
        assert_eq!(
            self.run(0, Sqe::create_io_cq(qid, cq_size, cq.bus_addr(0))),
            Status::SUCCESS
        );
        assert_eq!(
            self.run(0, Sqe::create_io_sq(qid, sq_size, sq.bus_addr(0), qid)),
            Status::SUCCESS
        );
        assert_eq!(self.qs.len(), qid as usize);
        self.qs.push(RawQueue::new(sq, cq, sq_size, cq_size));
    }
}

fn with_cid(mut s: Sqe, cid: u16) -> Sqe {
    s.set_cid(cid);
    s
}

#[test]
fn io_command_validation() {
    let mut h = RawHost::new(ModelConfig::ram(1 << 20));
    h.create(1, 16, 16);
    let data = h.t.alloc_dma(8192).unwrap();
    let at = |o: usize| data.bus_addr(o);

    let mut s = Sqe::read(1, 0, 1);
    s.prp1 = at(0);
    assert_eq!(h.run(1, s), Status::SUCCESS);
    assert_eq!(
        h.run(1, Sqe::new(0x7F)).generic_code(),
        Some(G::InvalidOpcode)
    );
    let mut s = Sqe::read(2, 0, 1);
    s.prp1 = at(0);
    assert_eq!(
        h.run(1, s).generic_code(),
        Some(G::InvalidNamespaceOrFormat)
    );
    let mut s = Sqe::read(1, 2047, 2);
    s.prp1 = at(0);
    assert_eq!(h.run(1, s).generic_code(), Some(G::LbaOutOfRange));
    let mut s = Sqe::read(1, 0, 1);
    s.prp1 = at(2);
    assert_eq!(h.run(1, s).generic_code(), Some(G::PrpOffsetInvalid));
    let mut s = Sqe::read(1, 0, 1);
    s.prp1 = 0xDEAD_0000; // not registered
    assert_eq!(h.run(1, s).generic_code(), Some(G::DataTransferError));
    let mut s = Sqe::read(1, 0, 16); // 8 KiB across two pages, PRP2 outside registered memory
    s.prp1 = at(0);
    s.prp2 = at(0) + (64 << 20);
    assert_eq!(h.run(1, s).generic_code(), Some(G::DataTransferError));
    let mut s = Sqe::read(1, 0, 512); // 256 KiB > MDTS (128 KiB)
    s.prp1 = at(0);
    assert_eq!(h.run(1, s).generic_code(), Some(G::InvalidField));
    let mut s = Sqe::read(1, 0, 1);
    s.prp1 = at(0);
    s.cdw0 |= 1 << 8; // fused
    assert_eq!(h.run(1, s).generic_code(), Some(G::InvalidField));
    let mut s = Sqe::read(1, 0, 1);
    s.prp1 = at(0);
    s.cdw0 |= 1 << 14; // SGL
    assert_eq!(h.run(1, s).generic_code(), Some(G::InvalidField));
    // Each error is in the error log, with the LBA.
    let log = h.t.model().error_log();
    assert_eq!(log.len(), 9);
    assert_eq!(
        log.iter()
            .find(|e| e.status.generic_code() == Some(G::LbaOutOfRange))
            .unwrap()
            .lba,
        2047
    );
}

#[test]
fn cid_reuse_while_outstanding_is_a_conflict() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.faults.stall_after_io_commands = Some(1);
    let mut h = RawHost::new(cfg);
    h.create(1, 16, 16);
    h.push(1, with_cid(Sqe::flush(1), 5));
    assert_eq!(h.pop(1).unwrap().status(), Status::SUCCESS);
    h.push(1, with_cid(Sqe::flush(1), 6)); // held forever (stall)
    assert!(h.pop(1).is_none());
    // The next command is also stalled, so use the admin path: delete the SQ and expect
    // the held command aborted with "Aborted due to SQ Deletion".
    assert_eq!(h.run(0, Sqe::delete_io_sq(1)), Status::SUCCESS);
    let aborted = h.pop(1).unwrap();
    assert_eq!(
        (aborted.cid, aborted.status().generic_code()),
        (6, Some(G::AbortedSqDeletion))
    );
}

#[test]
fn cid_conflict_on_admin_queue_with_held_async_event() {
    let mut h = RawHost::new(ModelConfig::ram(1 << 20));
    h.push(0, with_cid(Sqe::new(0x0C), 9)); // Asynchronous Event Request: held
    assert!(h.pop(0).is_none());
    let st = h.run(0, with_cid(Sqe::get_features(0x07), 9));
    assert_eq!(st.generic_code(), Some(G::CommandIdConflict));
    assert_eq!(
        h.run(0, with_cid(Sqe::get_features(0x07), 10)),
        Status::SUCCESS
    );
}

#[test]
fn queue_management_validation() {
    let mut cfg = ModelConfig::ram(1 << 20);
    cfg.max_io_queues = 4;
    cfg.max_queue_entries = 64;
    let mut h = RawHost::new(cfg);
    let mem = h.t.alloc_dma(8192).unwrap();
    let base = mem.bus_addr(0);
    let cs = |s: Status| s.command_specific_code();
    assert_eq!(
        cs(h.run(0, Sqe::create_io_cq(5, 8, base))),
        Some(Cs::InvalidQueueIdentifier)
    );
    assert_eq!(
        cs(h.run(0, Sqe::create_io_cq(0, 8, base))),
        Some(Cs::InvalidQueueIdentifier)
    );
    assert_eq!(
        cs(h.run(0, Sqe::create_io_cq(1, 65, base))),
        Some(Cs::InvalidQueueSize)
    );
    let mut one = Sqe::create_io_cq(1, 8, base);
    one.cdw10 &= 0xFFFF; // size field 0 means 1 entry
    assert_eq!(cs(h.run(0, one)), Some(Cs::InvalidQueueSize));
    assert_eq!(
        h.run(0, Sqe::create_io_cq(1, 8, base + 100)).generic_code(),
        Some(G::InvalidField)
    );
    assert_eq!(
        h.run(0, Sqe::create_io_cq(1, 8, 0xBAD0_0000))
            .generic_code(),
        Some(G::DataTransferError)
    );
    assert_eq!(
        cs(h.run(0, Sqe::create_io_sq(1, 8, base, 1))),
        Some(Cs::CompletionQueueInvalid)
    );
    assert_eq!(h.run(0, Sqe::create_io_cq(1, 8, base)), Status::SUCCESS);
    assert_eq!(
        cs(h.run(0, Sqe::create_io_cq(1, 8, base))),
        Some(Cs::InvalidQueueIdentifier)
    );
    assert_eq!(
        h.run(0, Sqe::create_io_sq(1, 8, base + 4096, 1)),
        Status::SUCCESS
    );
    assert_eq!(
        cs(h.run(0, Sqe::delete_io_cq(1))),
        Some(Cs::InvalidQueueDeletion)
    );
    assert_eq!(
        cs(h.run(0, Sqe::delete_io_sq(2))),
        Some(Cs::InvalidQueueIdentifier)
    );
    assert_eq!(
        h.run(0, Sqe::set_number_of_queues(2, 2)).generic_code(),
        Some(G::CommandSequenceError)
    );
    assert_eq!(h.run(0, Sqe::delete_io_sq(1)), Status::SUCCESS);
    assert_eq!(h.run(0, Sqe::delete_io_cq(1)), Status::SUCCESS);
    assert_eq!(
        cs(h.run(0, Sqe::get_log_page(0x7E, 0, 512, 0, base))),
        Some(Cs::InvalidLogPage)
    );
    assert_eq!(
        h.run(0, Sqe::new(0x7F)).generic_code(),
        Some(G::InvalidOpcode)
    );
    assert_eq!(
        h.run(0, Sqe::identify(0x55, 0, base)).generic_code(),
        Some(G::InvalidField)
    );
}

#[test]
fn invalid_doorbells_are_recorded_and_ignored() {
    let mut h = RawHost::new(ModelConfig::ram(1 << 20));
    h.create(1, 8, 8);
    h.t.write32(doorbell_offset(1, false, 4), 8); // tail == size
    h.t.write32(doorbell_offset(7, false, 4), 1); // no such queue
    h.t.write32(doorbell_offset(1, true, 4), 3); // CQ head beyond what was posted
    h.t.write32(0x1002, 1); // not on a doorbell boundary
    let errs = h.t.model().doorbell_errors();
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(h.pop(1).is_none(), "nothing executed");
    assert_eq!(
        h.run(1, Sqe::flush(1)),
        Status::SUCCESS,
        "the queue still works"
    );
}

#[test]
fn full_completion_queue_pauses_fetching() {
    let mut h = RawHost::new(ModelConfig::ram(1 << 20));
    h.create(1, 16, 4); // a CQ of 4 holds 3 completions
    for cid in 0..7 {
        h.qs[1].put(with_cid(Sqe::flush(1), cid));
    }
    h.t.write32(doorbell_offset(1, false, 4), 7);
    let mut seen = Vec::new();
    // Read without ringing the CQ head doorbell first: only 3 were posted.
    let posted = (0..4)
        .filter(|i| h.qs[1].cq.read_volatile::<Cqe>(i * 16).phase())
        .count();
    assert_eq!(posted, 3);
    while let Some(c) = h.pop(1) {
        seen.push(c.cid);
    }
    assert_eq!(
        seen,
        (0..7).collect::<Vec<_>>(),
        "the rest were fetched once entries were freed"
    );
}

#[test]
fn bad_admin_queue_config_sets_fatal_status() {
    let t = ModelTransport::new(ModelConfig::ram(1 << 20).build().unwrap());
    let sq = t.alloc_dma(4096).unwrap();
    t.write32(offset::AQA, Aqa::new(16, 16).0);
    t.write64(offset::ASQ, sq.bus_addr(0) + 64); // not page aligned
    t.write64(offset::ACQ, sq.bus_addr(0));
    t.write32(offset::CC, Cc::standard().with_enabled(true).0);
    let csts = Csts(t.read32(offset::CSTS));
    assert!(csts.fatal() && !csts.ready());
}
