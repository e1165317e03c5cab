//! Controller registers (BAR0), NVMe Base Specification §3.1.

/// Register offsets in BAR0.
pub mod offset {
    /// Controller Capabilities (64 bit).
    pub const CAP: usize = 0x00;
    /// Version.
    pub const VS: usize = 0x08;
    /// Interrupt Mask Set.
    pub const INTMS: usize = 0x0C;
    /// Interrupt Mask Clear.
    pub const INTMC: usize = 0x10;
    /// Controller Configuration.
    pub const CC: usize = 0x14;
    /// Controller Status.
    pub const CSTS: usize = 0x1C;
    /// NVM Subsystem Reset.
    pub const NSSR: usize = 0x20;
    /// Admin Queue Attributes.
    pub const AQA: usize = 0x24;
    /// Admin Submission Queue Base Address (64 bit).
    pub const ASQ: usize = 0x28;
    /// Admin Completion Queue Base Address (64 bit).
    pub const ACQ: usize = 0x30;
    /// First doorbell register (SQ 0 tail).
    pub const DOORBELLS: usize = 0x1000;
}

/// Offset of a queue's doorbell register in BAR0.
///
/// `stride_bytes` is `4 << CAP.DSTRD`.
///
/// ```
/// use bam_nvme::spec::registers::doorbell_offset;
/// assert_eq!(doorbell_offset(0, false, 4), 0x1000); // admin SQ tail
/// assert_eq!(doorbell_offset(1, true, 4), 0x100C);  // I/O CQ 1 head
/// ```
pub const fn doorbell_offset(qid: u16, completion: bool, stride_bytes: usize) -> usize {
    offset::DOORBELLS + (2 * qid as usize + completion as usize) * stride_bytes
}

/// Decodes a doorbell offset into `(qid, is_completion_queue)`, or `None` if the offset
/// is not on a doorbell boundary.
pub const fn doorbell_from_offset(off: usize, stride_bytes: usize) -> Option<(u16, bool)> {
    if off < offset::DOORBELLS || !(off - offset::DOORBELLS).is_multiple_of(stride_bytes) {
        return None;
    }
    let idx = (off - offset::DOORBELLS) / stride_bytes;
    if idx / 2 > u16::MAX as usize {
        return None;
    }
    Some(((idx / 2) as u16, idx % 2 == 1))
}

const fn bits64(v: u64, lo: u32, width: u32) -> u64 {
    (v >> lo) & ((1u64 << width) - 1)
}

const fn bits32(v: u32, lo: u32, width: u32) -> u32 {
    (v >> lo) & ((1u32 << width) - 1)
}

const fn set32(v: u32, lo: u32, width: u32, field: u32) -> u32 {
    let mask = ((1u32 << width) - 1) << lo;
    (v & !mask) | ((field << lo) & mask)
}

/// Controller Capabilities (CAP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cap(pub u64);

impl Cap {
    /// Maximum Queue Entries Supported, as a count (the register holds it 0-based).
    pub const fn max_queue_entries(self) -> u32 {
        bits64(self.0, 0, 16) as u32 + 1
    }
    /// Contiguous Queues Required.
    pub const fn contiguous_queues_required(self) -> bool {
        bits64(self.0, 16, 1) == 1
    }
    /// Timeout (TO): worst-case time for CSTS.RDY to change, in milliseconds.
    pub const fn timeout_ms(self) -> u64 {
        bits64(self.0, 24, 8) * 500
    }
    /// Doorbell stride in bytes (`4 << DSTRD`).
    pub const fn doorbell_stride(self) -> usize {
        4usize << bits64(self.0, 32, 4)
    }
    /// NVM Subsystem Reset Supported.
    pub const fn nssr_supported(self) -> bool {
        bits64(self.0, 36, 1) == 1
    }
    /// Command Sets Supported: bit 0 of the CSS field is the NVM command set.
    pub const fn css(self) -> u8 {
        bits64(self.0, 37, 8) as u8
    }
    /// Smallest memory page size supported, in bytes.
    pub const fn mps_min_bytes(self) -> usize {
        1usize << (12 + bits64(self.0, 48, 4))
    }
    /// Largest memory page size supported, in bytes.
    pub const fn mps_max_bytes(self) -> usize {
        1usize << (12 + bits64(self.0, 52, 4))
    }

