//! `qemu-gpuio`: the real backend's CUDA-free bring-up (`bam::io::attach::attach`) in the
//! QEMU test guest, with `bam_p2p_stub`'s host memory playing GPU memory.
//!
//! ```text
//! qemu-gpuio [--queues N] [--depth N] [--ios N] [--revoke | --shared] [--allowed-dmesg FILE] kmod:/dev/bam-nvmeN
//! ```
//!
//! 1. Allocates two regions of "GPU memory" by mmap-ing `/dev/bam-p2p-stub` (queues and
//!    I/O buffer, sizes from [`Sizes::of`], on 64 KiB boundaries), calls [`attach`] with
//!    the controller's [`KmodTransport`] (MAP_GPU of both regions, bring-up, I/O queue
//!    pairs at the mapped bus addresses), writes the PRP lists into the buffer region.
//! 2. Drives verified I/O from the CPU through the created queue pairs, as the GPU would:
//!    SQEs written into the SQ memory, PRPs from the buffer's IOVA table and PRP lists,
//!    the SQ tail doorbell rung with `write32`, completions polled in the CQ memory
//!    (phase bit, bounded wait), the CQ head doorbell rung. Writes of a known pattern,
//!    then reads of the same blocks, compared byte for byte, on every queue pair.
//! 3. With `--revoke`: queues writes and reads whose PRP lists and data lie in the buffer
//!    region, frees that region (`munmap`, the stand-in's cudaFree: the module's free
//!    callback first stops the controller, CC.EN = 0 and bus mastering off, then releases
//!    the DMA mapping), requires the controller to be stopped (CC.EN = CSTS.RDY = 0), rings
//!    the doorbell anyway, and requires every command to end in an NVMe error status or
//!    (what a stopped controller gives) the bounded timeout, the stand-in's callback
//!    counters to move, the UNMAP of the revoked
//!    mapping to report REVOKED, the blocks targeted by the revoked writes to be unchanged
//!    on the disk, the queue memory outside the CQ entries untouched, and every DMAR fault
//!    the kernel logged meanwhile to name this controller and a revoked bus address (with
//!    the controller stopped there are none). The revoked file maps nothing more, so the
//!    disk check reopens the device. Those
//!    exact dmesg lines are appended to `--allowed-dmesg` for the final dmesg check.

mod args;
mod attachment;
mod dmesg;
mod queue;
mod revoke;
mod shared;
mod stub;
mod verify;

use anyhow::{ensure, Result};
use args::{parse_args, Args};
use bam::io::IoConfig;
use bam_nvme::transport::kmod::KmodTransport;
use bam_nvme::Transport;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stub::{counters, Counters};

/// Placeholder device address of the doorbells: the CPU rings them through
/// `Transport::write32` at `qp.sq_db - DOORBELLS`.
const DOORBELLS: u64 = 0x7e00_0000_0000;
/// First LBA this test writes (64 MiB into the namespace: clear of the other steps' data).
const BASE_LBA: u64 = 131_072;
const SLOT_BYTES: u64 = 16 << 10;
const PAGE: u64 = 4096;

/// What the tracing subscriber wrote (the [`Tee`]'s copy).
type Log = Arc<Mutex<Vec<u8>>>;

fn main() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let tee = Tee(log.clone());
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || tee.clone())
        .init();
    match run(&log) {
        Ok(()) => println!("qemu-gpuio: OK"),
        Err(e) => {
            println!("qemu-gpuio: FAILED: {e:#}");
            std::process::exit(1);
        }
    }
}

/// The controller under test.
struct Device {
    t: Arc<KmodTransport>,
    /// Its PCI address.
    bdf: String,
    /// Bytes of its BAR0 (the doorbells' window).
    bar0: usize,
    /// The stand-in's counters before anything was attached.
    c0: Counters,
}

/// Opens the controller, attaches it in the stand-in's memory and drives verified I/O
/// through it (two attachments with `--shared`); with `--revoke`, frees the buffer
/// region under queued commands; else releases the attachment.
fn run(log: &Log) -> Result<()> {
    let args = parse_args()?;
    let t = KmodTransport::open(args.path())?;
    let bdf = t.info().bdf();
    let bar0 = t.info().bar0_size as usize;
    let c0 = counters()?;
    println!(
        "{}: {bdf}, BAR0 {bar0} B, IOMMU {}; stub counters {c0:?}",
        t.describe(),
        t.info().iommu()
    );
    let dev = Device { t, bdf, bar0, c0 };

    let cfg = IoConfig {
        queues: args.queues,
        depth: args.depth,
        slot_bytes: SLOT_BYTES,
        nslots: 64 * args.queues,
        timeout: Duration::from_secs(10),
        queue_scratch_bytes: 0,
    };
    if args.shared {
        return shared::run_shared(&dev, &cfg, args.ios);
    }
    let att = attachment::attach_one(&dev, &cfg)?;
    let qps = attachment::verify_attachment(&dev, &att, &cfg, args.ios)?;
    if !args.revoke {
        att.a.release();
        let c2 = counters()?;
        ensure!(
            c2 == c0,
            "stub counters after release {c2:?}, before {c0:?}"
        );
        return Ok(());
    }
    revoke::revoke(dev, att, qps, &cfg, &args, log)
}

// ---------------------------------------------------------------------------------------
// Log capture: the GpuMapping release reports REVOKED through a tracing warning

#[derive(Clone)]
struct Tee(Arc<Mutex<Vec<u8>>>);

impl Write for Tee {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        std::io::stderr().write_all(b)?;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
