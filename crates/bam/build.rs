//! Compiles `cuda/src/*.cu` into fatbins (SASS sm_90 + PTX compute_90) embedded in the
//! crate. nvcc is found through `NVCC`, `CUDA_PATH`, `PATH`, or the pinned pip wheels.

use std::path::{Path, PathBuf};
use std::process::Command;

const INSTALL_HINT: &str = "install the CUDA 13.0 compiler, e.g.\n    \
pip install nvidia-cuda-nvcc==13.0.* nvidia-nvvm==13.0.* nvidia-cuda-crt==13.0.* \
nvidia-cuda-runtime==13.0.* nvidia-cuda-cccl==13.0.*\n  (or run .ci/install-cuda.sh), \
or point NVCC at an nvcc binary / CUDA_PATH at a CUDA toolkit";

fn candidates() -> Vec<PathBuf> {
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

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cuda");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=CUDA_PATH");
    println!("cargo:rerun-if-changed={}", root.display());
    for sub in ["include/bam", "src"] {
        if let Ok(rd) = std::fs::read_dir(root.join(sub)) {
            for e in rd.flatten() {
                println!("cargo:rerun-if-changed={}", e.path().display());
            }
        }
    }
    let nvcc = candidates().into_iter().find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("bam: nvcc not found (looked at NVCC, CUDA_PATH, PATH and pip wheels); {INSTALL_HINT}")
    });
    for name in ["sim", "bench", "cache_kernels"] {
        let src = root.join(format!("src/{name}.cu"));
        let dst = out.join(format!("{name}.fatbin"));
        let status = Command::new(&nvcc)
            .args(["-std=c++17", "-O3", "-fatbin", "--generate-line-info"])
            .args([
                "-gencode",
                "arch=compute_90,code=sm_90",
                "-gencode",
                "arch=compute_90,code=compute_90",
            ])
            .arg("-I")
            .arg(root.join("include"))
            .arg("-o")
            .arg(&dst)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| panic!("bam: cannot run {}: {e}; {INSTALL_HINT}", nvcc.display()));
        if !status.success() {
            panic!(
                "bam: nvcc ({}) failed to compile {}",
                nvcc.display(),
                src.display()
            );
        }
    }
    println!("cargo:rustc-env=BAM_NVCC={}", nvcc.display());
    // For dependents' build scripts (links = "bam"): DEP_BAM_NVCC, DEP_BAM_INCLUDE.
    println!("cargo:nvcc={}", nvcc.display());
    println!("cargo:include={}", root.join("include").display());
}
