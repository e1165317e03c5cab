//! Runs Listing 5.2 (plain GPU memory) and Listing 5.3 (bam::array over storage) on the
//! same inputs and checks that the outputs are identical.
//!
//!     cargo run --release -p random-access [-- N [DEVICE]]
//!
//! DEVICE is any GPU device string (default: two simulated SSDs sized for the data;
//! `hostctl:ssds=2,capacity=64M` or `kmod:/dev/bam-nvme0,/dev/bam-nvme1` work the same).

use bam::cache::{io_config, ArrayView, Cache, CacheConfig};
use bam::cuda::DeviceBuffer;
use bam::io::IoConfig;
use bam::storage::GpuDevice;
use bam::Gpu;
use bam::Module;

static KERNELS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin"));

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if !bam::gpu_available() {
        println!("SKIPPED: no GPU (the CUDA driver is missing or sees no device)");
        return Ok(());
    }
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1 << 22);
    let gpu = Gpu::new(0)?;
    // Load (and resolve) every kernel before the simulated SSDs start: a module load while
    // their persistent kernel runs could wait forever (bam refuses it).
    let module = Module::load(&gpu, KERNELS)?;

    // Inputs: data[i], a random permutation-ish index array, out = 1.0.
    let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let mut s = 0x1234_5678_9abc_def0u64;
    let randidx: Vec<u32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n as u64) as u32
        })
        .collect();
    let out0 = vec![1.0f32; n];

    // Listing 5.2 on plain GPU memory.
    let d_data = DeviceBuffer::zeroed(&gpu, 4 * n)?;
    let d_out = DeviceBuffer::zeroed(&gpu, 4 * n)?;
    let d_idx = DeviceBuffer::zeroed(&gpu, 4 * n)?;
    d_data.write(0, &data)?;
    d_out.write(0, &out0)?;
    d_idx.write(0, &randidx)?;
    let stream = gpu.stream()?;
    let args: (u64, u64, u64, u64) = (d_data.ptr(), n as u64, d_out.ptr(), d_idx.ptr());
    // SAFETY: matches random_access_plain(const float*, size_t, float*, const unsigned*);
    // the buffers outlive the synchronisation.
    unsafe { module.launch(&stream, "random_access_plain", 256, 256, 0, &args)? };
    gpu.sync_timeout(&stream, std::time::Duration::from_secs(30))?;
    let mut expect = vec![0f32; n];
    d_out.read(0, &mut expect)?;

    // Listing 5.3 on the simulated SSD array: 512 B lines, a cache of 40000 lines (about
    // 20 MiB, less than the 2 x 16 MiB of data), two arrays on different LBA ranges.
    // Every thread keeps one line of `data` pinned through its array_ref while it reads
    // and writes `out`, so the cache must have more lines than the grid has threads.
    // Hits counted, for the hit rate printed below (off by default: it costs every access).
    let cfg = CacheConfig {
        count_hits: true,
        ..CacheConfig::new(512, 40000)
    };
    let device: GpuDevice = match std::env::args().nth(2) {
        Some(d) => d.parse()?,
        None => {
            let per_ssd = (8 * n as u64).max(1 << 20) + (1 << 20);
            format!("sim:ideal,ssds=2,capacity={per_ssd}").parse()?
        }
    };
    let arr = device.open(
        &gpu,
        &IoConfig {
            queues: 16,
            ..io_config(&cfg)
        },
    )?;
    let cache = Cache::new(arr.io(), cfg)?;
    let a_data = cache.alloc::<f32>(n as u64)?;
    let a_out = cache.alloc::<f32>(n as u64)?; // beside a_data
    let t_load = std::time::Instant::now();
    a_data.load(&data, 0)?;
    a_out.load(&out0, 0)?;
    cache.flush()?;
    println!(
        "loaded and flushed 2 x {} lines in {:.2} s: {:?}",
        a_data.lines(),
        t_load.elapsed().as_secs_f64(),
        cache.stats()?
    );
    cache.reset_stats()?;
    let args: (ArrayView, u64, ArrayView, u64) =
        (a_data.view(), n as u64, a_out.view(), d_idx.ptr());
    let kernel = if std::env::var_os("RA_COALESCED").is_some() {
        "random_access_bam_coalesced"
    } else {
        "random_access_bam"
    };
    println!("kernel {kernel}");
    // GPU time from the stream's events (bam::cuda::GpuTimer), not the host's clock.
    let timer = bam::cuda::GpuTimer::start(cache.stream())?;
    // SAFETY: both kernels are (bam::array<float>, size_t, bam::array<float>, const
    // unsigned*): ArrayView is bam::array<T>'s layout; everything outlives the sync.
    unsafe { module.launch(cache.stream(), kernel, 64, 256, 0, &args)? };
    // Bounded: a kernel that does not finish cannot be stopped from here, so report what
    // the cache counted so far and end the process (which ends the kernel).
    let took = match timer.stop(std::time::Duration::from_secs(30)) {
        Ok(t) => t,
        Err(e) => {
            println!(
                "FAIL: {kernel} did not finish: {e}; cache stats {:?}; errors {:?}",
                cache.stats(),
                cache
                    .take_errors()
                    .map(|(n, v)| (n, v.into_iter().take(4).collect::<Vec<_>>()))
            );
            std::process::exit(1);
        }
    };
    let secs = took.as_secs_f64();
    cache.check_errors()?;
    let stats = cache.stats()?;
    let mut got = vec![0f32; n];
    a_out.read(0, &mut got)?;
    let wrong = got
        .iter()
        .zip(&expect)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    println!("n = {n}: bam kernel {:.2} ms; cache: {} accesses, hit rate {:.3}, {} misses, {} evictions, {} write-backs",
        secs * 1e3, stats.accesses, stats.hit_rate().unwrap_or(0.0), stats.misses, stats.evictions, stats.writebacks);
    a_data.close()?;
    a_out.close()?;
    cache.close()?;
    if wrong != 0 {
        println!("FAIL: {wrong} of {n} outputs differ from the plain kernel's");
        std::process::exit(1);
    }
    println!(
        "PASS: Listing 5.3 on {} matches Listing 5.2 on GPU memory ({n} outputs)",
        arr.describe()
    );
    Ok(())
}
