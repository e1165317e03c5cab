//! The 64-byte submission queue entry and the commands this library issues
//! (NVMe Base Specification §4.2 and §5, NVM Command Set Specification §3).

named_codes! {
    /// Admin command opcodes.
    AdminOpcode {
        DeleteIoSq = 0x00 => "Delete I/O Submission Queue",
        CreateIoSq = 0x01 => "Create I/O Submission Queue",
        GetLogPage = 0x02 => "Get Log Page",
        DeleteIoCq = 0x04 => "Delete I/O Completion Queue",
        CreateIoCq = 0x05 => "Create I/O Completion Queue",
        Identify = 0x06 => "Identify",
        Abort = 0x08 => "Abort",
        SetFeatures = 0x09 => "Set Features",
        GetFeatures = 0x0A => "Get Features",
        AsyncEventRequest = 0x0C => "Asynchronous Event Request",
    }
}

named_codes! {
    /// NVM command set I/O opcodes.
    IoOpcode {
        Flush = 0x00 => "Flush",
        Write = 0x01 => "Write",
        Read = 0x02 => "Read",
        WriteZeroes = 0x08 => "Write Zeroes",
        DatasetManagement = 0x09 => "Dataset Management",
    }
}

impl IoOpcode {
    /// Whether the command moves data from host memory to the device.
    pub fn is_write(self) -> bool {
        matches!(self, IoOpcode::Write)
    }
}

/// Identify CNS values.
pub mod cns {
    /// Identify Namespace data structure for the given NSID.
    pub const NAMESPACE: u8 = 0x00;
    /// Identify Controller data structure.
    pub const CONTROLLER: u8 = 0x01;
    /// Active Namespace ID list above the given NSID.
    pub const ACTIVE_NAMESPACES: u8 = 0x02;
}

/// Feature identifiers.
pub mod feature {
    /// Arbitration.
    pub const ARBITRATION: u8 = 0x01;
    /// Volatile Write Cache.
    pub const VOLATILE_WRITE_CACHE: u8 = 0x06;
    /// Number of Queues.
    pub const NUMBER_OF_QUEUES: u8 = 0x07;
}

/// Log page identifiers.
pub mod log_id {
    /// Error Information.
    pub const ERROR: u8 = 0x01;
    /// SMART / Health Information.
    pub const SMART: u8 = 0x02;
}

/// A submission queue entry, 64 bytes, laid out as the specification says (Figure "Common
/// Command Format"). All fields little-endian, which is the host order on every platform
/// this crate supports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Sqe {
    /// Command Dword 0: opcode (7:0), fused (9:8), PSDT (15:14), command identifier (31:16).
    pub cdw0: u32,
    /// Namespace identifier.
    pub nsid: u32,
    /// Command Dword 2.
    pub cdw2: u32,
    /// Command Dword 3.
    pub cdw3: u32,
    /// Metadata pointer.
    pub mptr: u64,
    /// PRP entry 1.
    pub prp1: u64,
    /// PRP entry 2.
    pub prp2: u64,
    /// Command Dword 10.
    pub cdw10: u32,
    /// Command Dword 11.
    pub cdw11: u32,
    /// Command Dword 12.
    pub cdw12: u32,
    /// Command Dword 13.
    pub cdw13: u32,
    /// Command Dword 14.
    pub cdw14: u32,
    /// Command Dword 15.
    pub cdw15: u32,
}

const _: () = assert!(std::mem::size_of::<Sqe>() == 64);
const _: () = assert!(std::mem::align_of::<Sqe>() == 8);
const _: () = assert!(std::mem::offset_of!(Sqe, prp1) == 24);
const _: () = assert!(std::mem::offset_of!(Sqe, cdw10) == 40);

