//! Physical Region Page (PRP) entries and lists (NVMe Base Specification §4.1.1).
//!
//! A transfer is described by PRP1, pointing at the first byte (with an offset inside its
//! page), and PRP2, which is either unused, the second page, or a pointer to a PRP list.
//! A PRP list page holds `page_size / 8` entries; when more are needed, the last entry of
//! a list page points to the next list page.
//!
//! [`build`] is what a driver runs; [`walk`] is what a controller runs. They are tested
//! against each other.

use crate::spec::status::GenericStatus;

/// Where PRP2 points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prp2 {
    /// The transfer fits in the page of PRP1.
    Unused,
    /// The transfer covers exactly two pages: PRP2 is the second one.
    Page(u64),
    /// The transfer covers more pages: these are the page addresses from the second page
    /// on, to be written into list pages with [`write_list`].
    List(Vec<u64>),
}

/// The PRPs of one transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prps {
    /// PRP entry 1.
    pub prp1: u64,
    /// PRP entry 2 or the list to point it at.
    pub prp2: Prp2,
}

/// Number of pages a transfer of `len` bytes starting `offset` bytes into its first page
/// touches.
pub fn pages_spanned(offset: usize, len: usize, page_size: usize) -> usize {
    if len == 0 {
        return 0;
    }
    (offset % page_size + len).div_ceil(page_size)
}

/// Number of list pages needed to hold `entries` PRP entries (each list page but the
/// last gives its final slot to the chain pointer).
pub fn list_pages_needed(entries: usize, page_size: usize) -> usize {
    let per = page_size / 8;
    if entries <= per {
        return usize::from(entries > 0);
    }
    // Each chained page holds per-1 entries plus the pointer; the last holds up to per.
    1 + (entries - per).div_ceil(per - 1)
}

/// Builds the PRPs of a transfer.
///
/// `page_addr(i)` returns the bus address of the i-th page of the buffer (page-aligned);
/// `offset` is the transfer's start within page 0 (must be a multiple of 4);
/// `len` is its length in bytes (> 0).
///
/// ```
/// use bam_nvme::prp::{build, Prp2};
/// let p = build(|i| 0x10_0000 + i as u64 * 4096, 0, 8192, 4096);
/// assert_eq!(p.prp1, 0x10_0000);
/// assert_eq!(p.prp2, Prp2::Page(0x10_1000));
/// ```
pub fn build(
    page_addr: impl Fn(usize) -> u64,
    offset: usize,
    len: usize,
    page_size: usize,
) -> Prps {
    assert!(len > 0, "PRPs of an empty transfer");
    assert!(offset < page_size && offset.is_multiple_of(4));
    let pages = pages_spanned(offset, len, page_size);
    let prp1 = page_addr(0) + offset as u64;
    let prp2 = match pages {
        1 => Prp2::Unused,
        2 => Prp2::Page(page_addr(1)),
        n => Prp2::List((1..n).map(page_addr).collect()),
    };
    Prps { prp1, prp2 }
}

/// Lays out list entries over list pages, chaining them.
///
/// `list_pages` are the bus addresses of the list pages (at least
/// [`list_pages_needed`]); `write(page_index, slot, value)` stores one 8-byte entry.
/// Returns the value for PRP2 (the first list page's address).
pub fn write_list(
    entries: &[u64],
    list_pages: &[u64],
    page_size: usize,
    mut write: impl FnMut(usize, usize, u64),
) -> u64 {
    let per = page_size / 8;
    let needed = list_pages_needed(entries.len(), page_size);
    assert!(list_pages.len() >= needed, "not enough PRP list pages");
    let mut rest = entries;
    for (p, _) in list_pages.iter().enumerate().take(needed) {
        let last = p + 1 == needed;
        let take = if last { rest.len() } else { per - 1 };
        for (slot, &e) in rest[..take].iter().enumerate() {
            write(p, slot, e);
        }
        rest = &rest[take..];
        if !last {
            write(p, per - 1, list_pages[p + 1]);
        }
    }
    list_pages[0]
}

