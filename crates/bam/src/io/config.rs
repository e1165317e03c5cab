//! The shape of the GPU I/O layer, whatever the backend: queue pairs per controller,
//! their depth, the I/O buffer's slots and the bound of every GPU-side wait. Backends,
//! the cache and the scans all say what they need in this one struct.

use crate::error::{Error, Result};
use std::time::Duration;

/// Geometry of the GPU I/O layer over a set of controllers.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IoConfig {
    /// I/O queue pairs per controller.
    pub queues: u32,
    /// Entries per queue (a power of two, at most what every controller allows).
    pub depth: u32,
    /// Bytes per I/O buffer slot (a power of two, 512 B to 2 MiB).
    pub slot_bytes: u64,
    /// I/O buffer slots.
    pub nslots: u32,
    /// Bound of every GPU-side wait.
    pub timeout: Duration,
    /// Bytes of extra GPU memory per queue pair for the backend (the simulated
    /// controller keeps its pending list and CID bitmap there); 0 for real controllers.
    pub queue_scratch_bytes: usize,
}

impl IoConfig {
    /// One queue of 1024 entries per controller, 1024 slots of 4 KiB, 2 s timeout.
    pub fn new() -> Self {
        IoConfig {
            queues: 1,
            depth: 1024,
            slot_bytes: 4096,
            nslots: 1024,
            timeout: Duration::from_secs(2),
            queue_scratch_bytes: 0,
        }
    }

    /// The buffer slot size that holds a line (or chunk) of `line_bytes`: the next power
    /// of two, at least 512 B. The cache and every backend size slots by this one rule.
    ///
    /// ```
    /// use bam::io::IoConfig;
    /// assert_eq!(IoConfig::slot_for_line(4096), 4096);
    /// assert_eq!(IoConfig::slot_for_line(3000), 4096);
    /// assert_eq!(IoConfig::slot_for_line(64), 512);
    /// ```
    pub fn slot_for_line(line_bytes: u64) -> u64 {
        line_bytes.next_power_of_two().max(512)
    }

    /// Checks the numbers that do not depend on the controllers.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        if self.queues == 0 || self.queues > u16::MAX as u32 {
            return bad(format!("{} queue pairs per controller", self.queues));
        }
        if !self.depth.is_power_of_two() || !(2..=32768).contains(&self.depth) {
            return bad(format!(
                "queue depth {} must be a power of two in 2..=32768",
                self.depth
            ));
        }
        if !self.slot_bytes.is_power_of_two() || !(512..=2 << 20).contains(&self.slot_bytes) {
            return bad("buffer slots must be a power of two from 512 B to 2 MiB".into());
        }
        if self.nslots == 0 {
            return bad("the I/O buffer needs at least one slot".into());
        }
        check_timeout("the I/O timeout", self.timeout)
    }
}

/// The longest bound of a GPU-side wait: longer ones are refused rather than truncated
/// to nanoseconds in 64 bits (a wrap made a huge timeout a tiny one).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Refuses a wait bound of zero or above [`MAX_TIMEOUT`]; `what` names it in the error.
pub fn check_timeout(what: &str, t: Duration) -> Result<()> {
    if t.is_zero() || t > MAX_TIMEOUT {
        return Err(Error::InvalidArgument(format!(
            "{what} of {t:?} must be above 0 and at most {MAX_TIMEOUT:?}"
        )));
    }
    Ok(())
}

/// A checked wait bound in nanoseconds, for the device views.
pub(crate) fn timeout_ns(t: Duration) -> u64 {
    u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)
}

impl Default for IoConfig {
    fn default() -> Self {
        Self::new()
    }
}
