//! Controllers shared by several GPUs, and the rule that keeps their caches honest.
//!
//! **Queues.** A controller is brought up once ([`SharedControllers::bring_up`]: admin
//! queue, identify, the number of I/O queues for every GPU). Each GPU then attaches its
//! own I/O queue pairs in its own memory ([`IoArray::on_shared`]): queue ids are handed
//! out by the controller, command ids belong to a queue and doorbells to a queue id, so
//! no word of the I/O path is shared between GPUs and no GPU waits for another.
//!
//! **Caches.** Each GPU has its own cache; caches are not coherent with each other. The
//! rule, enforced here for every `Array<T>` made over a shared I/O layer:
//!
//! - An array that may write ([`Access::ReadWrite`], `Cache::array`) claims its LBA
//!   range on its SSDs exclusively: no other GPU may hold an array over any of those
//!   LBAs at the same time, read-only or not.
//! - Read-only arrays ([`Access::ReadOnly`], `Cache::array_read_only`) of several GPUs
//!   may overlap freely (read-only sharing costs nothing), but not a writable one; the
//!   cache refuses to write back lines of a read-only array (the kernel's write is
//!   reported as an error at flush or close, never written and never silently lost).
//! - Handing a range over is explicit: the writer closes its array (its dirty lines are
//!   written back and its lines dropped), then the reader makes its array, which starts
//!   with no line cached, so it reads what the writer wrote.
//!
//! Raw I/O (the benchmark, scans) bypasses caches and is not covered: like `O_DIRECT`
//! on a shared disk, ordering such writes is the caller's business.
//!
//! ```
//! use bam::io::{Access, WriteClaims};
//! let claims = WriteClaims::new();
//! let a = claims.claim(1, 0..2, 0..1000, Access::ReadWrite).unwrap();
//! // Another GPU cannot read (or write) these LBAs while GPU 1 may write them...
//! assert!(claims.claim(2, 0..1, 500..600, Access::ReadOnly).is_err());
//! drop(a); // ...until GPU 1 closes its array.
//! let r1 = claims.claim(2, 0..1, 500..600, Access::ReadOnly).unwrap();
//! let r2 = claims.claim(1, 0..1, 0..1000, Access::ReadOnly).unwrap(); // readers share
//! # drop((r1, r2));
//! ```

use super::attach::{bring_up, ControllerLink, DoorbellWindow};
use super::IoArray;
use super::IoConfig;
use crate::cuda::Gpu;
use crate::error::{Error, Result};
use bam_nvme::{Controller, Transport};
use serde::Serialize;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// What an array over a shared I/O layer may do with its LBAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Access {
    /// Reads only: overlaps other GPUs' read-only arrays; write-backs are refused.
    ReadOnly,
    /// Reads and writes: the LBA range is this GPU's alone while the array lives.
    ReadWrite,
}

/// Controllers brought up once, for I/O queue pairs of several GPUs.
///
/// ```no_run
/// # fn main() -> bam::Result<()> {
/// // What backends do for `--gpus 0,1` (here with the controller model's transport).
/// use bam::io::{IoArray, IoConfig, SharedControllers};
/// # let transports: Vec<std::sync::Arc<dyn bam_nvme::Transport>> = vec![];
/// # let windows_of = |_g: usize| -> Vec<bam::io::DoorbellWindow> { vec![] };
/// let cfg = IoConfig::new();
/// let shared = SharedControllers::bring_up(&transports, 2, &cfg)?;
/// let gpus = [bam::Gpu::new(0)?, bam::Gpu::new(1)?];
/// let ios: Vec<IoArray> = gpus
///     .iter()
///     .enumerate()
///     .map(|(g, gpu)| IoArray::on_shared(gpu, &shared, &windows_of(g), &cfg))
///     .collect::<bam::Result<_>>()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SharedControllers {
    controllers: Vec<Controller>,
    gpus: u32,
    claims: Arc<WriteClaims>,
}

impl SharedControllers {
    /// Brings every controller up once with `cfg.queues` I/O queue pairs for each of
    /// `gpus` GPUs.
    pub fn bring_up(transports: &[Arc<dyn Transport>], gpus: u32, cfg: &IoConfig) -> Result<Self> {
        cfg.validate()?;
        if transports.is_empty() || gpus == 0 {
            return Err(Error::InvalidArgument(
                "sharing needs at least one controller and one GPU".into(),
            ));
        }
        let total = cfg.queues.saturating_mul(gpus);
        Ok(SharedControllers {
            controllers: bring_up(transports, total)?,
            gpus,
            claims: WriteClaims::new(),
        })
    }

    /// The controllers (host side: admin commands, identify data).
    pub fn controllers(&self) -> &[Controller] {
        &self.controllers
    }

    /// GPUs the controllers were brought up for.
    pub fn gpus(&self) -> u32 {
        self.gpus
    }

    /// The LBA claims of the caches of every GPU on these controllers.
    pub fn claims(&self) -> Arc<WriteClaims> {
        self.claims.clone()
    }
}

