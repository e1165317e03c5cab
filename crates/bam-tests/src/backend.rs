//! What every GPU test suite shares: the backends a test runs on ([`TestBackend`]), a
//! test's outcome and its report line, the failure of a check ([`fail`]), and opening the
//! test GPU.

use bam::cache::CacheConfig;
use bam::cuda::Gpu;
use bam::io::IoConfig;
use bam::storage::file::{FileArray, FileConfig, FileMode};
use bam::storage::hostctl::{HostCtlArray, HostCtlConfig, HostMedia};
use bam::storage::sim::{DriveProfile, Media, SimArray, SimConfig};
use bam::{Error, Result, Storage};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A test's check that did not hold, saying what it found.
pub(crate) fn fail<T>(s: String) -> Result<T> {
    Err(Error::InvalidArgument(s))
}

/// Smallest bound of GPU-side waits in tests on the host-side controller.
pub const HOSTCTL_MIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The backends the GPU tests run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestBackend {
    /// The simulated SSD array on the GPU.
    Sim,
    /// The controller model on CPU threads, serving the GPU's queues across PCIe.
    HostCtl,
    /// Files through the page cache, served by CPU threads with io_uring
    /// (`bam::storage::file`), in [`file_dir`].
    File,
    /// The same with `O_DIRECT`.
    FileDirect,
}

impl TestBackend {
    /// Every backend.
    pub const ALL: [TestBackend; 4] = [
        TestBackend::Sim,
        TestBackend::HostCtl,
        TestBackend::File,
        TestBackend::FileDirect,
    ];

    /// The backends that serve several GPUs at once (a file-backed array serves one).
    pub const MULTI_GPU: [TestBackend; 4] = [
        TestBackend::Sim,
        TestBackend::HostCtl,
        TestBackend::File,
        TestBackend::FileDirect,
    ];

    /// `sim`, `hostctl`, `file` or `file-direct`.
    pub fn name(&self) -> &'static str {
        match self {
            TestBackend::Sim => "sim",
            TestBackend::HostCtl => "hostctl",
            TestBackend::File => "file",
            TestBackend::FileDirect => "file-direct",
        }
    }

    /// From [`Self::name`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == s)
    }

    /// An array with the SSDs, queues and buffers of `c` on this backend (for the host
    /// controller: [`hostctl_like`]). The host controller serves a command in
    /// tens of microseconds, so a full queue of large commands can take longer than the
    /// simulated array's usual 2 s bound: there the bound is at least
    /// [`HOSTCTL_MIN_TIMEOUT`], unless the test asks for a short one on purpose (below
    /// one second: the tests of timeouts).
    pub fn build(&self, gpu: &Arc<Gpu>, c: SimConfig) -> Result<Box<dyn Storage>> {
        Ok(match self {
            TestBackend::Sim => Box::new(SimArray::new(gpu, c)?),
            TestBackend::HostCtl => {
                let mut h = hostctl_like(&c);
                if h.io.timeout >= Duration::from_secs(1) {
                    h.io.timeout = h.io.timeout.max(HOSTCTL_MIN_TIMEOUT);
                }
                Box::new(HostCtlArray::new(gpu, h)?)
            }
            TestBackend::File | TestBackend::FileDirect => {
                Box::new(TestFiles::new(gpu, &c, self.file_mode())?)
            }
        })
    }

    /// How the file backends read (`file-direct`: `O_DIRECT`; the others: the page cache).
    pub fn file_mode(&self) -> FileMode {
        if *self == TestBackend::FileDirect {
            FileMode::Direct
        } else {
            FileMode::Buffered
        }
    }
}

