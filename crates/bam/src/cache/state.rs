//! A snapshot of the cache's slots and line words, read from the host (also while a
//! kernel runs): what holds the slots when kernels stall on cache waits.

use super::abi::*;
use super::Cache;
use crate::error::Result;
use serde::Serialize;

/// Counts over all slots and over the line words of all live arrays.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheState {
    /// Slots in the cache: its lines' and the fill service's spares.
    pub slots: u64,
    /// Slots with no line.
    pub empty: u64,
    /// Empty slots the fill service's warps hold ready for their next fills (one a warp,
    /// `BAM_TAG_RESERVED`; [`CacheConfig::spare_slots`](super::CacheConfig::spare_slots)).
    pub reserved: u64,
    /// Slots whose tag is locked (a fill, an eviction or a flush works on them).
    pub locked: u64,
    /// Slots taken out of the cache for good because an I/O on them timed out or its
    /// queue broke (the device may still use them; `BAM_TAG_QUARANTINE`).
    pub quarantined: u64,
    /// Of those, slots still holding a dirty line whose write-back did not settle: the
    /// line can no longer be read or written, and every flush reports it as failed.
    pub quarantined_lines: u64,
    /// Slots holding a valid, unpinned, idle line: evictable now.
    pub evictable: u64,
    /// Slots whose line is pinned (reference count above zero), not counting the
    /// references of resident views.
    pub pinned: u64,
    /// Slots whose line only resident views hold (`Array::make_resident`): kept in the
    /// cache on purpose, not held by a kernel.
    pub resident: u64,
    /// Slots whose line is busy (being evicted or written back).
    pub busy: u64,
    /// Unlocked slots whose tag names a line whose word does not point back at the slot.
    pub stale: u64,
    /// Sum of the reference counts of the lines in slots, less the resident views' ones.
    pub refs_in_slots: u64,
    /// Lines (all arrays) with the BUSY bit.
    pub lines_busy: u64,
    /// Lines that are not valid but have references (waiters, or a fill in progress).
    pub lines_pinned_invalid: u64,
    /// Up to 16 busy lines: (array id, line, word).
    pub busy_examples: Vec<(u32, u64, u64)>,
}

impl CacheState {
    /// Nothing held: no references, no busy line, no locked slot and no slot whose tag
    /// and line word disagree. Every kernel must leave the cache like this. (Quarantined
    /// slots are out of the cache, not held.)
    pub fn is_idle(&self) -> bool {
        self.locked == 0
            && self.pinned == 0
            && self.busy == 0
            && self.stale == 0
            && self.refs_in_slots == 0
            && self.lines_busy == 0
            && self.lines_pinned_invalid == 0
    }
}

impl std::fmt::Display for CacheState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} slots: {} empty, {} spare, {} locked, {} quarantined ({} with a line), {} evictable, {} pinned ({} refs), {} resident, {} busy, {} stale; lines: {} busy, {} invalid with refs; busy examples (id, line, word): {:x?}",
            self.slots,
            self.empty,
            self.reserved,
            self.locked,
            self.quarantined,
            self.quarantined_lines,
            self.evictable,
            self.pinned,
            self.refs_in_slots,
            self.resident,
            self.busy,
            self.stale,
            self.lines_busy,
            self.lines_pinned_invalid,
            self.busy_examples
        )
    }
}

impl Cache<'_> {
    /// Reads the slot tags and the line words of every live array and counts what holds
    /// the slots. The words change while kernels run, so the counts are a blur, not an
    /// atomic snapshot; a stalled cache holds still.
    pub fn state(&self) -> Result<CacheState> {
        let nslots = self.inner.nslots as usize;
        let tags = self.read_tags()?;
        let arrs = self.read_arrs()?;
        let mut words: Vec<Vec<u64>> = Vec::with_capacity(arrs.len());
        for a in &arrs {
            let mut w = vec![0u64; if a.live != 0 { a.nlines as usize } else { 0 }];
            if !w.is_empty() {
                crate::cuda::read_device(self.gpu(), a.words, bytemuck::cast_slice_mut(&mut w))?;
            }
            words.push(w);
        }
        let mut st = CacheState {
            slots: nslots as u64,
            ..Default::default()
        };
        let mut quarantined = std::collections::HashSet::new();
        for (s, &t) in tags.iter().enumerate() {
            if t & BAM_TAG_QUARANTINE != 0 {
                st.quarantined += 1;
                if t & BAM_TAG_USED != 0 {
                    // A line kept busy for good with its slot (quarantine_writeback):
                    // out of the cache, not held by anyone.
                    st.quarantined_lines += 1;
                    let id = tag_id(t);
                    quarantined.insert((id, (t & BAM_TAG_LINE_MASK) as usize));
                }
                continue;
            }
            if t & BAM_TAG_RESERVED != 0 {
                st.reserved += 1;
                continue;
            }
            if t & BAM_TAG_LOCK != 0 {
                st.locked += 1;
                continue;
            }
            if t == 0 {
                st.empty += 1;
                continue;
            }
            let id = tag_id(t);
            let line = (t & BAM_TAG_LINE_MASK) as usize;
            let Some(&w) = words.get(id).and_then(|v| v.get(line)) else {
                st.stale += 1;
                continue;
            };
            if w & BAM_LINE_VALID == 0 || (w >> 32) as usize != s {
                st.stale += 1;
                continue;
            }
            // The references resident views hold on every line of their array.
            let base = arrs.get(id).map_or(0, |a| a.resident as u64);
            let refs = (w & BAM_LINE_REFS).saturating_sub(base);
            st.refs_in_slots += refs;
            if w & BAM_LINE_BUSY != 0 {
                st.busy += 1;
            } else if refs > 0 {
                st.pinned += 1;
            } else if base > 0 {
                st.resident += 1;
            } else {
                st.evictable += 1;
            }
        }
        for (id, ws) in words.iter().enumerate() {
            for (line, &w) in ws.iter().enumerate() {
                if w & BAM_LINE_BUSY != 0 && !quarantined.contains(&(id, line)) {
                    st.lines_busy += 1;
                    if st.busy_examples.len() < 16 {
                        st.busy_examples.push((id as u32, line as u64, w));
                    }
                }
                if w & BAM_LINE_VALID == 0 && w & BAM_LINE_REFS != 0 {
                    st.lines_pinned_invalid += 1;
                }
            }
        }
        Ok(st)
    }
}

/// The array id a slot tag names (its flag bits masked out), as `tag_id` in
/// cache_service.cuh.
pub(super) fn tag_id(t: u64) -> usize {
    ((t & !(BAM_TAG_LOCK | BAM_TAG_USED | BAM_TAG_QUARANTINE)) >> 40) as usize
}
