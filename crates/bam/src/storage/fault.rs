//! Fault injection of the simulated and modelled backends: commands on a range of LBAs
//! fail with an NVMe status, and (simulated controllers only) their completions lie.

use serde::Serialize;
use std::time::Duration;

/// Commands touching `[lba, lba + nlb)` complete with `status` (an NVMe status field),
/// and their completions lie as `lie` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// First LBA.
    pub lba: u64,
    /// LBAs.
    pub nlb: u64,
    /// Status field ((SCT << 8) | SC); 0 (success) only with a `lie`.
    pub status: u16,
    /// What the completions of those commands do wrong (a lying controller).
    pub lie: Option<Lie>,
}

/// How a lying simulated controller breaks the completion protocol for the commands of
/// a [`Fault`] range (`crates/bam/cuda/src/sim_abi.h`, `BAM_SIM_LIE_*`). The GPU's queues
/// must end each in a typed error (protocol violation, timeout, or the queue failed)
/// and never take a wrong value as success.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Lie {
    /// The completion is posted twice.
    Duplicate,
    /// The completion names another command completed with it.
    OtherCid,
    /// An extra completion names the slot's next command, not yet submitted.
    Unsubmitted,
    /// With the completion, the previous lying command's completion again (a stale CID:
    /// its slot reused or released by then).
    Stale,
    /// The completion is posted with the wrong phase: the host never sees it.
    PhaseGlitch,
    /// The completion's SQ head lies outside the queue.
    SqHeadOutOfRange,
    /// The completion comes this much later than due (past the host's timeout).
    Withhold(Duration),
    /// After the completion, a queue depth of copies of it, whether the CQ has room or not
    /// (a controller that keeps posting).
    Flood,
}

impl Lie {
    /// Every lie, with `withhold` for [`Lie::Withhold`].
    pub fn all(withhold: Duration) -> [Lie; 8] {
        [
            Lie::Duplicate,
            Lie::OtherCid,
            Lie::Unsubmitted,
            Lie::Stale,
            Lie::PhaseGlitch,
            Lie::SqHeadOutOfRange,
            Lie::Withhold(withhold),
            Lie::Flood,
        ]
    }
}
