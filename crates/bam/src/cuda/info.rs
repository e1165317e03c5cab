//! Facts about the GPUs of this machine, for `bam doctor`: name, PCI address, compute
//! capability, memory and BAR1 size.
//!
//! Only device queries of the CUDA driver API are used (`cuInit`, `cuDeviceGet*`): no
//! context is created and no kernel is loaded, so this works on any GPU the driver
//! supports (unlike [`super::Gpu::new`], which needs sm_90) and costs no GPU memory.
//! The BAR1 size is not a CUDA attribute; it comes from sysfs.

use cudarc::driver::{result, sys};
use serde::Serialize;
use std::ffi::{c_char, c_int, CStr};
use std::path::Path;

/// One GPU as the CUDA driver and sysfs see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuInfo {
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// Device name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// PCI address `DDDD:BB:DD.F` (function 0: CUDA does not report one, and GPUs are
    /// function 0).
    pub pci_bdf: String,
    /// Compute capability major version.
    pub cc_major: u32,
    /// Compute capability minor version.
    pub cc_minor: u32,
    /// Total device memory in bytes.
    pub memory_bytes: u64,
    /// BAR1 size in bytes (see [`parse_gpu_bar1`]), from sysfs; `None` when sysfs has no
    /// such device or BAR.
    pub bar1_bytes: Option<u64>,
}

/// Why the GPUs could not be enumerated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuInfoError {
    /// The CUDA driver library (`libcuda.so`) cannot be loaded.
    #[error("the CUDA driver library (libcuda.so) cannot be loaded")]
    NoDriver,
    /// A CUDA driver call failed.
    #[error("{call} failed: {error}")]
    Driver {
        /// The driver call.
        call: &'static str,
        /// The driver's error, as it names it.
        error: String,
    },
}

fn driver_err(call: &'static str) -> impl Fn(result::DriverError) -> GpuInfoError {
    move |e| GpuInfoError::Driver {
        call,
        error: format!("{e:?}"),
    }
}

/// The PCI address of a GPU from its CUDA domain, bus and device ids.
pub fn bdf_string(domain: u32, bus: u32, device: u32) -> String {
    format!("{domain:04x}:{bus:02x}:{device:02x}.0")
}

/// `IORESOURCE_MEM`: a memory (not I/O port) resource.
pub const IORESOURCE_MEM: u64 = 0x200;
/// `IORESOURCE_PREFETCH`: a prefetchable memory resource.
pub const IORESOURCE_PREFETCH: u64 = 0x2000;

/// Size and flags of resource `index` from the text of a sysfs `resource` file: line
/// `index` is `start end flags` in hex; the size is `end - start + 1`, `None` for an
/// unassigned (all-zero) or malformed line.
pub fn parse_resource(text: &str, index: usize) -> Option<(u64, u64)> {
    let line = text.lines().nth(index)?;
    let mut it = line.split_whitespace().map(|w| {
        let w = w.trim_start_matches("0x").trim_start_matches("0X");
        u64::from_str_radix(w, 16).ok()
    });
    let start = it.next()??;
    let end = it.next()??;
    let flags = it.next()??;
    if end == 0 || end < start {
        return None;
    }
    Some(((end - start).checked_add(1)?, flags))
}

/// NVIDIA's "BAR1" (the aperture through which peers reach GPU memory) from the text
/// of a GPU's sysfs `resource` file: the first prefetchable memory BAR after BAR0. That
/// is PCI resource 1 when BAR0 is a 32-bit BAR, and resource 2 when BAR0 is 64-bit (it
/// then takes two BAR registers, as on Hopper).
pub fn parse_gpu_bar1(text: &str) -> Option<u64> {
    let want = IORESOURCE_MEM | IORESOURCE_PREFETCH;
    (1..=5)
        .filter_map(|i| parse_resource(text, i))
        .find(|(_, flags)| flags & want == want)
        .map(|(size, _)| size)
}

/// The BAR1 size of the GPU at `bdf`, from `<sys>/bus/pci/devices/<bdf>/resource`.
pub fn gpu_bar1_size(sys_root: &Path, bdf: &str) -> Option<u64> {
    let path = sys_root.join("bus/pci/devices").join(bdf).join("resource");
    parse_gpu_bar1(&std::fs::read_to_string(path).ok()?)
}

/// True when the CUDA driver library can be loaded (no CUDA call is made).
pub fn driver_present() -> bool {
    // SAFETY: only probes for the library with dlopen; calls nothing in it.
    unsafe { sys::is_culib_present() }
}

/// The CUDA version the driver supports, e.g. (13, 0); `None` without a driver.
pub fn driver_cuda_version() -> Option<(u32, u32)> {
    if !driver_present() {
        return None;
    }
    let mut v: c_int = 0;
    // SAFETY: writes one int; callable before cuInit.
    unsafe { sys::cuDriverGetVersion(&mut v) }.result().ok()?;
    let v = u32::try_from(v).ok()?;
    Some((v / 1000, (v % 1000) / 10))
}