impl Sqe {
    /// A new entry with the given opcode and all other fields zero.
    pub const fn new(opcode: u8) -> Self {
        Sqe {
            cdw0: opcode as u32,
            nsid: 0,
            cdw2: 0,
            cdw3: 0,
            mptr: 0,
            prp1: 0,
            prp2: 0,
            cdw10: 0,
            cdw11: 0,
            cdw12: 0,
            cdw13: 0,
            cdw14: 0,
            cdw15: 0,
        }
    }

    /// Opcode.
    pub const fn opcode(&self) -> u8 {
        self.cdw0 as u8
    }
    /// Fused operation field.
    pub const fn fuse(&self) -> u8 {
        ((self.cdw0 >> 8) & 3) as u8
    }
    /// PRP or SGL for Data Transfer (0 means PRPs).
    pub const fn psdt(&self) -> u8 {
        ((self.cdw0 >> 14) & 3) as u8
    }
    /// Command identifier.
    pub const fn cid(&self) -> u16 {
        (self.cdw0 >> 16) as u16
    }
    /// Sets the command identifier.
    pub fn set_cid(&mut self, cid: u16) {
        self.cdw0 = (self.cdw0 & 0xFFFF) | (cid as u32) << 16;
    }
    /// Sets both PRP entries.
    pub fn set_prps(&mut self, prp1: u64, prp2: u64) {
        self.prp1 = prp1;
        self.prp2 = prp2;
    }
    /// Starting LBA of a Read/Write/Write Zeroes command (CDW10-11).
    pub const fn slba(&self) -> u64 {
        self.cdw10 as u64 | (self.cdw11 as u64) << 32
    }
    /// Number of logical blocks of a Read/Write/Write Zeroes command, as a count
    /// (CDW12 bits 15:0 hold it 0-based).
    pub const fn block_count(&self) -> u32 {
        (self.cdw12 & 0xFFFF) + 1
    }

