//! Named datasets in the cache: [`Cache::create`], [`Cache::open`], [`Cache::datasets`],
//! [`Cache::remove`] over the storage's dataset catalog (its format:
//! [`bam_nvme::catalog`]). Arrays placed by [`Cache::alloc`] keep out of the catalog's
//! region once a catalog exists, and out of every dataset's extent.

use super::array::{Array, Element, Placement};
use super::{Cache, Layout};
use crate::error::{Error, Result};
use crate::io::Access;
use bam_nvme::catalog::{
    check_name, decode, encode, mismatch, Dataset, CATALOG_BYTES, MAX_DATASETS, RESERVED_BYTES,
};

fn invalid(m: String) -> Error {
    Error::InvalidArgument(m)
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
        decode(&b).map_err(|m| {
            invalid(format!(
                "{m} (Cache::remove of every name it lists, or writing the storage's last {} KiB \
                 anew, starts a new one)",
                RESERVED_BYTES >> 10
            ))
        })
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
        check_name(name).map_err(invalid)?;
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
        check_name(name).map_err(invalid)?;
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
        check_name(name).map_err(invalid)?;
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
