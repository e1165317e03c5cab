//! The dataset catalog: a small table on the storage that maps a name to an array's
//! place, element size and length, written by the CPU tools (`bam load --name`, listed by
//! `bam info`) and by the GPU cache (`bam::cache::Cache::create`, found again by
//! `Cache::open`). This module is its format; the cache and the CLI read and write it
//! through their own I/O paths.
//!
//! Where: the last [`RESERVED_BYTES`] of every SSD (the same copy on each), of which the
//! catalog uses the first [`CATALOG_BYTES`].
//!
//! Format (little-endian), version 1: a 64-byte header — magic `BAMCAT\0\x01`, version
//! (u32), entries (u32), CRC-32 (IEEE) of the header with this field zero followed by the
//! entries — then 128-byte entries: name (64 bytes, UTF-8, NUL-padded), element size
//! (u32), layout (u32, 0 = stripe), SSDs (u32), line bytes (u32), elements (u64), first
//! LBA (u64), LBAs per SSD (u64), 16 bytes reserved (zero). A catalog whose magic is
//! there but whose version or checksum is wrong is an error, never read as empty.

/// Bytes kept at the end of every SSD once a catalog exists.
pub const RESERVED_BYTES: u64 = 1 << 20;
/// Bytes of the catalog itself (at the start of the reserved region).
pub const CATALOG_BYTES: u64 = 64 << 10;
const MAGIC: [u8; 8] = *b"BAMCAT\0\x01";
const VERSION: u32 = 1;
const HEADER: usize = 64;
const ENTRY: usize = 128;
const NAME: usize = 64;
/// Entries one catalog holds.
pub const MAX_DATASETS: usize = (CATALOG_BYTES as usize - HEADER) / ENTRY;

/// One named dataset: what the catalog records of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dataset {
    /// Its name (1 to 63 bytes of UTF-8, no NUL).
    pub name: String,
    /// Bytes per element.
    pub elem_size: u32,
    /// Elements.
    pub len: u64,
    /// First LBA on each SSD.
    pub start_lba: u64,
    /// LBAs it takes on each SSD.
    pub extent: u64,
    /// The cache line size it was written with (the stripe unit: a cache opening a dataset
    /// of several SSDs must have the same; 0 when written by the CPU tools, one SSD).
    pub line_bytes: u32,
    /// SSDs it is striped over.
    pub ssds: u32,
}

/// The IEEE CRC-32 (as zlib's), bitwise.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// The catalog's region of a namespace (an SSD) of `blocks` blocks of `block_size`
/// bytes: (first LBA, LBAs), the last [`RESERVED_BYTES`]; None when the namespace is too
/// small to keep one (under twice that) or its blocks do not divide it.
pub fn region(blocks: u64, block_size: u64) -> Option<(u64, u64)> {
    let bytes = blocks.checked_mul(block_size)?;
    (block_size > 0 && bytes >= 2 * RESERVED_BYTES && RESERVED_BYTES.is_multiple_of(block_size))
        .then(|| {
            (
                blocks - RESERVED_BYTES / block_size,
                RESERVED_BYTES / block_size,
            )
        })
}

/// Why a namespace of `bytes` bytes cannot keep a catalog.
pub fn too_small(bytes: u64) -> String {
    format!(
        "{bytes} bytes is too small for a dataset catalog (it needs at least {} MiB)",
        (2 * RESERVED_BYTES) >> 20
    )
}

/// What a new dataset or array keeps out of: every dataset's extent and the catalog's
/// `region`, as (first LBA, LBAs) pairs for [`first_free`].
pub fn taken(sets: &[Dataset], region: (u64, u64)) -> Vec<(u64, u64)> {
    sets.iter()
        .map(|d| (d.start_lba, d.extent))
        .chain(std::iter::once(region))
        .collect()
}

