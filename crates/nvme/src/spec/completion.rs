//! The 16-byte completion queue entry (NVMe Base Specification §4.6).

use super::status::Status;

/// A completion queue entry, 16 bytes, in the specification's layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Cqe {
    /// Dword 0: command specific.
    pub dw0: u32,
    /// Dword 1: command specific.
    pub dw1: u32,
    /// Submission queue head pointer at the time of completion.
    pub sq_head: u16,
    /// Submission queue identifier.
    pub sq_id: u16,
    /// Command identifier.
    pub cid: u16,
    /// Phase tag (bit 0) and status field (bits 15:1).
    pub status: u16,
}

const _: () = assert!(std::mem::size_of::<Cqe>() == 16);
const _: () = assert!(std::mem::offset_of!(Cqe, sq_head) == 8);
const _: () = assert!(std::mem::offset_of!(Cqe, cid) == 12);
const _: () = assert!(std::mem::offset_of!(Cqe, status) == 14);

impl Cqe {
    /// Phase tag.
    pub const fn phase(&self) -> bool {
        self.status & 1 == 1
    }

    /// The decoded status field.
    pub const fn status(&self) -> Status {
        Status::from_field(self.status >> 1)
    }

    /// Builds a completion with the given status and phase (used by the controller model).
    pub fn new(cid: u16, sq_id: u16, sq_head: u16, dw0: u32, status: Status, phase: bool) -> Self {
        Cqe {
            dw0,
            dw1: 0,
            sq_head,
            sq_id,
            cid,
            status: status.to_field() << 1 | phase as u16,
        }
    }

    /// The entry's 16 bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.dw0.to_le_bytes());
        b[4..8].copy_from_slice(&self.dw1.to_le_bytes());
        b[8..10].copy_from_slice(&self.sq_head.to_le_bytes());
        b[10..12].copy_from_slice(&self.sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&self.cid.to_le_bytes());
        b[14..16].copy_from_slice(&self.status.to_le_bytes());
        b
    }

    /// Parses 16 bytes.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        let h = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Cqe {
            dw0: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            dw1: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            sq_head: h(8),
            sq_id: h(10),
            cid: h(12),
            status: h(14),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::status::{GenericStatus, StatusCodeType};

    #[test]
    fn layout_and_fields() {
        let st = Status::new(StatusCodeType::Generic, GenericStatus::LbaOutOfRange as u8)
            .with_dnr(true)
            .with_more(true);
        let c = Cqe::new(0xBEEF, 3, 17, 0xAABB_CCDD, st, true);
        let b = c.to_bytes();
        assert_eq!(&b[0..4], &[0xDD, 0xCC, 0xBB, 0xAA]);
        assert_eq!(&b[8..10], &[17, 0], "SQHD is bytes 9:8");
        assert_eq!(&b[10..12], &[3, 0], "SQID is bytes 11:10");
        assert_eq!(&b[12..14], &[0xEF, 0xBE], "CID is bytes 13:12");
        // DW3 bits: P=16, SC=24:17, SCT=27:25, CRD=29:28, M=30, DNR=31.
        let dw3 = u32::from_le_bytes(b[12..16].try_into().unwrap());
        assert_eq!(dw3 >> 16 & 1, 1);
        assert_eq!(dw3 >> 17 & 0xFF, 0x80);
        assert_eq!(dw3 >> 25 & 7, 0);
        assert_eq!(dw3 >> 30 & 1, 1);
        assert_eq!(dw3 >> 31, 1);
        assert!(c.phase());
        assert_eq!(c.status(), st);
        assert_eq!(Cqe::from_bytes(&b), c);
        assert_eq!(bytemuck::bytes_of(&c), &b[..]);
    }
}