    /// Builds a CAP value (used by the controller model).
    pub const fn new(
        max_queue_entries: u32,
        contiguous: bool,
        timeout_500ms: u8,
        dstrd: u8,
        mps_min: u8,
        mps_max: u8,
    ) -> Self {
        let mqes = (max_queue_entries - 1) as u64 & 0xFFFF;
        Cap(mqes
            | (contiguous as u64) << 16
            | (timeout_500ms as u64) << 24
            | ((dstrd & 0xF) as u64) << 32
            | 1u64 << 37 // CSS: NVM command set
            | ((mps_min & 0xF) as u64) << 48
            | ((mps_max & 0xF) as u64) << 52)
    }
}

/// Version (VS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Version(pub u32);

impl Version {
    /// Builds a version value.
    pub const fn new(major: u16, minor: u8, tertiary: u8) -> Self {
        Version((major as u32) << 16 | (minor as u32) << 8 | tertiary as u32)
    }
    /// Major version.
    pub const fn major(self) -> u16 {
        (self.0 >> 16) as u16
    }
    /// Minor version.
    pub const fn minor(self) -> u8 {
        (self.0 >> 8) as u8
    }
    /// Tertiary version.
    pub const fn tertiary(self) -> u8 {
        self.0 as u8
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major(), self.minor(), self.tertiary())
    }
}

/// Shutdown notification (CC.SHN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownNotification {
    /// No notification.
    None = 0,
    /// Normal shutdown.
    Normal = 1,
    /// Abrupt shutdown.
    Abrupt = 2,
}

/// Controller Configuration (CC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cc(pub u32);

impl Cc {
    /// Enable.
    pub const fn enabled(self) -> bool {
        self.0 & 1 == 1
    }
    /// Returns CC with EN set or cleared.
    pub const fn with_enabled(self, en: bool) -> Self {
        Cc(set32(self.0, 0, 1, en as u32))
    }
    /// I/O Command Set Selected.
    pub const fn css(self) -> u32 {
        bits32(self.0, 4, 3)
    }
    /// Memory page size in bytes (`1 << (12 + MPS)`).
    pub const fn mps_bytes(self) -> usize {
        1usize << (12 + bits32(self.0, 7, 4))
    }
    /// Returns CC with MPS set so the page size is `1 << (12 + mps)`.
    pub const fn with_mps(self, mps: u32) -> Self {
        Cc(set32(self.0, 7, 4, mps))
    }
    /// Arbitration Mechanism Selected.
    pub const fn ams(self) -> u32 {
        bits32(self.0, 11, 3)
    }
    /// Shutdown Notification field.
    pub const fn shn(self) -> u32 {
        bits32(self.0, 14, 2)
    }
    /// Returns CC with the shutdown notification field set.
    pub const fn with_shn(self, shn: ShutdownNotification) -> Self {
        Cc(set32(self.0, 14, 2, shn as u32))
    }
    /// I/O Submission Queue Entry Size, log2 bytes.
    pub const fn iosqes(self) -> u32 {
        bits32(self.0, 16, 4)
    }
    /// I/O Completion Queue Entry Size, log2 bytes.
    pub const fn iocqes(self) -> u32 {
        bits32(self.0, 20, 4)
    }
    /// Returns CC with the queue entry sizes set (log2 bytes).
    pub const fn with_entry_sizes(self, iosqes: u32, iocqes: u32) -> Self {
        Cc(set32(set32(self.0, 16, 4, iosqes), 20, 4, iocqes))
    }
    /// The configuration this library enables a controller with: NVM command set,
    /// 4 KiB pages, round robin, 64-byte SQEs and 16-byte CQEs.
    pub const fn standard() -> Self {
        Cc(0).with_mps(0).with_entry_sizes(6, 4)
    }
}

/// Controller Status (CSTS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Csts(pub u32);

