//! Identify data structures (NVMe Base Specification §5.15.2, NVM Command Set §4.1.5).
//!
//! Each structure is 4096 bytes on the wire. The Rust types hold the fields this library
//! uses; `to_bytes` writes them at the specification's offsets (the controller model uses
//! that) and `from_bytes` reads them back.

/// Size of every Identify data structure.
pub const IDENTIFY_SIZE: usize = 4096;

fn put<const N: usize>(b: &mut [u8], off: usize, v: [u8; N]) {
    b[off..off + N].copy_from_slice(&v);
}
fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}
/// ASCII field, space padded on the wire, trimmed here.
fn ascii_at(b: &[u8], off: usize, len: usize) -> String {
    String::from_utf8_lossy(&b[off..off + len])
        .trim_end_matches([' ', '\0'])
        .to_string()
}
fn put_ascii(b: &mut [u8], off: usize, len: usize, s: &str) {
    let field = &mut b[off..off + len];
    field.fill(b' ');
    let n = s.len().min(len);
    field[..n].copy_from_slice(&s.as_bytes()[..n]);
}

/// Identify Controller data structure (CNS 01h), the fields this library uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdentifyController {
    /// PCI Vendor ID (bytes 1:0).
    pub vid: u16,
    /// PCI Subsystem Vendor ID (3:2).
    pub ssvid: u16,
    /// Serial Number (23:4).
    pub serial: String,
    /// Model Number (63:24).
    pub model: String,
    /// Firmware Revision (71:64).
    pub firmware: String,
    /// Maximum Data Transfer Size (77), as a power of two in units of CAP.MPSMIN; 0 means
    /// no limit.
    pub mdts: u8,
    /// Controller ID (79:78).
    pub cntlid: u16,
    /// Version (83:80).
    pub ver: u32,
    /// Optional Admin Command Support (257:256).
    pub oacs: u16,
    /// Abort Command Limit (258), 0-based.
    pub acl: u8,
    /// Asynchronous Event Request Limit (259), 0-based.
    pub aerl: u8,
    /// Log Page Attributes (261).
    pub lpa: u8,
    /// Error Log Page Entries (262), 0-based.
    pub elpe: u8,
    /// Submission Queue Entry Size (512): required (3:0) and maximum (7:4), log2 bytes.
    pub sqes: u8,
    /// Completion Queue Entry Size (513).
    pub cqes: u8,
    /// Maximum Outstanding Commands (515:514).
    pub maxcmd: u16,
    /// Number of Namespaces (519:516).
    pub nn: u32,
    /// Optional NVM Command Support (521:520).
    pub oncs: u16,
    /// Volatile Write Cache (525).
    pub vwc: u8,
    /// SGL Support (539:536).
    pub sgls: u32,
    /// NVM Subsystem NVMe Qualified Name (1023:768).
    pub subnqn: String,
}

/// ONCS bit: Write Zeroes supported.
pub const ONCS_WRITE_ZEROES: u16 = 1 << 3;
/// ONCS bit: Dataset Management supported.
pub const ONCS_DSM: u16 = 1 << 2;

