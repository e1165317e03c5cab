//! A user's program: data on storage behind a `bam::array<float>`, summed by its own
//! kernel, checked against the CPU.
//!
//!     cargo run --release -- [DEVICE]     (default sim:ideal; hostctl: or kmod:... work too)

use bam::cache::{io_config, ArrayView, Cache, CacheConfig};
use bam::cuda::DeviceBuffer;
use bam::storage::GpuDevice;
use bam::{Gpu, Module};

static KERNELS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin"));

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if !bam::gpu_available() {
        println!("SKIPPED: no GPU (the CUDA driver is missing or sees no device)");
        return Ok(());
    }
    let device: GpuDevice = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "sim:ideal".into())
        .parse()?;
    let gpu = Gpu::new(0)?;
    let kernels = Module::load(&gpu, KERNELS)?; // before the storage starts
    let cfg = CacheConfig::new(4096, 4096);
    let io = io_config(&cfg);
    let storage = device.open(&gpu, &io)?; // the queues and slots the cache needs
    let cache = Cache::new(storage.io(), cfg)?;
    let n: u64 = 1 << 22;
    let data: Vec<f32> = (0..n).map(|i| (i % 97) as f32).collect();
    let a = cache.alloc::<f32>(n)?;
    a.load(&data, 0)?;
    let out = DeviceBuffer::zeroed(&gpu, 8)?;
    let args: (ArrayView, u64, u64) = (a.view(), n, out.ptr());
    // SAFETY: matches sum(bam::array<float>, unsigned long long, double*) (the launch
    // checks the count and sizes, not the types); the array and `out` outlive the
    // synchronisation below.
    unsafe { kernels.launch(cache.stream(), "sum", gpu.sms * 4, 256, 0, &args)? };
    cache.sync()?;
    cache.check_errors()?;
    let mut got = [0f64];
    out.read(0, &mut got)?;
    let want: f64 = data.iter().map(|&x| x as f64).sum();
    drop(a);
    cache.close()?;
    if got[0] != want {
        return Err(format!("sum {} != {want}", got[0]).into());
    }
    println!("PASS: the sum over {n} elements through bam::array is {want}");
    Ok(())
}
