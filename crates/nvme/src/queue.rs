//! Submission and completion queue ring arithmetic, independent of where the rings live.
//!
//! A submission ring of `size` entries holds at most `size - 1` commands: the queue is
//! full when advancing the tail would make it equal to the head. The controller tells
//! the driver how far it has consumed through the SQ head pointer in each completion.
//! A completion ring is read at its head; an entry is new when its phase tag equals the
//! ring's current phase, which flips each time the head wraps.

use crate::spec::Cqe;

/// Driver-side state of a submission queue.
#[derive(Clone, Debug)]
pub struct SubmissionRing {
    size: u16,
    tail: u16,
    head: u16,
}

impl SubmissionRing {
    /// A ring of `size` entries (2..=65536 is valid NVMe; we take `u16` sizes ≥ 2).
    pub fn new(size: u16) -> Self {
        assert!(size >= 2, "an NVMe queue has at least 2 entries");
        SubmissionRing {
            size,
            tail: 0,
            head: 0,
        }
    }
    /// Number of entries.
    pub fn size(&self) -> u16 {
        self.size
    }
    /// Current tail (the next slot to fill; the value written to the tail doorbell).
    pub fn tail(&self) -> u16 {
        self.tail
    }
    /// Last head reported by the controller.
    pub fn head(&self) -> u16 {
        self.head
    }
    /// Number of commands the controller has not yet consumed.
    pub fn outstanding(&self) -> u16 {
        (self.tail + self.size - self.head) % self.size
    }
    /// Whether no slot is free.
    pub fn is_full(&self) -> bool {
        (self.tail + 1) % self.size == self.head
    }
    /// Takes the slot at the tail and advances it; `None` when full.
    pub fn push(&mut self) -> Option<u16> {
        if self.is_full() {
            return None;
        }
        let slot = self.tail;
        self.tail = (self.tail + 1) % self.size;
        Some(slot)
    }
    /// Records the SQ head pointer from a completion. Returns `false` (and ignores it)
    /// if the value is not between the current head and the tail, which a correct
    /// controller never reports.
    pub fn update_head(&mut self, sq_head: u16) -> bool {
        if sq_head >= self.size {
            return false;
        }
        let consumed = (sq_head + self.size - self.head) % self.size;
        if consumed > self.outstanding() {
            return false;
        }
        self.head = sq_head;
        true
    }
}

/// Driver-side state of a completion queue.
#[derive(Clone, Debug)]
pub struct CompletionRing {
    size: u16,
    head: u16,
    phase: bool,
}

impl CompletionRing {
    /// A ring of `size` entries. The controller starts writing with phase 1.
    pub fn new(size: u16) -> Self {
        assert!(size >= 2, "an NVMe queue has at least 2 entries");
        CompletionRing {
            size,
            head: 0,
            phase: true,
        }
    }
    /// Number of entries.
    pub fn size(&self) -> u16 {
        self.size
    }
    /// Current head (the next entry to read; the value written to the head doorbell).
    pub fn head(&self) -> u16 {
        self.head
    }
    /// The phase a new entry at the head carries.
    pub fn phase(&self) -> bool {
        self.phase
    }
    /// Whether `entry` (read from the head slot) is a new completion.
    pub fn is_new(&self, entry: &Cqe) -> bool {
        entry.phase() == self.phase
    }
    /// Consumes the entry at the head.
    pub fn advance(&mut self) {
        self.head += 1;
        if self.head == self.size {
            self.head = 0;
            self.phase = !self.phase;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Status;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn depth_two_holds_one() {
        let mut sq = SubmissionRing::new(2);
        assert_eq!(sq.push(), Some(0));
        assert!(sq.is_full());
        assert_eq!(sq.push(), None);
        assert!(sq.update_head(1));
        assert_eq!(sq.push(), Some(1));
        assert_eq!(sq.tail(), 0);
        assert!(!sq.update_head(5), "out-of-range head rejected");
    }

    #[test]
    fn head_beyond_tail_is_rejected() {
        let mut sq = SubmissionRing::new(8);
        sq.push();
        sq.push();
        assert!(!sq.update_head(3));
        assert!(sq.update_head(2));
        assert_eq!(sq.outstanding(), 0);
    }

    /// Simulates a controller consuming the SQ and producing CQEs, with the driver and
    /// device interleaving randomly; checks the driver sees every completion exactly
    /// once, in order, with the right phase, and never overfills the SQ.
    fn simulate(size: u16, steps: Vec<u8>) {
        let mut sq = SubmissionRing::new(size);
        let mut cq = CompletionRing::new(size);
        let mut cq_mem = vec![Cqe::default(); size as usize];
        let mut dev_sq_head = 0u16;
        let mut dev_cq_tail = 0u16;
        let mut dev_phase = true;
        let mut dev_cq_head = 0u16; // as known by the device through the doorbell
        let mut in_sq: VecDeque<u16> = VecDeque::new(); // cids submitted, not consumed
        let mut expected: VecDeque<u16> = VecDeque::new(); // cids completed, not seen
        let mut next_cid = 0u16;
        for s in steps {
            match s % 3 {
                0 => {
                    if let Some(_slot) = sq.push() {
                        in_sq.push_back(next_cid);
                        next_cid = next_cid.wrapping_add(1);
                    } else {
                        assert_eq!(in_sq.len() + expected.len() + 1, size as usize);
                    }
                }
                1 => {
                    // Device consumes one command if the CQ has room.
                    let cq_full = (dev_cq_tail + 1) % size == dev_cq_head;
                    if let (Some(cid), false) = (in_sq.front().copied(), cq_full) {
                        in_sq.pop_front();
                        dev_sq_head = (dev_sq_head + 1) % size;
                        cq_mem[dev_cq_tail as usize] =
                            Cqe::new(cid, 1, dev_sq_head, 0, Status::SUCCESS, dev_phase);
                        dev_cq_tail += 1;
                        if dev_cq_tail == size {
                            dev_cq_tail = 0;
                            dev_phase = !dev_phase;
                        }
                        expected.push_back(cid);
                    }
                }
                _ => {
                    // Driver reaps everything new and rings the CQ head doorbell.
                    loop {
                        let e = cq_mem[cq.head() as usize];
                        if !cq.is_new(&e) {
                            break;
                        }
                        assert_eq!(Some(e.cid), expected.pop_front());
                        assert!(sq.update_head(e.sq_head));
                        cq.advance();
                    }
                    assert!(expected.is_empty());
                    dev_cq_head = cq.head();
                }
            }
            // The driver's view of unconsumed commands: those still in the SQ plus those
            // consumed whose completions it has not reaped yet.
            assert_eq!(sq.outstanding() as usize, in_sq.len() + expected.len());
        }
    }

    proptest! {
        // 256: proptest's own default; scaled by BAM_FUZZ_SCALE / PROPTEST_CASES.
        #![proptest_config(ProptestConfig::with_cases(crate::test_cases::cases(256)))]

        #[test]
        fn ring_wraparound(size in 2u16..40, steps in proptest::collection::vec(any::<u8>(), 0..600)) {
            simulate(size, steps);
        }
    }
}