impl Csts {
    /// Ready.
    pub const fn ready(self) -> bool {
        self.0 & 1 == 1
    }
    /// Controller Fatal Status.
    pub const fn fatal(self) -> bool {
        self.0 & 2 == 2
    }
    /// Shutdown Status: 0 normal, 1 in progress, 2 complete.
    pub const fn shst(self) -> u32 {
        bits32(self.0, 2, 2)
    }
    /// NVM Subsystem Reset Occurred.
    pub const fn nssro(self) -> bool {
        bits32(self.0, 4, 1) == 1
    }
    /// Processing Paused.
    pub const fn paused(self) -> bool {
        bits32(self.0, 5, 1) == 1
    }
    /// Builds a CSTS value (used by the controller model).
    pub const fn new(ready: bool, fatal: bool, shst: u32) -> Self {
        Csts(ready as u32 | (fatal as u32) << 1 | (shst & 3) << 2)
    }
}

/// Shutdown status value meaning "shutdown processing complete".
pub const SHST_COMPLETE: u32 = 2;

/// Admin Queue Attributes (AQA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Aqa(pub u32);

impl Aqa {
    /// Builds AQA from entry counts (stored 0-based).
    pub const fn new(sq_entries: u16, cq_entries: u16) -> Self {
        Aqa(((sq_entries as u32 - 1) & 0xFFF) | ((cq_entries as u32 - 1) & 0xFFF) << 16)
    }
    /// Admin SQ size in entries.
    pub const fn sq_entries(self) -> u32 {
        bits32(self.0, 0, 12) + 1
    }
    /// Admin CQ size in entries.
    pub const fn cq_entries(self) -> u32 {
        bits32(self.0, 16, 12) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_fields_round_trip() {
        let cap = Cap::new(1024, true, 20, 2, 0, 4);
        assert_eq!(cap.max_queue_entries(), 1024);
        assert!(cap.contiguous_queues_required());
        assert_eq!(cap.timeout_ms(), 10_000);
        assert_eq!(cap.doorbell_stride(), 16);
        assert_eq!(cap.css() & 1, 1);
        assert_eq!(cap.mps_min_bytes(), 4096);
        assert_eq!(cap.mps_max_bytes(), 65536);
        // Bit positions per spec: MQES 15:0, CQR 16, TO 31:24, DSTRD 35:32, CSS 44:37, MPSMIN 51:48, MPSMAX 55:52.
        assert_eq!(
            cap.0,
            0x3FF | 1 << 16 | 20 << 24 | 2 << 32 | 1 << 37 | 4 << 52
        );
    }

    #[test]
    fn cc_standard_encoding() {
        let cc = Cc::standard().with_enabled(true);
        // EN=1, CSS=0, MPS=0, AMS=0, SHN=0, IOSQES=6 (bits 19:16), IOCQES=4 (bits 23:20).
        assert_eq!(cc.0, 0x0046_0001);
        assert_eq!(cc.iosqes(), 6);
        assert_eq!(cc.iocqes(), 4);
        assert_eq!(cc.mps_bytes(), 4096);
        let shn = cc.with_shn(ShutdownNotification::Normal);
        assert_eq!(shn.0 & 0xC000, 0x4000);
        assert_eq!(shn.shn(), 1);
    }

    #[test]
    fn csts_and_aqa() {
        assert_eq!(Csts::new(true, false, SHST_COMPLETE).0, 0b1001);
        assert!(Csts(3).fatal());
        let aqa = Aqa::new(32, 64);
        assert_eq!(aqa.0, 31 | 63 << 16);
        assert_eq!((aqa.sq_entries(), aqa.cq_entries()), (32, 64));
    }

    #[test]
    fn doorbells() {
        for stride in [4usize, 8, 16, 4096] {
            for qid in [0u16, 1, 7, 1023, u16::MAX] {
                for cq in [false, true] {
                    let off = doorbell_offset(qid, cq, stride);
                    assert_eq!(doorbell_from_offset(off, stride), Some((qid, cq)));
                }
            }
        }
        assert_eq!(doorbell_from_offset(0x1002, 4), None);
        assert_eq!(doorbell_from_offset(0x14, 4), None);
    }

    #[test]
    fn version_display() {
        assert_eq!(Version::new(1, 4, 0).to_string(), "1.4.0");
        assert_eq!(Version::new(1, 4, 0).0, 0x0001_0400);
    }
}
