//! The layout of a device table: several arrays of `#[repr(C)]` entries in one GPU
//! allocation, each at an aligned offset. Every table the runtime hands to a kernel (the
//! I/O layer's, the cache's, the simulator's) is laid out by this one builder.
//!
//! ```
//! use bam::cuda::TableLayout;
//! let mut t = TableLayout::new();
//! let queues = t.array(64, 3, 256); // 3 entries of 64 B
//! let ssds = t.array(32, 2, 256);
//! let flag = t.array(4, 1, 4);
//! assert_eq!((queues, ssds, flag, t.bytes()), (0, 256, 320, 324));
//! ```

/// Offsets of consecutive arrays in one allocation.
#[derive(Clone, Copy, Debug, Default)]
pub struct TableLayout {
    end: usize,
}

impl TableLayout {
    /// An empty table.
    pub fn new() -> Self {
        TableLayout { end: 0 }
    }

    /// Places `count` entries of `entry_bytes` at the next multiple of `align` (a power
    /// of two) and returns their offset.
    pub fn array(&mut self, entry_bytes: usize, count: usize, align: usize) -> usize {
        let off = round_up(self.end, align);
        self.end = off + entry_bytes * count;
        off
    }

    /// Places `count` values of `T` (its own size) at the next multiple of `align`.
    pub fn of<T>(&mut self, count: usize, align: usize) -> usize {
        self.array(std::mem::size_of::<T>(), count, align)
    }

    /// Bytes the table needs so far.
    pub fn bytes(&self) -> usize {
        self.end
    }
}

/// `x` rounded up to a multiple of `align` (a power of two, or any non-zero value).
pub fn round_up(x: usize, align: usize) -> usize {
    x.div_ceil(align.max(1)) * align.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_follow_each_other_aligned() {
        let mut t = TableLayout::new();
        assert_eq!(t.array(16, 0, 256), 0);
        assert_eq!(t.array(1, 1, 128), 0);
        assert_eq!(t.array(8, 2, 128), 128);
        assert_eq!(t.of::<u64>(3, 256), 256);
        assert_eq!(t.bytes(), 280);
        assert_eq!(round_up(4097, 4096), 8192);
        assert_eq!(round_up(0, 64), 0);
    }
}
