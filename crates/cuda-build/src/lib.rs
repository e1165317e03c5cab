//! Build-script helper of the bam crates: one place that finds nvcc and says which GPU
//! architectures the fatbins hold.
//!
//! In a crate that depends on `bam` (whose build script exports the nvcc it found and
//! its device headers through `links = "bam"`), a build script compiles its own kernels
//! against the bam device library with
//!
//! ```no_run
//! // build.rs
//! bam_cuda_build::compile("cuda/kernels.cu", "kernels.fatbin");
//! // src: static KERNELS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin"));
//! ```
//!
//! Architectures: `BAM_CUDA_ARCHS` (comma-separated compute capabilities without the dot,
//! e.g. `90` or `80,86,89,90`; default [`DEFAULT_ARCHS`]) gets SASS for each and PTX for the
//! highest, so newer GPUs can JIT the PTX.

pub mod layout;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compute capabilities built when `BAM_CUDA_ARCHS` is not set: Ampere (A100, RTX 30),
/// Ada (L40S, RTX 40), Hopper (H100, H200), Blackwell (B200, RTX 50). The kernels use
/// `cp.async`, so sm_80 is the oldest they build for.
pub const DEFAULT_ARCHS: &str = "80,86,89,90,100,120";

/// What to do when nvcc is missing.
pub const INSTALL_HINT: &str = "install the CUDA 13.0 compiler, e.g.\n    \
pip install nvidia-cuda-nvcc==13.0.* nvidia-nvvm==13.0.* nvidia-cuda-crt==13.0.* \
nvidia-cuda-runtime==13.0.* nvidia-cuda-cccl==13.0.*\n  (or run .ci/install-cuda.sh), \
or point NVCC at an nvcc binary / CUDA_PATH at a CUDA toolkit";

/// Where nvcc may be: `NVCC`, `CUDA_PATH`, `PATH`, the pinned pip wheels, /usr/local/cuda.
pub fn candidates() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os("NVCC") {
        v.push(PathBuf::from(p));
    }
    if let Some(p) = std::env::var_os("CUDA_PATH") {
        v.push(Path::new(&p).join("bin/nvcc"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            v.push(d.join("nvcc"));
        }
    }
    // pip wheels: <site-packages>/nvidia/cu13/bin/nvcc
    for py in ["python3", "python"] {
        let out = Command::new(py)
            .args(["-c", "import site,sysconfig;print('\\n'.join([sysconfig.get_paths()['purelib']]+site.getsitepackages()+[site.getusersitepackages()]))"])
            .output();
        if let Ok(o) = out {
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                v.push(Path::new(line.trim()).join("nvidia/cu13/bin/nvcc"));
            }
        }
    }
    v.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    v
}

/// The first nvcc of [`candidates`] (panics with the install hint when there is none:
/// build scripts report errors by panicking).
pub fn find_nvcc() -> PathBuf {
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=CUDA_PATH");
    candidates()
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nvcc not found (looked at NVCC, CUDA_PATH, PATH and pip wheels); {INSTALL_HINT}"
            )
        })
}

/// The compute capabilities to build for, from `BAM_CUDA_ARCHS` (validated).
pub fn archs() -> Vec<u32> {
    println!("cargo:rerun-if-env-changed=BAM_CUDA_ARCHS");
    let spec = std::env::var("BAM_CUDA_ARCHS").unwrap_or_else(|_| DEFAULT_ARCHS.into());
    let mut v: Vec<u32> = spec
        .split(',')
        .map(|s| {
            s.trim().parse::<u32>().ok().filter(|&a| (80..=200).contains(&a)).unwrap_or_else(|| {
                panic!("BAM_CUDA_ARCHS={spec}: `{s}` is not a compute capability from 80 up, such as 80, 86, 89, 90, 100 or 120")
            })
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// nvcc's `-gencode` flags for `archs`: SASS for each, PTX for the highest.
pub fn gencode_flags(archs: &[u32]) -> Vec<String> {
    let mut f = Vec::new();
    for a in archs {
        f.push("-gencode".into());
        f.push(format!("arch=compute_{a},code=sm_{a}"));
    }
    if let Some(max) = archs.iter().max() {
        f.push("-gencode".into());
        f.push(format!("arch=compute_{max},code=compute_{max}"));
    }
    f
}

/// Compiles `src` into the fatbin `dst` with the device headers at `include`.
pub fn fatbin(nvcc: &Path, include: &Path, src: &Path, dst: &Path) {
    println!("cargo:rerun-if-changed={}", src.display());
    let status = Command::new(nvcc)
        .args(["-std=c++17", "-O3", "-fatbin", "--generate-line-info"])
        .args(gencode_flags(&archs()))
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(dst)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; {INSTALL_HINT}", nvcc.display()));
    if !status.success() {
        panic!(
            "nvcc ({}) failed to compile {}",
            nvcc.display(),
            src.display()
        );
    }
}

/// For crates that depend on `bam`: compiles `src` (relative to the crate) into
/// `OUT_DIR/out_name` with the nvcc and device headers the `bam` crate found.
pub fn compile(src: &str, out_name: &str) {
    let nvcc = std::env::var("DEP_BAM_NVCC").expect(
        "DEP_BAM_NVCC: depend on the `bam` crate (it exports nvcc through links = \"bam\")",
    );
    let include = std::env::var("DEP_BAM_INCLUDE").expect("DEP_BAM_INCLUDE from the `bam` crate");
    println!("cargo:rerun-if-changed={include}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join(out_name);
    fatbin(Path::new(&nvcc), Path::new(&include), Path::new(src), &out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gencode_has_sass_for_each_and_ptx_for_the_highest() {
        assert_eq!(
            gencode_flags(&[80, 90]),
            [
                "-gencode",
                "arch=compute_80,code=sm_80",
                "-gencode",
                "arch=compute_90,code=sm_90",
                "-gencode",
                "arch=compute_90,code=compute_90"
            ]
        );
    }
}