/// The I/O layers of `gpus` over the controllers behind `transports`, in the order of
/// `gpus`: for one GPU, [`IoArray::new`] (the controllers are its own and shut down with
/// it); for several, [`SharedControllers::bring_up`] once, then [`IoArray::on_shared`]
/// for each GPU. `window(g, c)`: where GPU `g`'s threads see controller `c`'s doorbells;
/// `cfg(g)`: GPU `g`'s I/O layer (the first one's queue count is every GPU's).
pub fn attach_gpus<'a>(
    gpus: &[Arc<Gpu>],
    transports: &[Arc<dyn Transport>],
    window: impl Fn(usize, usize) -> DoorbellWindow,
    cfg: impl Fn(usize) -> &'a IoConfig,
) -> Result<Vec<IoArray>> {
    let windows =
        |g: usize| -> Vec<DoorbellWindow> { (0..transports.len()).map(|c| window(g, c)).collect() };
    match gpus {
        [] => Err(Error::InvalidArgument(
            "no GPU to attach the controllers to".into(),
        )),
        [gpu] => {
            let links = transports
                .iter()
                .zip(windows(0))
                .map(|(t, w)| ControllerLink {
                    transport: t.clone(),
                    doorbells: w.addr,
                    doorbells_len: w.len,
                    mmio: w.mmio,
                })
                .collect();
            Ok(vec![IoArray::new(gpu, links, cfg(0))?])
        }
        _ => {
            let shared = SharedControllers::bring_up(transports, gpus.len() as u32, cfg(0))?;
            gpus.iter()
                .enumerate()
                .map(|(g, gpu)| IoArray::on_shared(gpu, &shared, &windows(g), cfg(g)))
                .collect()
        }
    }
}

#[derive(Clone, Debug)]
struct Held {
    id: u64,
    owner: u64,
    ssds: Range<u32>,
    lbas: Range<u64>,
    access: Access,
}

/// The LBA ranges that arrays of the GPUs sharing some controllers hold (see the module
/// docs for the rule).
#[derive(Debug, Default)]
pub struct WriteClaims {
    held: Mutex<(u64, Vec<Held>)>,
}

/// One array's claim on LBAs of shared controllers; released on drop.
#[derive(Debug)]
pub struct LbaClaim {
    claims: Arc<WriteClaims>,
    id: u64,
}

impl Drop for LbaClaim {
    fn drop(&mut self) {
        let mut h = self.claims.held.lock().unwrap_or_else(|e| e.into_inner());
        h.1.retain(|c| c.id != self.id);
    }
}

fn overlaps<T: PartialOrd>(a: &Range<T>, b: &Range<T>) -> bool {
    a.start < b.end && b.start < a.end
}

impl WriteClaims {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(WriteClaims::default())
    }

    /// Claims LBAs `lbas` on SSDs `ssds` for `owner` (one id per GPU's I/O layer). Fails,
    /// naming the holder, when another owner holds an overlapping range and either side
    /// may write.
    pub fn claim(
        self: &Arc<Self>,
        owner: u64,
        ssds: Range<u32>,
        lbas: Range<u64>,
        access: Access,
    ) -> Result<LbaClaim> {
        let mut h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let conflict = h.1.iter().find(|c| {
            c.owner != owner
                && (c.access == Access::ReadWrite || access == Access::ReadWrite)
                && overlaps(&c.ssds, &ssds)
                && overlaps(&c.lbas, &lbas)
        });
        if let Some(c) = conflict {
            return Err(Error::InvalidArgument(format!(
                "LBAs {}..{} of SSDs {}..{} ({access:?}) overlap an array of another GPU \
                 (LBAs {}..{}, {:?}): GPUs sharing SSDs may only share read-only ranges; \
                 close the other GPU's array first (its dirty lines are written back), or \
                 make both read-only (docs/multi-gpu.md)",
                lbas.start, lbas.end, ssds.start, ssds.end, c.lbas.start, c.lbas.end, c.access
            )));
        }
        h.0 += 1;
        let id = h.0;
        h.1.push(Held {
            id,
            owner,
            ssds,
            lbas,
            access,
        });
        Ok(LbaClaim {
            claims: self.clone(),
            id,
        })
    }

    /// Claims held now.
    pub fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).1.len()
    }

    /// No claim is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bam_nvme::model::{ModelConfig, ModelTransport};

    #[test]
    fn writers_exclude_everyone_readers_share() {
        let c = WriteClaims::new();
        let w = c.claim(1, 0..4, 100..200, Access::ReadWrite).unwrap();
        // The same GPU may hold more arrays there (its own cache keeps them coherent).
        let same = c.claim(1, 0..4, 150..160, Access::ReadOnly).unwrap();
        let e = c.claim(2, 3..4, 199..300, Access::ReadOnly).unwrap_err();
        assert!(e.to_string().contains("another GPU"), "{e}");
        assert!(c.claim(2, 0..4, 199..300, Access::ReadWrite).is_err());
        // Disjoint LBAs, or other SSDs: fine.
        let d1 = c.claim(2, 0..4, 200..300, Access::ReadWrite).unwrap();
        let d2 = c.claim(2, 4..8, 100..200, Access::ReadWrite).unwrap();
        assert_eq!(c.len(), 4);
        drop((w, same));
        let r1 = c.claim(2, 0..4, 0..200, Access::ReadOnly).unwrap();
        let r2 = c.claim(3, 0..4, 0..200, Access::ReadOnly).unwrap();
        assert!(c.claim(1, 0..1, 0..1, Access::ReadWrite).is_err());
        drop((d1, d2, r1, r2));
        assert!(c.is_empty());
    }

    #[test]
    fn bring_up_grants_queues_for_every_gpu() {
        let mut mc = ModelConfig::ram(1 << 20);
        mc.external_io_queues = true;
        mc.max_io_queues = 8;
        let t: Arc<dyn Transport> = Arc::new(ModelTransport::new(mc.build().unwrap()));
        let cfg = IoConfig {
            queues: 3,
            depth: 64,
            ..IoConfig::new()
        };
        let s = SharedControllers::bring_up(std::slice::from_ref(&t), 2, &cfg).unwrap();
        assert_eq!(s.controllers()[0].io_queue_pairs(), 6);
        assert_eq!(s.gpus(), 2);
        assert!(SharedControllers::bring_up(&[], 2, &cfg).is_err());
        assert!(SharedControllers::bring_up(&[t], 0, &cfg).is_err());
    }
}
