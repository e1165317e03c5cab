//! Compiles this example's own kernel (`kernels.cu`) against the bam device headers with
//! the nvcc that the `bam` crate found (its build script exports it: DEP_BAM_NVCC and
//! DEP_BAM_INCLUDE, through `links = "bam"`). The fatbin is embedded with include_bytes!.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let nvcc = std::env::var("DEP_BAM_NVCC").expect("the bam crate exports DEP_BAM_NVCC");
    let include = std::env::var("DEP_BAM_INCLUDE").expect("the bam crate exports DEP_BAM_INCLUDE");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("kernels.fatbin");
    println!("cargo:rerun-if-changed=kernels.cu");
    println!("cargo:rerun-if-changed={include}");
    let st = Command::new(&nvcc)
        .args(["-std=c++17", "-O3", "-fatbin", "--generate-line-info"])
        .args([
            "-gencode",
            "arch=compute_90,code=sm_90",
            "-gencode",
            "arch=compute_90,code=compute_90",
        ])
        .arg("-I")
        .arg(&include)
        .arg("-o")
        .arg(&out)
        .arg("kernels.cu")
        .status()
        .unwrap_or_else(|e| panic!("cannot run {nvcc}: {e}"));
    assert!(st.success(), "nvcc failed on kernels.cu");
}