/// Where the file backends' test files go: `BAM_TEST_FILE_DIR`, else the system's
/// temporary directory (each array's files are removed when it is dropped).
pub fn file_dir() -> PathBuf {
    std::env::var_os("BAM_TEST_FILE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// Removes the files a `file:` device string names (a test's own, in [`file_dir`]).
pub fn remove_test_files(device: &str) {
    if let Ok(bam::storage::GpuDevice::File { paths, .. }) = device.parse() {
        for p in paths.iter().filter(|p| p.starts_with(file_dir())) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A file-backed array over fresh files in [`file_dir`] (or over the simulated
/// configuration's media file, kept), removed when dropped.
pub struct TestFiles {
    arr: FileArray,
    remove: Vec<PathBuf>,
}

impl TestFiles {
    /// The same SSDs, queues and buffers as the simulated configuration `c`, as files of
    /// its capacity (its fault's LBAs fail with its status; lies are refused).
    pub fn new(gpu: &Arc<Gpu>, c: &SimConfig, mode: FileMode) -> Result<Self> {
        Self::on_gpus(std::slice::from_ref(gpu), c, mode)
    }

    /// As [`Self::new`], the files serving every GPU of `gpus` (`FileArray::on_gpus`).
    pub fn on_gpus(gpus: &[Arc<Gpu>], c: &SimConfig, mode: FileMode) -> Result<Self> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let (paths, remove): (Vec<PathBuf>, bool) = match &c.media {
            Media::File(p) if c.ssds == 1 => (vec![p.clone()], false),
            Media::File(p) => (
                (0..c.ssds)
                    .map(|s| PathBuf::from(format!("{}.{s}", p.display())))
                    .collect(),
                false,
            ),
            _ => {
                let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let dir = file_dir();
                let pid = std::process::id();
                let paths = (0..c.ssds)
                    .map(|s| dir.join(format!("bam-test-{pid}-{k}-{s}.ssd")))
                    .collect();
                (paths, true)
            }
        };
        let mut io = IoConfig {
            queue_scratch_bytes: 0,
            ..c.io.clone()
        };
        if io.timeout >= Duration::from_secs(1) {
            io.timeout = io.timeout.max(HOSTCTL_MIN_TIMEOUT);
        }
        let cfg = FileConfig {
            mode,
            writable: true,
            size: Some(c.capacity_bytes),
            workers: c.io.queues.clamp(1, 8),
            fill_pattern: c.fill_pattern,
            lba_size: c.model.lba_size,
            fault: c.fault,
            io,
            ..FileConfig::new(paths.clone())
        };
        let remove = if remove { paths } else { Vec::new() };
        match FileArray::on_gpus(gpus, cfg) {
            Ok(arr) => Ok(TestFiles { arr, remove }),
            Err(e) => {
                for p in &remove {
                    let _ = std::fs::remove_file(p);
                }
                Err(e)
            }
        }
    }
}

impl Drop for TestFiles {
    fn drop(&mut self) {
        for p in &self.remove {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Storage for TestFiles {
    fn ios(&self) -> &[bam::IoArray] {
        self.arr.ios()
    }
    fn device(&self) -> bam::storage::GpuDevice {
        self.arr.device()
    }
    fn counters(&self) -> Result<Vec<bam::storage::SsdCounters>> {
        self.arr.counters()
    }
    fn set_stall(&self, stall: bool) -> Result<()> {
        self.arr.set_stall(stall)
    }
    fn read_medium(&self, ssd: usize, off: u64, out: &mut [u8]) -> Result<()> {
        self.arr.read_medium(ssd, off, out)
    }
    fn backend(&self) -> bam::storage::Backend<'_> {
        self.arr.backend()
    }
}

/// The same SSDs, queues and buffers as a simulated array's configuration, on
/// controller models on CPU threads (for running one test on both backends): host or
/// file media stay, HBM becomes RAM; the fault's LBAs fail as media errors.
pub fn hostctl_like(c: &SimConfig) -> HostCtlConfig {
    let mdts = if c.model.mdts_bytes == 0 {
        0
    } else {
        (c.model.mdts_bytes / 4096).trailing_zeros() as u8
    };
    HostCtlConfig {
        ssds: c.ssds,
        capacity_bytes: c.capacity_bytes,
        lba_size: c.model.lba_size,
        mdts,
        media: match &c.media {
            Media::File(p) => HostMedia::File(p.clone()),
            _ => HostMedia::Ram,
        },
        io: IoConfig {
            queue_scratch_bytes: 0,
            ..c.io.clone()
        },
        workers: c.io.queues.clamp(1, 8),
        fault: c.fault,
        fill_pattern: c.fill_pattern,
    }
}

/// The suites' simulated array: one ideal SSD with the library's defaults, its medium
/// filled with the verification pattern (the tests read data nobody wrote).
pub fn test_sim() -> SimConfig {
    SimConfig {
        fill_pattern: true,
        ..SimConfig::new(DriveProfile::ideal())
    }
}

/// [`test_sim`] with `model` drives and buffer slots that hold `cache`'s lines (one queue
/// pair per SSD unless the test asks for more).
pub fn sim_for_cache(model: DriveProfile, cache: &CacheConfig) -> SimConfig {
    SimConfig {
        model,
        io: IoConfig {
            queues: 1,
            ..bam::cache::io_config(cache)
        },
        ..test_sim()
    }
}

/// Result of one test.
#[derive(Debug)]
pub struct Outcome {
    /// Test name.
    pub name: String,
    /// Pass (with a detail line) or failure.
    pub result: Result<String>,
    /// Wall time.
    pub seconds: f64,
}

impl Outcome {
    /// Prints `PASS<label> name (time): detail` or `FAIL<label> name (time): error` and
    /// returns whether the test passed.
    pub fn report(&self, label: &str) -> bool {
        match &self.result {
            Ok(s) => println!("PASS{label} {} ({:.2} s): {s}", self.name, self.seconds),
            Err(e) => println!("FAIL{label} {} ({:.2} s): {e}", self.name, self.seconds),
        }
        self.result.is_ok()
    }
}

/// Opens GPU 0 for a test binary and prints its name: `None` (after printing `SKIP`)
/// when there is no GPU; exits with status 1 when there is one but it cannot be opened.
pub fn open_test_gpu() -> Option<Arc<Gpu>> {
    if !bam::gpu_available() {
        println!("SKIP: no GPU (the CUDA driver is missing or sees no device)");
        return None;
    }
    match Gpu::new(0) {
        Ok(g) => {
            println!("GPU: {} ({} SMs)", g.name, g.sms);
            Some(g)
        }
        Err(e) => {
            eprintln!("FAIL: cannot open the GPU: {e}");
            std::process::exit(1);
        }
    }
}