    /// The entry's 64 bytes, exactly as they go into a submission queue.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        let dwords = [
            self.cdw0,
            self.nsid,
            self.cdw2,
            self.cdw3,
            self.mptr as u32,
            (self.mptr >> 32) as u32,
            self.prp1 as u32,
            (self.prp1 >> 32) as u32,
            self.prp2 as u32,
            (self.prp2 >> 32) as u32,
            self.cdw10,
            self.cdw11,
            self.cdw12,
            self.cdw13,
            self.cdw14,
            self.cdw15,
        ];
        for (i, d) in dwords.iter().enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&d.to_le_bytes());
        }
        b
    }

    /// Parses 64 bytes of a submission queue entry.
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        let d = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
        let q = |i: usize| d(i) as u64 | (d(i + 1) as u64) << 32;
        Sqe {
            cdw0: d(0),
            nsid: d(1),
            cdw2: d(2),
            cdw3: d(3),
            mptr: q(4),
            prp1: q(6),
            prp2: q(8),
            cdw10: d(10),
            cdw11: d(11),
            cdw12: d(12),
            cdw13: d(13),
            cdw14: d(14),
            cdw15: d(15),
        }
    }

    // ---- Admin commands -------------------------------------------------------------

    /// Identify (CNS in CDW10 7:0, controller id 31:16; NSID selects the namespace).
    pub fn identify(cns: u8, nsid: u32, buffer: u64) -> Self {
        let mut s = Sqe::new(AdminOpcode::Identify as u8);
        s.nsid = nsid;
        s.prp1 = buffer;
        s.cdw10 = cns as u32;
        s
    }

    /// Create I/O Completion Queue: physically contiguous, interrupts disabled.
    /// `entries` is the queue size as a count.
    pub fn create_io_cq(qid: u16, entries: u16, base: u64) -> Self {
        let mut s = Sqe::new(AdminOpcode::CreateIoCq as u8);
        s.prp1 = base;
        s.cdw10 = (entries as u32 - 1) << 16 | qid as u32;
        s.cdw11 = 1; // PC=1, IEN=0, IV=0
        s
    }

    /// Create I/O Submission Queue bound to completion queue `cqid`: physically
    /// contiguous, medium priority (ignored under round robin).
    pub fn create_io_sq(qid: u16, entries: u16, base: u64, cqid: u16) -> Self {
        let mut s = Sqe::new(AdminOpcode::CreateIoSq as u8);
        s.prp1 = base;
        s.cdw10 = (entries as u32 - 1) << 16 | qid as u32;
        s.cdw11 = (cqid as u32) << 16 | 1; // PC=1, QPRIO=0
        s
    }

    /// Delete I/O Submission Queue.
    pub fn delete_io_sq(qid: u16) -> Self {
        let mut s = Sqe::new(AdminOpcode::DeleteIoSq as u8);
        s.cdw10 = qid as u32;
        s
    }

    /// Delete I/O Completion Queue.
    pub fn delete_io_cq(qid: u16) -> Self {
        let mut s = Sqe::new(AdminOpcode::DeleteIoCq as u8);
        s.cdw10 = qid as u32;
        s
    }

    /// Set Features.
    pub fn set_features(fid: u8, cdw11: u32) -> Self {
        let mut s = Sqe::new(AdminOpcode::SetFeatures as u8);
        s.cdw10 = fid as u32;
        s.cdw11 = cdw11;
        s
    }

    /// Get Features (current value, SEL=0).
    pub fn get_features(fid: u8) -> Self {
        let mut s = Sqe::new(AdminOpcode::GetFeatures as u8);
        s.cdw10 = fid as u32;
        s
    }

    /// Set Features / Number of Queues. Counts are requested numbers of queues
    /// (encoded 0-based).
    pub fn set_number_of_queues(sq: u16, cq: u16) -> Self {
        Self::set_features(
            feature::NUMBER_OF_QUEUES,
            (cq as u32 - 1) << 16 | (sq as u32 - 1),
        )
    }

    /// Get Log Page of `bytes` bytes (a multiple of 4) starting at byte `offset`.
    pub fn get_log_page(lid: u8, nsid: u32, bytes: u32, offset: u64, buffer: u64) -> Self {
        let numd = bytes / 4 - 1;
        let mut s = Sqe::new(AdminOpcode::GetLogPage as u8);
        s.nsid = nsid;
        s.prp1 = buffer;
        s.cdw10 = (numd & 0xFFFF) << 16 | lid as u32;
        s.cdw11 = numd >> 16;
        s.cdw12 = offset as u32;
        s.cdw13 = (offset >> 32) as u32;
        s
    }

    /// Abort the command `cid` on submission queue `sqid`.
    pub fn abort(sqid: u16, cid: u16) -> Self {
        let mut s = Sqe::new(AdminOpcode::Abort as u8);
        s.cdw10 = (cid as u32) << 16 | sqid as u32;
        s
    }

    // ---- I/O commands ---------------------------------------------------------------

    /// Read or Write of `blocks` logical blocks (a count, 1..=65536) at `slba`.
    pub fn read_write(op: IoOpcode, nsid: u32, slba: u64, blocks: u32) -> Self {
        debug_assert!((1..=65536).contains(&blocks));
        let mut s = Sqe::new(op as u8);
        s.nsid = nsid;
        s.cdw10 = slba as u32;
        s.cdw11 = (slba >> 32) as u32;
        s.cdw12 = (blocks - 1) & 0xFFFF;
        s
    }

    /// Read.
    pub fn read(nsid: u32, slba: u64, blocks: u32) -> Self {
        Self::read_write(IoOpcode::Read, nsid, slba, blocks)
    }

    /// Write.
    pub fn write(nsid: u32, slba: u64, blocks: u32) -> Self {
        Self::read_write(IoOpcode::Write, nsid, slba, blocks)
    }

    /// Flush.
    pub fn flush(nsid: u32) -> Self {
        let mut s = Sqe::new(IoOpcode::Flush as u8);
        s.nsid = nsid;
        s
    }

    /// Write Zeroes; `deallocate` sets DEAC.
    pub fn write_zeroes(nsid: u32, slba: u64, blocks: u32, deallocate: bool) -> Self {
        let mut s = Self::read_write(IoOpcode::WriteZeroes, nsid, slba, blocks);
        s.cdw12 |= (deallocate as u32) << 25;
        s
    }

    /// Dataset Management with `ranges` range descriptors (1..=256) at `buffer`;
    /// `deallocate` sets AD.
    pub fn dataset_management(nsid: u32, ranges: u32, deallocate: bool, buffer: u64) -> Self {
        let mut s = Sqe::new(IoOpcode::DatasetManagement as u8);
        s.nsid = nsid;
        s.prp1 = buffer;
        s.cdw10 = (ranges - 1) & 0xFF;
        s.cdw11 = (deallocate as u32) << 2;
        s
    }
}