/// The catalog's bytes for `sets`.
pub fn encode(sets: &[Dataset]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER + ENTRY * sets.len()];
    b[..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(sets.len() as u32).to_le_bytes());
    for (k, d) in sets.iter().enumerate() {
        let e = &mut b[HEADER + ENTRY * k..HEADER + ENTRY * (k + 1)];
        e[..d.name.len()].copy_from_slice(d.name.as_bytes());
        e[NAME..NAME + 4].copy_from_slice(&d.elem_size.to_le_bytes());
        // layout (4 bytes): 0, stripe
        e[NAME + 8..NAME + 12].copy_from_slice(&d.ssds.to_le_bytes());
        e[NAME + 12..NAME + 16].copy_from_slice(&d.line_bytes.to_le_bytes());
        e[NAME + 16..NAME + 24].copy_from_slice(&d.len.to_le_bytes());
        e[NAME + 24..NAME + 32].copy_from_slice(&d.start_lba.to_le_bytes());
        e[NAME + 32..NAME + 40].copy_from_slice(&d.extent.to_le_bytes());
    }
    let crc = crc32(&b);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Reads a catalog's bytes: `None` when there is none (no magic), an error (what is
/// wrong, in words) when one is there but damaged.
pub fn decode(b: &[u8]) -> Result<Option<Vec<Dataset>>, String> {
    if b.len() < HEADER || b[..8] != MAGIC {
        return Ok(None);
    }
    let bad = |why: String| Err(format!("the storage's dataset catalog is damaged: {why}"));
    let version = u32_at(b, 8);
    if version != VERSION {
        return bad(format!(
            "version {version}, this library reads version {VERSION}"
        ));
    }
    let count = u32_at(b, 12) as usize;
    if count > MAX_DATASETS || HEADER + ENTRY * count > b.len() {
        return bad(format!("{count} entries, at most {MAX_DATASETS} fit"));
    }
    let mut whole = b[..HEADER + ENTRY * count].to_vec();
    let crc = u32_at(&whole, 16);
    whole[16..20].fill(0);
    if crc32(&whole) != crc {
        return bad("its checksum does not match".into());
    }
    let mut sets = Vec::with_capacity(count);
    for k in 0..count {
        let e = &whole[HEADER + ENTRY * k..HEADER + ENTRY * (k + 1)];
        let end = e[..NAME].iter().position(|&c| c == 0).unwrap_or(NAME);
        let Ok(name) = std::str::from_utf8(&e[..end]) else {
            return bad(format!("entry {k}'s name is not UTF-8"));
        };
        sets.push(Dataset {
            name: name.to_string(),
            elem_size: u32_at(e, NAME),
            ssds: u32_at(e, NAME + 8),
            line_bytes: u32_at(e, NAME + 12),
            len: u64_at(e, NAME + 16),
            start_lba: u64_at(e, NAME + 24),
            extent: u64_at(e, NAME + 32),
        });
    }
    Ok(Some(sets))
}

/// Why dataset `d` cannot be opened as elements of `size` bytes by a cache of
/// `line_bytes` lines over `ssds` SSDs; None when it can. The line size matters only
/// when the dataset is striped over several SSDs (it is the stripe unit); on one SSD a
/// dataset is its blocks in order, whatever line size wrote it.
pub fn mismatch(d: &Dataset, size: u32, line_bytes: u32, ssds: u32) -> Option<String> {
    if size != d.elem_size {
        Some(format!(
            "its elements are {} bytes, the type asked for has {size}",
            d.elem_size
        ))
    } else if d.ssds > 1 && line_bytes != d.line_bytes {
        Some(format!(
            "it was written with {} B lines, this cache has {line_bytes} B lines (the stripe unit)",
            d.line_bytes
        ))
    } else if ssds != d.ssds {
        Some(format!(
            "it is striped over {} SSDs, this storage has {ssds}",
            d.ssds
        ))
    } else {
        None
    }
}

/// Checks a dataset name: 1 to 63 bytes, no NUL.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() >= NAME || name.contains('\0') {
        return Err(format!(
            "dataset name {name:?}: 1 to {} bytes of UTF-8 without NUL",
            NAME - 1
        ));
    }
    Ok(())
}

