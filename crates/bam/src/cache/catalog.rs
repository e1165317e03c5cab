//! Named datasets: a small catalog on the storage that maps a name to an array's place,
//! element size and length, so that a later program opens `"edges"` instead of computing
//! LBAs ([`Cache::create`], [`Cache::open`], [`Cache::datasets`], [`Cache::remove`]).
//!
//! Where: the last [`RESERVED_BYTES`] of every SSD (the same copy on each: written through
//! a replicated array), of which the catalog uses the first [`CATALOG_BYTES`]. Arrays
//! placed by [`Cache::alloc`] keep out of that region once a catalog exists, and out of
//! every dataset's extent.
//!
//! Format (little-endian), version 1: a 64-byte header — magic `BAMCAT\0\x01`, version
//! (u32), entries (u32), CRC-32 (IEEE) of the header with this field zero followed by the
//! entries — then 128-byte entries: name (64 bytes, UTF-8, NUL-padded), element size
//! (u32), layout (u32, 0 = stripe), SSDs (u32), line bytes (u32), elements (u64), first
//! LBA (u64), LBAs per SSD (u64), 16 bytes reserved (zero). A catalog whose magic is
//! there but whose version or checksum is wrong is an error, never read as empty.

use super::array::{Array, Element, Placement};
use super::{Cache, Layout};
use crate::error::{Error, Result};
use crate::io::Access;

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

/// One named dataset: what [`Cache::datasets`] lists and [`Cache::open`] opens.
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
    /// The cache line size it was written with (the stripe unit: a cache opening it must
    /// have the same).
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