impl IdentifyController {
    /// Parses the 4096-byte structure.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Self {
        IdentifyController {
            vid: u16_at(b, 0),
            ssvid: u16_at(b, 2),
            serial: ascii_at(b, 4, 20),
            model: ascii_at(b, 24, 40),
            firmware: ascii_at(b, 64, 8),
            mdts: b[77],
            cntlid: u16_at(b, 78),
            ver: u32_at(b, 80),
            oacs: u16_at(b, 256),
            acl: b[258],
            aerl: b[259],
            lpa: b[261],
            elpe: b[262],
            sqes: b[512],
            cqes: b[513],
            maxcmd: u16_at(b, 514),
            nn: u32_at(b, 516),
            oncs: u16_at(b, 520),
            vwc: b[525],
            sgls: u32_at(b, 536),
            subnqn: ascii_at(b, 768, 256),
        }
    }

    /// Writes the 4096-byte structure; bytes of fields not held here are zero.
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        put(&mut b[..], 0, self.vid.to_le_bytes());
        put(&mut b[..], 2, self.ssvid.to_le_bytes());
        put_ascii(&mut b[..], 4, 20, &self.serial);
        put_ascii(&mut b[..], 24, 40, &self.model);
        put_ascii(&mut b[..], 64, 8, &self.firmware);
        b[77] = self.mdts;
        put(&mut b[..], 78, self.cntlid.to_le_bytes());
        put(&mut b[..], 80, self.ver.to_le_bytes());
        put(&mut b[..], 256, self.oacs.to_le_bytes());
        b[258] = self.acl;
        b[259] = self.aerl;
        b[261] = self.lpa;
        b[262] = self.elpe;
        b[512] = self.sqes;
        b[513] = self.cqes;
        put(&mut b[..], 514, self.maxcmd.to_le_bytes());
        put(&mut b[..], 516, self.nn.to_le_bytes());
        put(&mut b[..], 520, self.oncs.to_le_bytes());
        b[525] = self.vwc;
        put(&mut b[..], 536, self.sgls.to_le_bytes());
        let n = self.subnqn.len().min(256);
        b[768..768 + n].copy_from_slice(&self.subnqn.as_bytes()[..n]);
        b
    }

    /// The maximum data transfer size in bytes, given the controller's minimum page
    /// size, or `None` when the controller sets no limit.
    pub fn max_transfer_bytes(&self, mps_min_bytes: usize) -> Option<usize> {
        (self.mdts != 0).then(|| mps_min_bytes << self.mdts.min(20))
    }
}

/// One LBA Format descriptor (Identify Namespace bytes 128 + 4n).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbaFormat {
    /// Metadata Size in bytes.
    pub metadata_size: u16,
    /// LBA Data Size, log2 bytes.
    pub lba_data_size_log2: u8,
    /// Relative Performance (0 best .. 3 degraded).
    pub relative_performance: u8,
}

impl LbaFormat {
    /// Logical block size in bytes.
    ///
    /// 0 when LBADS is too large for 64 bits (a device lying about it); the controller
    /// bring-up rejects any LBADS outside 9..=16 before using this.
    pub fn block_size(&self) -> u64 {
        1u64.checked_shl(self.lba_data_size_log2 as u32)
            .unwrap_or(0)
    }
    fn encode(&self) -> u32 {
        self.metadata_size as u32
            | (self.lba_data_size_log2 as u32) << 16
            | ((self.relative_performance & 3) as u32) << 24
    }
    fn decode(v: u32) -> Self {
        LbaFormat {
            metadata_size: v as u16,
            lba_data_size_log2: (v >> 16) as u8,
            relative_performance: ((v >> 24) & 3) as u8,
        }
    }
}

/// Identify Namespace data structure (CNS 00h), the fields this library uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdentifyNamespace {
    /// Namespace Size in logical blocks (7:0).
    pub nsze: u64,
    /// Namespace Capacity (15:8).
    pub ncap: u64,
    /// Namespace Utilization (23:16).
    pub nuse: u64,
    /// Namespace Features (24).
    pub nsfeat: u8,
    /// Formatted LBA Size (26): bits 3:0 index the format in use.
    pub flbas: u8,
    /// LBA formats (128 + 4n), as many as NLBAF + 1.
    pub lba_formats: Vec<LbaFormat>,
}

impl IdentifyNamespace {
    /// Parses the 4096-byte structure.
    pub fn from_bytes(b: &[u8; IDENTIFY_SIZE]) -> Self {
        let nlbaf = (b[25] as usize + 1).min(64);
        IdentifyNamespace {
            nsze: u64_at(b, 0),
            ncap: u64_at(b, 8),
            nuse: u64_at(b, 16),
            nsfeat: b[24],
            flbas: b[26],
            lba_formats: (0..nlbaf)
                .map(|i| LbaFormat::decode(u32_at(b, 128 + 4 * i)))
                .collect(),
        }
    }

    /// Writes the 4096-byte structure.
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        put(&mut b[..], 0, self.nsze.to_le_bytes());
        put(&mut b[..], 8, self.ncap.to_le_bytes());
        put(&mut b[..], 16, self.nuse.to_le_bytes());
        b[24] = self.nsfeat;
        b[25] = self.lba_formats.len().saturating_sub(1) as u8;
        b[26] = self.flbas;
        for (i, f) in self.lba_formats.iter().take(64).enumerate() {
            put(&mut b[..], 128 + 4 * i, f.encode().to_le_bytes());
        }
        b
    }

    /// Index of the LBA format in use (FLBAS bits 3:0, with bits 6:5 as the high bits
    /// when more than 16 formats exist).
    pub fn format_index(&self) -> usize {
        (self.flbas & 0xF) as usize | (((self.flbas >> 5) & 3) as usize) << 4
    }

    /// The LBA format in use, if the index is valid.
    pub fn current_format(&self) -> Option<LbaFormat> {
        self.lba_formats.get(self.format_index()).copied()
    }
}

