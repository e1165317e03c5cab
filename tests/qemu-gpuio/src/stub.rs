//! "GPU memory": the `bam_p2p_stub` stand-in's mmap and its counters.

use anyhow::{bail, ensure, Context, Result};
use bam::io::attach::GPU_PAGE;
use std::os::fd::AsRawFd;

const STUB: &str = "/dev/bam-p2p-stub";
const STUB_PARAMS: &str = "/sys/module/bam_p2p_stub/parameters";

/// One allocation of the stand-in's memory ("cudaMalloc"); dropping or [`Self::free`]
/// unmaps it ("cudaFree").
pub(crate) struct StubMem {
    ptr: *mut u8,
    pub(crate) len: usize,
}

impl StubMem {
    /// "cudaMalloc": maps `len` bytes (rounded up to 64 KiB pages) of `stub` on a
    /// 64 KiB boundary.
    pub(crate) fn alloc(stub: &std::fs::File, len: usize) -> Result<StubMem> {
        let len = (len as u64).next_multiple_of(GPU_PAGE) as usize;
        let g = GPU_PAGE as usize;
        // SAFETY: a fresh PROT_NONE reservation; no existing mapping is touched.
        let r = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + g,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if r == libc::MAP_FAILED {
            bail!("reserving {len} bytes: {}", std::io::Error::last_os_error());
        }
        let r = r as usize;
        let a = r.next_multiple_of(g);
        // SAFETY: [a, a + len) lies inside the reservation made above, which we own.
        let p = unsafe {
            libc::mmap(
                a as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                stub.as_raw_fd(),
                0,
            )
        };
        let err = std::io::Error::last_os_error();
        // SAFETY: the unmapped pieces are the reservation's ends outside [a, a + len).
        unsafe {
            if a > r {
                libc::munmap(r as *mut libc::c_void, a - r);
            }
            if r + len + g > a + len {
                libc::munmap((a + len) as *mut libc::c_void, r + len + g - (a + len));
            }
        }
        if p == libc::MAP_FAILED {
            // SAFETY: the reservation's middle part, still ours.
            unsafe { libc::munmap(a as *mut libc::c_void, len) };
            bail!("mmap of {len} bytes of {STUB}: {err}");
        }
        ensure!(p as usize == a, "{STUB} mapped at {p:?}, not at {a:#x}");
        ensure!(
            (p as u64) & (GPU_PAGE - 1) == 0,
            "{STUB} memory at {p:?} is not on a 64 KiB boundary"
        );
        Ok(StubMem {
            ptr: p as *mut u8,
            len,
        })
    }

    /// The device address of the allocation (the stand-in's memory is its own).
    pub(crate) fn dev(&self) -> u64 {
        self.ptr as u64
    }

    /// "cudaFree": unmaps the whole allocation; its free callbacks run.
    pub(crate) fn free(&mut self) -> Result<()> {
        if self.ptr.is_null() {
            return Ok(());
        }
        // SAFETY: exactly the mapping made in `alloc`; nothing refers to it afterwards
        // (the pointer is cleared, every access goes through `self`).
        let r = unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
        self.ptr = std::ptr::null_mut();
        ensure!(r == 0, "munmap: {}", std::io::Error::last_os_error());
        Ok(())
    }

    /// Pointer to byte `off`, checked against the allocation.
    pub(crate) fn at(&self, off: u64, len: usize) -> *mut u8 {
        assert!(!self.ptr.is_null(), "stub memory used after free");
        assert!(
            off as usize + len <= self.len,
            "{off}+{len} beyond {}",
            self.len
        );
        // SAFETY: in bounds, checked above.
        unsafe { self.ptr.add(off as usize) }
    }

    /// Copies `data` to byte `off`.
    pub(crate) fn write(&self, off: u64, data: &[u8]) {
        let p = self.at(off, data.len());
        // SAFETY: `p` covers data.len() bytes of our mapping; no Rust reference to this
        // memory exists (the controller writes it by DMA, the CPU only through raw
        // pointers).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) }
    }

    /// Copies bytes from `off` on into `out`.
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) {
        let p = self.at(off, out.len());
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) }
    }
}

impl Drop for StubMem {
    fn drop(&mut self) {
        let _ = self.free();
    }
}

/// One of the stand-in's counters (a module parameter).
fn stub_counter(name: &str) -> Result<i64> {
    let p = format!("{STUB_PARAMS}/{name}");
    Ok(std::fs::read_to_string(&p)
        .with_context(|| format!("reading {p}"))?
        .trim()
        .parse()?)
}

/// The stand-in's counters: live page tables and DMA mappings, free callbacks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counters {
    pub(crate) live_page_tables: i64,
    pub(crate) live_dma_mappings: i64,
    pub(crate) callbacks: i64,
}

/// Reads the stand-in's counters.
pub(crate) fn counters() -> Result<Counters> {
    Ok(Counters {
        live_page_tables: stub_counter("live_page_tables")?,
        live_dma_mappings: stub_counter("live_dma_mappings")?,
        callbacks: stub_counter("callbacks")?,
    })
}

/// Opens the stand-in's device, whose mmap is "GPU memory".
pub(crate) fn open_stub() -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(STUB)
        .with_context(|| format!("opening {STUB} (is bam_p2p_stub loaded?)"))
}