/// The catalog's bytes for `sets`.
pub(crate) fn encode(sets: &[Dataset]) -> Vec<u8> {
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

/// Reads a catalog's bytes: `None` when there is none (no magic), an error when one is
/// there but damaged.
pub(crate) fn decode(b: &[u8]) -> Result<Option<Vec<Dataset>>> {
    if b.len() < HEADER || b[..8] != MAGIC {
        return Ok(None);
    }
    let bad = |why: String| {
        Err(Error::InvalidArgument(format!(
            "the storage's dataset catalog is damaged: {why} (Cache::remove of every name, or \
             writing the storage's last {} KiB anew, starts a new one)",
            RESERVED_BYTES >> 10
        )))
    };
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
/// `line_bytes` lines over `ssds` SSDs; None when it can.
fn mismatch(d: &Dataset, size: u32, line_bytes: u32, ssds: u32) -> Option<String> {
    if size != d.elem_size {
        Some(format!(
            "its elements are {} bytes, the type asked for has {size}",
            d.elem_size
        ))
    } else if line_bytes != d.line_bytes {
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
fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() >= NAME || name.contains('\0') {
        return Err(Error::InvalidArgument(format!(
            "dataset name {name:?}: 1 to {} bytes of UTF-8 without NUL",
            NAME - 1
        )));
    }
    Ok(())
}

impl<'s> Cache<'s> {
    /// First LBA of the reserved region on each SSD, or None when the SSDs are too small
    /// to keep one (twice [`RESERVED_BYTES`]).
    fn catalog_lba(&self) -> Option<u64> {
        let geo = self.io().geometry();
        let lba = geo.lba_size as u64;
        let bytes = geo.ns_blocks.checked_mul(lba)?;
        (bytes >= 2 * RESERVED_BYTES).then(|| geo.ns_blocks - RESERVED_BYTES / lba)
    }

    /// The catalog's datasets, `None` when the storage has no catalog (or an array of this
    /// cache covers its place: then it is that array's data).
    pub(crate) fn read_catalog(&self) -> Result<Option<Vec<Dataset>>> {
        let Some(at) = self.catalog_lba() else {
            return Ok(None);
        };
        let arr = match Array::<u8>::new(
            self,
            CATALOG_BYTES,
            Placement::At(at),
            Layout::Replicate,
            Access::ReadOnly,
        ) {
            Ok(a) => a,
            Err(Error::InvalidArgument(m)) if m.contains("overlap") => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut b = vec![0u8; CATALOG_BYTES as usize];
        arr.read(0, &mut b)?;
        arr.close()?;
        decode(&b)
    }

    /// Writes the catalog (every SSD's copy) and flushes it.
    fn write_catalog(&self, sets: &[Dataset]) -> Result<()> {
        let at = self.catalog_lba().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the SSDs are too small for a dataset catalog (it needs {} MiB at the end of each)",
                (2 * RESERVED_BYTES) >> 20
            ))
        })?;
        let arr = Array::<u8>::new(
            self,
            CATALOG_BYTES,
            Placement::At(at),
            Layout::Replicate,
            Access::ReadWrite,
        )?;
        let mut b = encode(sets);
        b.resize(CATALOG_BYTES as usize, 0);
        arr.load(&b, 0)?;
        arr.close()?;
        Ok(())
    }

    /// What [`Cache::alloc`] keeps out of besides live arrays: the datasets and the
    /// catalog's region, when there is a catalog.
    pub(crate) fn catalog_extents(&self) -> Result<Vec<(u64, u64)>> {
        let Some(sets) = self.read_catalog()? else {
            return Ok(Vec::new());
        };
        let lba = self.io().geometry().lba_size as u64;
        let mut v: Vec<(u64, u64)> = sets.iter().map(|d| (d.start_lba, d.extent)).collect();
        if let Some(at) = self.catalog_lba() {
            v.push((at, RESERVED_BYTES / lba));
        }
        Ok(v)
    }

    /// The named datasets on the storage (empty when it has no catalog); an error when
    /// its catalog is damaged.
    pub fn datasets(&self) -> Result<Vec<Dataset>> {
        Ok(self.read_catalog()?.unwrap_or_default())
    }

    /// A new array of `n` elements of `T` named `name`, placed like [`Cache::alloc`] (and
    /// out of every other dataset's way), recorded in the storage's catalog so that
    /// [`Cache::open`] finds it again, in this program or a later one.
    ///
    /// ```no_run
    /// # fn main() -> bam::Result<()> {
    /// use bam::cache::{io_config, Cache, CacheConfig};
    /// let gpu = bam::Gpu::new(0)?;
    /// let cfg = CacheConfig::new(4096, 4096);
    /// let storage = "sim:ideal".parse::<bam::storage::GpuDevice>()?.open(&gpu, &io_config(&cfg))?;
    /// let cache = Cache::new(storage.io(), cfg)?;
    /// let edges = cache.create::<u32>("edges", 1 << 20)?;
    /// edges.load(&vec![7u32; 1 << 20], 0)?;
    /// edges.close()?;
    /// let again = cache.open::<u32>("edges")?; // later, or in another program
    /// # drop(again); Ok(()) }
    /// ```
    pub fn create<T: Element>(&self, name: &str, n: u64) -> Result<Array<'_, T>> {
        check_name(name)?;
        let _one = self.inner.catalog.lock().expect("catalog lock");
        let Some(at) = self.catalog_lba() else {
            return Err(Error::InvalidArgument(format!(
                "the SSDs are too small for a dataset catalog (each needs at least {} MiB)",
                (2 * RESERVED_BYTES) >> 20
            )));
        };
        let mut sets = self.read_catalog()?.unwrap_or_default();
        if sets.iter().any(|d| d.name == name) {
            return Err(Error::InvalidArgument(format!(
                "a dataset named {name:?} exists (Cache::open it, or Cache::remove it first)"
            )));
        }
        if sets.len() >= MAX_DATASETS {
            return Err(Error::InvalidArgument(format!(
                "the catalog holds {MAX_DATASETS} datasets, no more"
            )));
        }
        // The catalog's own region must be free of this cache's arrays.
        let lba = self.io().geometry().lba_size as u64;
        let region = (at, RESERVED_BYTES / lba);
        {
            let live = self.inner.live.lock().expect("cache array table");
            if let Some((s, e)) = live
                .iter()
                .flatten()
                .find(|(s, e)| *s < region.0 + region.1 && region.0 < s + e)
            {
                return Err(Error::InvalidArgument(format!(
                    "an array of this cache holds LBAs {s}..{}, where the dataset catalog goes \
                     (the last {} KiB of each SSD)",
                    s + e,
                    RESERVED_BYTES >> 10
                )));
            }
        }
        let mut taken: Vec<(u64, u64)> = sets.iter().map(|d| (d.start_lba, d.extent)).collect();
        taken.push(region);
        let arr = Array::<T>::new(
            self,
            n,
            Placement::FirstFree(taken),
            Layout::Stripe,
            Access::ReadWrite,
        )?;
        let geo = self.io().geometry();
        sets.push(Dataset {
            name: name.to_string(),
            elem_size: std::mem::size_of::<T>() as u32,
            len: n,
            start_lba: arr.start_lba(),
            extent: arr.extent_lbas(),
            line_bytes: self.inner.cfg.line_bytes,
            ssds: geo.ssds,
        });
        self.write_catalog(&sets)?;
        Ok(arr)
    }

    /// The dataset named `name` (as [`Cache::create`] made it), as an array of `T`. Refused
    /// when `T`'s size, the cache's line size or the SSD count differ from the dataset's.
    pub fn open<T: Element>(&self, name: &str) -> Result<Array<'_, T>> {
        self.open_as(name, Access::ReadWrite)
    }

    /// [`Cache::open`] as a read-only array.
    pub fn open_read_only<T: Element>(&self, name: &str) -> Result<Array<'_, T>> {
        self.open_as(name, Access::ReadOnly)
    }

    fn open_as<T: Element>(&self, name: &str, access: Access) -> Result<Array<'_, T>> {
        check_name(name)?;
        let sets = self.datasets()?;
        let Some(d) = sets.iter().find(|d| d.name == name) else {
            let names: Vec<&str> = sets.iter().map(|d| d.name.as_str()).collect();
            return Err(Error::InvalidArgument(format!(
                "no dataset named {name:?} on this storage (it has: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        };
        let size = std::mem::size_of::<T>() as u32;
        let geo = self.io().geometry();
        if let Some(m) = mismatch(d, size, self.inner.cfg.line_bytes, geo.ssds) {
            return Err(Error::InvalidArgument(format!("dataset {name:?}: {m}")));
        }
        Array::new(
            self,
            d.len,
            Placement::At(d.start_lba),
            Layout::Stripe,
            access,
        )
    }

    /// Drops `name` from the catalog (its data stays where it was until something else is
    /// placed there).
    pub fn remove(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let _one = self.inner.catalog.lock().expect("catalog lock");
        let mut sets = self.datasets()?;
        let before = sets.len();
        sets.retain(|d| d.name != name);
        if sets.len() == before {
            return Err(Error::InvalidArgument(format!(
                "no dataset named {name:?} to remove"
            )));
        }
        self.write_catalog(&sets)
    }
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
        assert!(decode(&d).unwrap_err().to_string().contains("checksum"));
        let mut d = b.clone();
        d[8] = 2;
        assert!(decode(&d).unwrap_err().to_string().contains("version 2"));
        let mut d = b;
        d[12..16].copy_from_slice(&100_000u32.to_le_bytes());
        assert!(decode(&d).unwrap_err().to_string().contains("entries"));
    }

    #[test]
    fn opening_checks_type_line_and_ssds() {
        let d = set("edges", 1);
        assert_eq!(mismatch(&d, 4, 4096, 2), None);
        assert!(mismatch(&d, 8, 4096, 2).unwrap().contains("4 bytes"));
        assert!(mismatch(&d, 4, 8192, 2).unwrap().contains("4096 B lines"));
        assert!(mismatch(&d, 4, 4096, 1).unwrap().contains("over 2 SSDs"));
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("edges").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(&"x".repeat(64)).is_err());
        assert!(check_name("a\0b").is_err());
        assert!(check_name(&"x".repeat(63)).is_ok());
    }
}