/// The lowest start, a multiple of `align` LBAs, of `extent` LBAs in `0..capacity` that
/// overlaps none of the (start, length) extents of `taken`; None when none fits.
pub fn first_free(taken: &[(u64, u64)], extent: u64, align: u64, capacity: u64) -> Option<u64> {
    let mut taken = taken.to_vec();
    taken.sort_unstable();
    let mut at = 0u64;
    for (s, len) in taken {
        if at.checked_add(extent)? <= s {
            break;
        }
        at = at.max(s.checked_add(len)?.checked_next_multiple_of(align)?);
    }
    (at.checked_add(extent)? <= capacity).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, k: u64) -> Dataset {
        Dataset {
            name: name.into(),
            elem_size: 4,
            len: 1000 + k,
            start_lba: 8 * k,
            extent: 8,
            line_bytes: 4096,
            ssds: 2,
        }
    }

    #[test]
    fn crc32_is_zlibs() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn catalog_round_trips_and_damage_is_an_error() {
        let sets = vec![set("edges", 1), set("weights-é", 2)];
        let mut b = encode(&sets);
        b.resize(CATALOG_BYTES as usize, 0xee);
        assert_eq!(decode(&b).unwrap(), Some(sets.clone()));
        assert_eq!(decode(&encode(&[])).unwrap(), Some(vec![]));
        // No magic: no catalog (a fresh medium).
        assert_eq!(decode(&[0u8; 4096]).unwrap(), None);
        // A flipped bit in an entry, a wrong version, an impossible count: errors.
        let mut d = b.clone();
        d[HEADER + 70] ^= 1;
        assert!(decode(&d).unwrap_err().contains("checksum"));
        let mut d = b.clone();
        d[8] = 2;
        assert!(decode(&d).unwrap_err().contains("version 2"));
        let mut d = b;
        d[12..16].copy_from_slice(&100_000u32.to_le_bytes());
        assert!(decode(&d).unwrap_err().contains("entries"));
    }

    #[test]
    fn opening_checks_type_line_and_ssds() {
        let d = set("edges", 1);
        assert_eq!(mismatch(&d, 4, 4096, 2), None);
        assert!(mismatch(&d, 8, 4096, 2).unwrap().contains("4 bytes"));
        assert!(mismatch(&d, 4, 8192, 2).unwrap().contains("4096 B lines"));
        assert!(mismatch(&d, 4, 4096, 1).unwrap().contains("over 2 SSDs"));
        // One SSD: any line size reads it.
        let one = Dataset {
            ssds: 1,
            line_bytes: 0,
            ..d
        };
        assert_eq!(mismatch(&one, 4, 8192, 1), None);
    }

    #[test]
    fn region_is_the_last_mib_of_a_large_enough_namespace() {
        assert_eq!(region(32768, 512), Some((30720, 2048)));
        assert_eq!(region(512, 4096), Some((256, 256)));
        assert_eq!(region(4095, 512), None); // under 2 MiB
        assert_eq!(region(u64::MAX, 512), None);
        assert_eq!(region(10_000, 0), None);
        let t = taken(&[set("a", 1)], (100, 20));
        assert_eq!(t, [(8, 8), (100, 20)]);
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("edges").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(&"x".repeat(64)).is_err());
        assert!(check_name("a\0b").is_err());
        assert!(check_name(&"x".repeat(63)).is_ok());
    }

    #[test]
    fn first_free_takes_the_lowest_gap_that_fits() {
        // Empty: at 0; beside one array: right after it, rounded up to the alignment.
        assert_eq!(first_free(&[], 10, 8, 100), Some(0));
        assert_eq!(first_free(&[(0, 10)], 10, 8, 100), Some(16));
        // A gap in front that fits, one that does not.
        assert_eq!(first_free(&[(16, 8)], 16, 8, 100), Some(0));
        assert_eq!(first_free(&[(8, 8)], 16, 8, 100), Some(16));
        // Unsorted input; the gap between two arrays.
        assert_eq!(first_free(&[(48, 8), (0, 16)], 32, 8, 100), Some(16));
        assert_eq!(first_free(&[(48, 8), (0, 16)], 40, 8, 100), Some(56));
        // No room, and extents near u64::MAX do not overflow.
        assert_eq!(first_free(&[(0, 90)], 16, 8, 100), None);
        assert_eq!(first_free(&[], 101, 1, 100), None);
        assert_eq!(first_free(&[(0, u64::MAX)], 1, 8, u64::MAX), None);
        assert_eq!(first_free(&[], u64::MAX, 8, 100), None);
    }
}