/// Walks the PRPs of a command as a controller does, strictly.
///
/// Calls `segment(bus_addr, len)` for each contiguous piece of the transfer in order;
/// `read_list(bus_addr, entries)` fetches `entries.len()` PRP list entries starting at
/// `bus_addr` (and returns `false` if that memory cannot be read). Fails with the status
/// a controller reports: PRP Offset Invalid for a misaligned entry, Data Transfer Error
/// for a list that cannot be read.
pub fn walk(
    prp1: u64,
    prp2: u64,
    len: usize,
    page_size: usize,
    mut read_list: impl FnMut(u64, &mut [u64]) -> bool,
    mut segment: impl FnMut(u64, usize) -> Result<(), GenericStatus>,
) -> Result<(), GenericStatus> {
    let ps = page_size as u64;
    if !prp1.is_multiple_of(4) {
        return Err(GenericStatus::PrpOffsetInvalid);
    }
    let first = ((ps - prp1 % ps) as usize).min(len);
    segment(prp1, first)?;
    let mut remaining = len - first;
    if remaining == 0 {
        return Ok(());
    }
    if remaining <= page_size {
        if !prp2.is_multiple_of(ps) {
            return Err(GenericStatus::PrpOffsetInvalid);
        }
        return segment(prp2, remaining);
    }
    // PRP2 is a list pointer; it may have an offset (dword aligned) into its page.
    if !prp2.is_multiple_of(8) {
        return Err(GenericStatus::PrpOffsetInvalid);
    }
    let mut list = prp2;
    let per = page_size / 8;
    let mut buf = vec![0u64; per];
    while remaining > 0 {
        let slots = per - (list % ps) as usize / 8;
        let pages_left = remaining.div_ceil(page_size);
        let chained = pages_left > slots;
        let n = if chained { slots } else { pages_left };
        if !read_list(list, &mut buf[..n]) {
            return Err(GenericStatus::DataTransferError);
        }
        let data = if chained { n - 1 } else { n };
        for &e in &buf[..data] {
            if e % ps != 0 {
                return Err(GenericStatus::PrpOffsetInvalid);
            }
            let l = remaining.min(page_size);
            segment(e, l)?;
            remaining -= l;
        }
        if chained {
            list = buf[n - 1];
            if !list.is_multiple_of(ps) {
                return Err(GenericStatus::PrpOffsetInvalid);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    const PS: usize = 4096;

    /// Builds PRPs for a buffer whose pages are scattered, writes the list into a fake
    /// memory, walks it back and checks that the walk covers exactly the buffer's bytes.
    fn round_trip(offset: usize, len: usize, scatter: u64) {
        let page = |i: usize| {
            0x1000_0000 + (i as u64 * scatter % 4099) * PS as u64 + i as u64 * 0x100_0000
        };
        let prps = build(page, offset, len, PS);
        let mut mem: HashMap<u64, u64> = HashMap::new();
        let prp2 = match &prps.prp2 {
            Prp2::Unused => 0,
            Prp2::Page(p) => *p,
            Prp2::List(entries) => {
                let n = list_pages_needed(entries.len(), PS);
                let lists: Vec<u64> = (0..n).map(|i| 0x9_0000_0000 + i as u64 * 0x3000).collect();
                write_list(entries, &lists, PS, |p, slot, v| {
                    mem.insert(lists[p] + slot as u64 * 8, v);
                })
            }
        };
        let mut got = Vec::new();
        walk(
            prps.prp1,
            prp2,
            len,
            PS,
            |addr, out| {
                for (i, o) in out.iter_mut().enumerate() {
                    match mem.get(&(addr + i as u64 * 8)) {
                        Some(v) => *o = *v,
                        None => return false,
                    }
                }
                true
            },
            |a, l| {
                got.push((a, l));
                Ok(())
            },
        )
        .unwrap();
        // Expected segments: the first from offset to page end, then whole pages.
        let mut expect = Vec::new();
        let mut rem = len;
        let mut i = 0;
        let mut off = offset;
        while rem > 0 {
            let l = (PS - off).min(rem);
            expect.push((page(i) + off as u64, l));
            rem -= l;
            off = 0;
            i += 1;
        }
        assert_eq!(got, expect);
    }

    #[test]
    fn shapes() {
        round_trip(0, 512, 1);
        round_trip(0, 4096, 1);
        round_trip(512, 4096, 1); // two pages through PRP2 directly
        round_trip(0, 8192, 7);
        round_trip(0, 3 * 4096, 7); // a list
        round_trip(0, 512 * 4096, 3); // fills one list page exactly (511 entries)
        round_trip(0, 513 * 4096, 3); // 512 entries: still one page
        round_trip(0, 514 * 4096, 3); // 513 entries: chains
        round_trip(4092, 2 << 20, 5);
    }

    #[test]
    fn list_page_counts() {
        assert_eq!(list_pages_needed(0, PS), 0);
        assert_eq!(list_pages_needed(1, PS), 1);
        assert_eq!(list_pages_needed(512, PS), 1);
        assert_eq!(list_pages_needed(513, PS), 2);
        assert_eq!(list_pages_needed(511 + 512, PS), 2);
        assert_eq!(list_pages_needed(511 + 512 + 1, PS), 3);
    }

    #[test]
    fn strict_walk_rejects_bad_prps() {
        let ok = |_: u64, _: usize| Ok(());
        assert_eq!(
            walk(2, 0, 512, PS, |_, _| true, ok),
            Err(GenericStatus::PrpOffsetInvalid)
        );
        // Two-page transfer with a misaligned PRP2.
        assert_eq!(
            walk(0x1000, 0x2010, 8192, PS, |_, _| true, ok),
            Err(GenericStatus::PrpOffsetInvalid)
        );
        // List that cannot be read.
        assert_eq!(
            walk(0x1000, 0x8000, 3 * PS, PS, |_, _| false, ok),
            Err(GenericStatus::DataTransferError)
        );
        // List entry not page aligned.
        assert_eq!(
            walk(
                0x1000,
                0x8000,
                3 * PS,
                PS,
                |_, out| {
                    out.fill(0x5008);
                    true
                },
                ok
            ),
            Err(GenericStatus::PrpOffsetInvalid)
        );
    }

    proptest! {
        // 256: proptest's own default; scaled by BAM_FUZZ_SCALE / PROPTEST_CASES.
        #![proptest_config(ProptestConfig::with_cases(crate::test_cases::cases(256)))]

        #[test]
        fn build_and_walk_agree(offset_dw in 0usize..1024, len in 1usize..(4 << 20), scatter in 1u64..4000) {
            round_trip(offset_dw * 4, len, scatter);
        }

        #[test]
        fn page_count_matches_walk(offset_dw in 0usize..1024, len in 1usize..(1 << 20)) {
            let offset = offset_dw * 4;
            let n = pages_spanned(offset, len, PS);
            prop_assert!(n * PS >= offset + len);
            prop_assert!((n - 1) * PS < offset + len);
        }
    }
}