/// Parses an Active Namespace ID list (CNS 02h): the non-zero NSIDs, in order.
pub fn parse_namespace_list(b: &[u8; IDENTIFY_SIZE]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .take_while(|&id| id != 0)
        .collect()
}

/// Writes an Active Namespace ID list.
pub fn namespace_list_bytes(ids: &[u32]) -> Box<[u8; IDENTIFY_SIZE]> {
    let mut b = Box::new([0u8; IDENTIFY_SIZE]);
    for (i, id) in ids.iter().take(1024).enumerate() {
        put(&mut b[..], 4 * i, id.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_offsets() {
        let c = IdentifyController {
            vid: 0x1B36,
            ssvid: 0x1AF4,
            serial: "SN123".into(),
            model: "bam model".into(),
            firmware: "1.0".into(),
            mdts: 5,
            cntlid: 0x42,
            ver: 0x0001_0400,
            oacs: 0x0008,
            acl: 3,
            aerl: 3,
            lpa: 0x02,
            elpe: 63,
            sqes: 0x66,
            cqes: 0x44,
            maxcmd: 1024,
            nn: 2,
            oncs: ONCS_WRITE_ZEROES | ONCS_DSM,
            vwc: 1,
            sgls: 0,
            subnqn: "nqn.2026-01.io.bam:model".into(),
        };
        let b = c.to_bytes();
        assert_eq!(&b[0..2], &[0x36, 0x1B]);
        assert_eq!(&b[4..9], b"SN123");
        assert_eq!(b[9], b' ', "ASCII fields are space padded");
        assert_eq!(&b[24..33], b"bam model");
        assert_eq!(&b[64..67], b"1.0");
        assert_eq!(b[77], 5);
        assert_eq!(&b[78..80], &[0x42, 0]);
        assert_eq!(&b[80..84], &[0, 4, 1, 0]);
        assert_eq!(b[512], 0x66);
        assert_eq!(b[513], 0x44);
        assert_eq!(&b[514..516], &1024u16.to_le_bytes());
        assert_eq!(&b[516..520], &[2, 0, 0, 0]);
        assert_eq!(&b[520..522], &[0x0C, 0]);
        assert_eq!(&b[768..772], b"nqn.");
        assert_eq!(IdentifyController::from_bytes(&b), c);
        assert_eq!(c.max_transfer_bytes(4096), Some(128 * 1024));
        assert_eq!(IdentifyController::default().max_transfer_bytes(4096), None);
    }

    #[test]
    fn namespace_offsets() {
        let ns = IdentifyNamespace {
            nsze: 0x1_0000_0000,
            ncap: 0x1_0000_0000,
            nuse: 5,
            nsfeat: 0,
            flbas: 1,
            lba_formats: vec![
                LbaFormat {
                    metadata_size: 0,
                    lba_data_size_log2: 9,
                    relative_performance: 0,
                },
                LbaFormat {
                    metadata_size: 8,
                    lba_data_size_log2: 12,
                    relative_performance: 2,
                },
            ],
        };
        let b = ns.to_bytes();
        assert_eq!(&b[0..8], &0x1_0000_0000u64.to_le_bytes());
        assert_eq!(&b[16..24], &5u64.to_le_bytes());
        assert_eq!(b[25], 1, "NLBAF is 0-based");
        assert_eq!(b[26], 1);
        assert_eq!(&b[128..132], &[0, 0, 9, 0]);
        assert_eq!(&b[132..136], &[8, 0, 12, 2]);
        let back = IdentifyNamespace::from_bytes(&b);
        assert_eq!(back, ns);
        assert_eq!(back.current_format().unwrap().block_size(), 4096);
    }

    #[test]
    fn namespace_list() {
        let b = namespace_list_bytes(&[1, 2, 7]);
        assert_eq!(&b[0..12], &[1, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0]);
        assert_eq!(parse_namespace_list(&b), vec![1, 2, 7]);
    }
}
