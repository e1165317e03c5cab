//! The model image's header: its layout, its encoding and checks, and the problems that
//! make an image unusable.

/// Magic number at the start of a model image.
pub const IMAGE_MAGIC: [u8; 8] = *b"BAMMODEL";

/// The image format version this crate writes and reads.
pub const IMAGE_VERSION: u32 = 1;

/// Bytes of the image header; the medium's data starts right after it.
pub const IMAGE_HEADER_BYTES: u64 = 4096;

/// Human-readable note in the header, for whoever looks at the file with `head` or `xxd`.
const IMAGE_NOTE: &[u8] =
    b"bam NVMe controller model image; header 4096 bytes, block data after it\n";

/// The geometry an image header records.
///
/// Layout (little-endian, 4096 bytes): magic `BAMMODEL` (0..8), format version (8..12),
/// header size 4096 (12..16), logical block size (16..20), flags, zero (20..24), blocks
/// (24..32), an FNV-1a 64 checksum of the whole header with this field zeroed (32..40),
/// a text note (64..), zeroes. The data of block `n` is at byte `4096 + n * lba_size`, and
/// the file is exactly `4096 + blocks * lba_size` bytes long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageHeader {
    /// Logical block size in bytes: a power of two from 512 to 65536.
    pub lba_size: u32,
    /// Namespace size in blocks (at least 1).
    pub blocks: u64,
}

/// Why a model image cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageProblem {
    /// There is no file, and creation was not asked for.
    #[error("no such model image (a new one is created only when its size is given: model:PATH,size=SIZE)")]
    Missing,
    /// The file is empty, and creation was not asked for.
    #[error("the file is empty, not a bam model image (give size= to make a new image in it)")]
    Empty,
    /// The file does not start with the image header: a raw disk image or another file.
    #[error("not a bam model image: the file ({len} bytes) has no image header (a raw disk image is imported into a new image with bam load FILE --device model:NEW.img,size=SIZE)")]
    NotAnImage {
        /// The file's length.
        len: u64,
    },
    /// The file ends inside the header.
    #[error("the image is truncated: {len} bytes, less than its {IMAGE_HEADER_BYTES}-byte header")]
    TruncatedHeader {
        /// The file's length.
        len: u64,
    },
    /// The header is of another format version.
    #[error(
        "image format version {found} is not supported (this bam reads version {IMAGE_VERSION})"
    )]
    UnsupportedVersion {
        /// The version in the header.
        found: u32,
    },
    /// The header is damaged.
    #[error("the image header is corrupt: {0}")]
    Corrupt(String),
    /// The file is not as long as its header says.
    #[error("the image is {actual} bytes long, but its header says {expected} ({} bytes of header and data): the file was truncated or extended", IMAGE_HEADER_BYTES)]
    LengthMismatch {
        /// Length the header implies.
        expected: u64,
        /// The file's length.
        actual: u64,
    },
    /// The block size asked for is not the image's.
    #[error("the image has {image}-byte blocks, not the {asked} asked for (lba=); its data would be read at other offsets")]
    LbaMismatch {
        /// The image's block size.
        image: u32,
        /// The block size asked for.
        asked: u32,
    },
    /// The capacity asked for is not the image's.
    #[error("the image holds {image} bytes, not the {asked} asked for (size=); an existing image keeps its size")]
    CapacityMismatch {
        /// The image's capacity in bytes.
        image: u64,
        /// The capacity asked for.
        asked: u64,
    },
    /// Another opener holds the image's lock.
    #[error("the image is in use by another process or handle (it holds the image's lock{}): one writer, or any number of readers, at a time", if *.writer { " for writing" } else { "" })]
    InUse {
        /// The other holder writes (we asked for a shared lock and met an exclusive one).
        writer: bool,
    },
}

impl ImageHeader {
    /// Bytes of block data the image holds (`None` if that overflows).
    pub fn data_bytes(&self) -> Option<u64> {
        self.blocks.checked_mul(self.lba_size as u64)
    }

    /// The file length the header implies (`None` if that overflows).
    pub fn file_bytes(&self) -> Option<u64> {
        self.data_bytes()?.checked_add(IMAGE_HEADER_BYTES)
    }