/// One Dataset Management range descriptor (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DsmRange {
    /// Context attributes.
    pub attributes: u32,
    /// Length in logical blocks.
    pub blocks: u32,
    /// Starting LBA.
    pub slba: u64,
}

const _: () = assert!(std::mem::size_of::<DsmRange>() == 16);

impl DsmRange {
    /// The descriptor's 16 bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.attributes.to_le_bytes());
        b[4..8].copy_from_slice(&self.blocks.to_le_bytes());
        b[8..16].copy_from_slice(&self.slba.to_le_bytes());
        b
    }
    /// Parses a descriptor.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        DsmRange {
            attributes: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            blocks: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            slba: u64::from_le_bytes(b[8..16].try_into().unwrap()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dw(b: &[u8; 64], i: usize) -> u32 {
        u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap())
    }

    #[test]
    fn common_format_offsets() {
        let mut s = Sqe::new(0xAB);
        s.set_cid(0x1234);
        s.nsid = 0x0102_0304;
        s.cdw2 = 0x11;
        s.cdw3 = 0x22;
        s.mptr = 0x0A0B_0C0D_0E0F_1011;
        s.prp1 = 0x1111_2222_3333_4000;
        s.prp2 = 0x5555_6666_7777_8000;
        s.cdw10 = 10;
        s.cdw11 = 11;
        s.cdw12 = 12;
        s.cdw13 = 13;
        s.cdw14 = 14;
        s.cdw15 = 15;
        let b = s.to_bytes();
        assert_eq!(b[0], 0xAB, "opcode is byte 0");
        assert_eq!(&b[2..4], &[0x34, 0x12], "CID is bytes 3:2");
        assert_eq!(&b[4..8], &[0x04, 0x03, 0x02, 0x01], "NSID is bytes 7:4");
        assert_eq!(dw(&b, 2), 0x11);
        assert_eq!(dw(&b, 3), 0x22);
        assert_eq!(
            &b[16..24],
            &0x0A0B_0C0D_0E0F_1011u64.to_le_bytes(),
            "MPTR 23:16"
        );
        assert_eq!(
            &b[24..32],
            &0x1111_2222_3333_4000u64.to_le_bytes(),
            "PRP1 31:24"
        );
        assert_eq!(
            &b[32..40],
            &0x5555_6666_7777_8000u64.to_le_bytes(),
            "PRP2 39:32"
        );
        for i in 10..16 {
            assert_eq!(dw(&b, i), i as u32, "CDW{i} at byte {}", i * 4);
        }
        assert_eq!(Sqe::from_bytes(&b), s);
        // The in-memory #[repr(C)] layout is the wire layout.
        assert_eq!(bytemuck::bytes_of(&s), &b[..]);
    }

    #[test]
    fn admin_encodings() {
        let s = Sqe::identify(cns::CONTROLLER, 0, 0x1000);
        assert_eq!((s.opcode(), s.cdw10, s.prp1), (0x06, 1, 0x1000));

        let s = Sqe::create_io_cq(3, 256, 0x20_0000);
        assert_eq!(s.opcode(), 0x05);
        assert_eq!(s.cdw10, 255 << 16 | 3);
        assert_eq!(s.cdw11, 1, "PC=1, interrupts off");
        assert_eq!(s.prp1, 0x20_0000);

        let s = Sqe::create_io_sq(3, 1024, 0x30_0000, 3);
        assert_eq!(s.opcode(), 0x01);
        assert_eq!(s.cdw10, 1023 << 16 | 3);
        assert_eq!(s.cdw11, 3 << 16 | 1);

        assert_eq!(Sqe::delete_io_sq(9).cdw10, 9);
        assert_eq!(Sqe::delete_io_sq(9).opcode(), 0x00);
        assert_eq!(Sqe::delete_io_cq(9).opcode(), 0x04);

        let s = Sqe::set_number_of_queues(64, 32);
        assert_eq!((s.opcode(), s.cdw10, s.cdw11), (0x09, 0x07, 31 << 16 | 63));
        let s = Sqe::get_features(feature::NUMBER_OF_QUEUES);
        assert_eq!((s.opcode(), s.cdw10), (0x0A, 0x07));

        // 512 bytes = 128 dwords, NUMD = 127; offset 0x1_0000_0200.
        let s = Sqe::get_log_page(log_id::SMART, 0xFFFF_FFFF, 512, 0x1_0000_0200, 0x4000);
        assert_eq!(s.opcode(), 0x02);
        assert_eq!(s.cdw10, 127 << 16 | 0x02);
        assert_eq!(s.cdw11, 0);
        assert_eq!((s.cdw12, s.cdw13), (0x200, 1));
        // NUMD above 16 bits spills into NUMDU.
        let s = Sqe::get_log_page(log_id::ERROR, 0, 0x40000 * 4 + 4, 0, 0);
        assert_eq!((s.cdw10 >> 16, s.cdw11), (0, 4));

        let s = Sqe::abort(5, 0x77);
        assert_eq!((s.opcode(), s.cdw10), (0x08, 0x77 << 16 | 5));
    }

    #[test]
    fn io_encodings() {
        let s = Sqe::read(1, 0x1_2345_6789, 8);
        assert_eq!(s.opcode(), 0x02);
        assert_eq!(s.nsid, 1);
        assert_eq!((s.cdw10, s.cdw11, s.cdw12), (0x2345_6789, 1, 7));
        assert_eq!(s.slba(), 0x1_2345_6789);
        assert_eq!(s.block_count(), 8);
        assert_eq!(Sqe::write(1, 0, 65536).cdw12, 0xFFFF);
        assert_eq!(Sqe::write(1, 0, 1).opcode(), 0x01);
        assert_eq!(Sqe::flush(7).opcode(), 0x00);
        assert_eq!(Sqe::flush(7).nsid, 7);
        let s = Sqe::write_zeroes(1, 100, 4, true);
        assert_eq!((s.opcode(), s.cdw12), (0x08, 3 | 1 << 25));
        let s = Sqe::dataset_management(1, 3, true, 0x9000);
        assert_eq!((s.opcode(), s.cdw10, s.cdw11, s.prp1), (0x09, 2, 4, 0x9000));
    }

    #[test]
    fn dsm_range_layout() {
        let r = DsmRange {
            attributes: 1,
            blocks: 0x10,
            slba: 0x0102_0304_0506_0708,
        };
        let b = r.to_bytes();
        assert_eq!(&b[0..4], &[1, 0, 0, 0]);
        assert_eq!(&b[4..8], &[0x10, 0, 0, 0]);
        assert_eq!(&b[8..16], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(DsmRange::from_bytes(&b), r);
    }

    #[test]
    fn opcode_round_trip() {
        for v in 0..=255u8 {
            if let Some(op) = AdminOpcode::from_u8(v) {
                assert_eq!(op as u8, v);
                assert!(!op.name().is_empty());
            }
            if let Some(op) = IoOpcode::from_u8(v) {
                assert_eq!(op as u8, v);
            }
        }
    }
}
