//! Named datasets in the cache: [`Cache::create`], [`Cache::open`], [`Cache::datasets`],
//! [`Cache::remove`] over the storage's dataset catalog (its format:
//! [`bam_nvme::catalog`]). Arrays placed by [`Cache::alloc`] keep out of the catalog's
//! region once a catalog exists, and out of every dataset's extent.

use super::array::{Array, Element, Placement};
use super::{Cache, Layout};
use crate::error::{Error, Result};
use crate::io::Access;
use bam_nvme::catalog::{
    check_name, decode, encode, mismatch, region, taken, too_small, Dataset, CATALOG_BYTES,
    MAX_DATASETS, RESERVED_BYTES,
};

fn invalid(m: String) -> Error {
    Error::InvalidArgument(m)
}

impl<'s> Cache<'s> {
    /// The catalog's region on each SSD (first LBA, LBAs), or None when the SSDs are too
    /// small to keep one.
    fn catalog_region(&self) -> Option<(u64, u64)> {
        let geo = self.io().geometry();
        region(geo.ns_blocks, geo.lba_size as u64)
    }

    /// The catalog's region, or the error that says the SSDs are too small for one.
    fn catalog_region_or_err(&self) -> Result<(u64, u64)> {
        self.catalog_region().ok_or_else(|| {
            let geo = self.io().geometry();
            invalid(format!(
                "each SSD's {}",
                too_small(geo.ns_blocks.saturating_mul(geo.lba_size as u64))
            ))
        })
    }

    /// An array of this cache that holds LBAs of `(start, len)`, as (start, len).
    fn live_overlap(&self, (at, len): (u64, u64)) -> Option<(u64, u64)> {
        let live = self.inner.live.lock().expect("cache array table");
        live.iter()
            .flatten()
            .find(|(s, e)| *s < at + len && at < s + e)
            .copied()
    }

    /// The catalog's datasets, `None` when the storage has no catalog (or an array of this
    /// cache covers its place: then it is that array's data).
    pub(crate) fn read_catalog(&self) -> Result<Option<Vec<Dataset>>> {
        let Some(region) = self.catalog_region() else {
            return Ok(None);
        };
        if self.live_overlap(region).is_some() {
            return Ok(None);
        }
        let arr = Array::<u8>::new(
            self,
            CATALOG_BYTES,
            Placement::At(region.0),
            Layout::Replicate,
            Access::ReadOnly,
        )?;
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
        let (at, _) = self.catalog_region_or_err()?;
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
        Ok(match (self.read_catalog()?, self.catalog_region()) {
            (Some(sets), Some(region)) => taken(&sets, region),
            _ => Vec::new(),
        })
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
        let region = self.catalog_region_or_err()?;
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
        if let Some((s, e)) = self.live_overlap(region) {
            return Err(invalid(format!(
                "an array of this cache holds LBAs {s}..{}, where the dataset catalog goes \
                 (the last {} KiB of each SSD)",
                s + e,
                RESERVED_BYTES >> 10
            )));
        }
        let arr = Array::<T>::new(
            self,
            n,
            Placement::FirstFree(taken(&sets, region)),
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