    /// The header's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; IMAGE_HEADER_BYTES as usize];
        b[0..8].copy_from_slice(&IMAGE_MAGIC);
        b[8..12].copy_from_slice(&IMAGE_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(IMAGE_HEADER_BYTES as u32).to_le_bytes());
        b[16..20].copy_from_slice(&self.lba_size.to_le_bytes());
        b[24..32].copy_from_slice(&self.blocks.to_le_bytes());
        b[64..64 + IMAGE_NOTE.len()].copy_from_slice(IMAGE_NOTE);
        let sum = checksum(&b);
        b[32..40].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Checks and decodes a header: `head` is the file's first bytes (up to
    /// [`IMAGE_HEADER_BYTES`]), `file_len` the file's length. Any input gives a header or
    /// a problem, never a panic.
    pub fn decode(head: &[u8], file_len: u64) -> Result<Self, ImageProblem> {
        if file_len == 0 {
            return Err(ImageProblem::Empty);
        }
        if head.len() < IMAGE_MAGIC.len() || head[..8] != IMAGE_MAGIC {
            return Err(ImageProblem::NotAnImage { len: file_len });
        }
        let hb = IMAGE_HEADER_BYTES as usize;
        if head.len() < hb || file_len < IMAGE_HEADER_BYTES {
            return Err(ImageProblem::TruncatedHeader {
                len: file_len.min(head.len() as u64),
            });
        }
        let head = &head[..hb];
        let u32_at =
            |o: usize| u32::from_le_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
        let u64_at = |o: usize| (u32_at(o) as u64) | (u32_at(o + 4) as u64) << 32;
        let version = u32_at(8);
        if version != IMAGE_VERSION {
            return Err(ImageProblem::UnsupportedVersion { found: version });
        }
        if u64_at(32) != checksum(head) {
            return Err(ImageProblem::Corrupt("its checksum does not match".into()));
        }
        let corrupt = |m: String| Err(ImageProblem::Corrupt(m));
        if u32_at(12) as u64 != IMAGE_HEADER_BYTES {
            return corrupt(format!(
                "header size {} is not {IMAGE_HEADER_BYTES}",
                u32_at(12)
            ));
        }
        if u32_at(20) != 0 {
            return corrupt(format!("unknown flags {:#x}", u32_at(20)));
        }
        let h = ImageHeader {
            lba_size: u32_at(16),
            blocks: u64_at(24),
        };
        if !h.lba_size.is_power_of_two() || !(512..=65536).contains(&h.lba_size) {
            return corrupt(format!(
                "block size {} is not a power of two from 512 to 65536",
                h.lba_size
            ));
        }
        let Some(expected) = h.file_bytes().filter(|_| h.blocks > 0) else {
            return corrupt(format!(
                "{} blocks of {} bytes is not a possible size",
                h.blocks, h.lba_size
            ));
        };
        if expected != file_len {
            return Err(ImageProblem::LengthMismatch {
                expected,
                actual: file_len,
            });
        }
        Ok(h)
    }
}

/// FNV-1a 64 of the header with its checksum field (bytes 32..40) taken as zero.
fn checksum(header: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, &b) in header.iter().enumerate() {
        let b = if (32..40).contains(&i) { 0 } else { b };
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_damage() {
        let h = ImageHeader {
            lba_size: 4096,
            blocks: 1 << 20,
        };
        let len = h.file_bytes().unwrap();
        let b = h.encode();
        assert_eq!(ImageHeader::decode(&b, len), Ok(h));
        let mut v2 = b.clone();
        v2[8] = 2;
        assert_eq!(
            ImageHeader::decode(&v2, len),
            Err(ImageProblem::UnsupportedVersion { found: 2 })
        );
        let mut flipped = b.clone();
        flipped[24] ^= 1;
        assert!(matches!(
            ImageHeader::decode(&flipped, len),
            Err(ImageProblem::Corrupt(m)) if m.contains("checksum")
        ));
        // A header with a valid checksum but impossible geometry.
        for (lba_size, blocks) in [(1000, 1), (512, 0), (65536, u64::MAX / 4096)] {
            let bad = ImageHeader { lba_size, blocks }.encode();
            assert!(matches!(
                ImageHeader::decode(&bad, len),
                Err(ImageProblem::Corrupt(_))
            ));
        }
    }
}
