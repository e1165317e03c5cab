//! A namespace as the driver sees it: its id, size and block size, checked from its
//! Identify Namespace data.

use crate::spec::identify::IdentifyNamespace;
use crate::{Error, Result};

/// A namespace: its id, size and block size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    /// Namespace id.
    pub nsid: u32,
    /// Size in logical blocks.
    pub blocks: u64,
    /// Logical block size in bytes.
    pub block_size: u32,
    /// The full Identify Namespace data.
    pub identify: IdentifyNamespace,
}

impl Namespace {
    /// Capacity in bytes.
    pub fn bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.block_size as u64)
    }
    /// Checks that `blocks` blocks at `lba` lie inside the namespace.
    pub fn check_range(&self, lba: u64, blocks: u64) -> Result<()> {
        if blocks == 0 {
            return Err(Error::ZeroLength {
                what: format!("transfer at LBA {lba}"),
            });
        }
        match lba.checked_add(blocks) {
            Some(end) if end <= self.blocks => Ok(()),
            _ => Err(Error::LbaOutOfRange {
                nsid: self.nsid,
                lba,
                blocks,
                capacity: self.blocks,
            }),
        }
    }

    /// Namespace `nsid` as its Identify Namespace data `id` describes it, its geometry
    /// checked. `None` if it is inactive.
    pub(super) fn from_identify(nsid: u32, id: IdentifyNamespace) -> Result<Option<Self>> {
        let Some(fmt) = id.current_format() else {
            return Err(Error::Protocol(format!(
                "namespace {nsid} reports LBA format {} of {}",
                id.format_index(),
                id.lba_formats.len()
            )));
        };
        if id.nsze == 0 {
            return Ok(None); // inactive
        }
        // LBADS below 9 (512 bytes) is invalid per the specification; above 16 this
        // driver (and every real device) has no use for it. Checked before any shift.
        if !(9..=16).contains(&fmt.lba_data_size_log2) {
            return Err(Error::Protocol(format!(
                "namespace {nsid} reports LBA data size 2^{} bytes (LBADS must be 9..=16)",
                fmt.lba_data_size_log2
            )));
        }
        let block_size = 1u32 << fmt.lba_data_size_log2;
        if id.nsze.checked_mul(block_size as u64).is_none() {
            return Err(Error::Protocol(format!(
                "namespace {nsid} reports {} blocks of {block_size} bytes, more bytes \
                 than 64 bits hold",
                id.nsze
            )));
        }
        Ok(Some(Namespace {
            nsid,
            blocks: id.nsze,
            block_size,
            identify: id,
        }))
    }
}