/// Every GPU the CUDA driver sees, with BAR1 sizes read under `sys_root` (normally
/// `/sys`). An empty list when the driver loads but finds no GPU.
pub fn enumerate(sys_root: &Path) -> Result<Vec<GpuInfo>, GpuInfoError> {
    if !driver_present() {
        return Err(GpuInfoError::NoDriver);
    }
    match result::init() {
        Ok(()) => {}
        // A driver without a usable GPU answers cuInit with NO_DEVICE.
        Err(result::DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => return Ok(Vec::new()),
        Err(e) => return Err(driver_err("cuInit")(e)),
    }
    let count = result::device::get_count().map_err(driver_err("cuDeviceGetCount"))?;
    let mut out = Vec::new();
    for ordinal in 0..count.max(0) {
        let dev = result::device::get(ordinal).map_err(driver_err("cuDeviceGet"))?;
        let attr = |a: sys::CUdevice_attribute| -> Result<u32, GpuInfoError> {
            // SAFETY: `dev` comes from cuDeviceGet.
            let v = unsafe { result::device::get_attribute(dev, a) }
                .map_err(driver_err("cuDeviceGetAttribute"))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        use sys::CUdevice_attribute as A;
        let pci_bdf = bdf_string(
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
        );
        // SAFETY: `dev` comes from cuDeviceGet.
        let memory_bytes = unsafe { result::device::total_mem(dev) }
            .map_err(driver_err("cuDeviceTotalMem"))? as u64;
        out.push(GpuInfo {
            ordinal: ordinal as usize,
            name: device_name(dev)?,
            cc_major: attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            cc_minor: attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            memory_bytes,
            bar1_bytes: gpu_bar1_size(sys_root, &pci_bdf),
            pci_bdf,
        });
    }
    Ok(out)
}

/// The device's name; written here rather than with cudarc's `get_name`, which panics
/// on a name without a terminating NUL.
fn device_name(dev: sys::CUdevice) -> Result<String, GpuInfoError> {
    let mut buf = [0u8; 256];
    // SAFETY: the driver writes at most `buf.len()` bytes into `buf`.
    unsafe { sys::cuDeviceGetName(buf.as_mut_ptr().cast::<c_char>(), buf.len() as c_int, dev) }
        .result()
        .map_err(driver_err("cuDeviceGetName"))?;
    Ok(match CStr::from_bytes_until_nul(&buf) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&buf).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU with a 32-bit BAR0 (resource 1 is BAR1, 64-bit, taking 1 and 2).
    const RESOURCE_32: &str = "\
0x00000000fb000000 0x00000000fbffffff 0x0000000000040200
0x0000038000000000 0x00000397ffffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000039800000000 0x0000039801ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x000000000000e000 0x000000000000e07f 0x0000000000040101
0x00000000fc000000 0x00000000fc07ffff 0x0000000000046200
";

    /// A Hopper-style GPU: 64-bit BAR0 (resources 0 and 1), BAR1 at resource 2.
    const RESOURCE_64: &str = "\
0x0000002000000000 0x0000002000ffffff 0x0000000000140204
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000004000000000 0x0000005fffffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000002002000000 0x0000002003ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
";

    #[test]
    fn resource_lines_give_sizes_and_flags() {
        assert_eq!(parse_resource(RESOURCE_32, 0), Some((16 << 20, 0x40200)));
        assert_eq!(parse_resource(RESOURCE_32, 1), Some((96 << 30, 0x14220c)));
        // The upper half of a 64-bit BAR, and lines that are not there or are broken.
        assert_eq!(parse_resource(RESOURCE_32, 2), None);
        assert_eq!(parse_resource(RESOURCE_32, 99), None);
        assert_eq!(parse_resource("", 1), None);
        assert_eq!(parse_resource("junk\nzz 1 2\n", 1), None);
        assert_eq!(parse_resource("x\n0x10 0x20\n", 1), None);
        assert_eq!(parse_resource("x\n0x10 0x0f 0\n", 1), None);
        assert_eq!(parse_resource("x\n0x0 0xffffffffffffffff 0\n", 1), None);
    }

    #[test]
    fn bar1_after_a_32_or_64_bit_bar0() {
        assert_eq!(parse_gpu_bar1(RESOURCE_32), Some(96 << 30));
        assert_eq!(parse_gpu_bar1(RESOURCE_64), Some(128 << 30));
        // No prefetchable BAR at all.
        assert_eq!(
            parse_gpu_bar1(&RESOURCE_32.replace("14220c", "140204")),
            None
        );
        assert_eq!(parse_gpu_bar1(""), None);
    }

    #[test]
    fn bar1_from_sysfs() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("bus/pci/devices/0000:17:00.0");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("resource"), RESOURCE_64).unwrap();
        assert_eq!(gpu_bar1_size(t.path(), "0000:17:00.0"), Some(128 << 30));
        assert_eq!(gpu_bar1_size(t.path(), "0000:18:00.0"), None);
    }

    #[test]
    fn bdf_is_lowercase_hex() {
        assert_eq!(bdf_string(0, 0xAB, 0x1f), "0000:ab:1f.0");
        assert_eq!(bdf_string(0x10000, 1, 0), "10000:01:00.0");
    }
}
