//! The GPU check: GPUs through the CUDA driver (`bam::cuda::info`, with the `gpu`
//! feature), their compute capability and BAR1 size against their memory.

use super::{ids, Check, GpuFacts};
use std::path::Path;

/// Oldest compute capability (major) bam's GPU kernels run on.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub const MIN_CC_MAJOR: u32 = 9;

/// The GPU lines and facts of this machine (`sys`: normally `/sys`).
#[cfg(feature = "gpu")]
pub fn check(sys: &Path) -> (Vec<Check>, GpuFacts) {
    use bam::cuda::info as gpu_info;
    let no_gpu = |why: String| {
        (
            vec![Check::fail(ids::GPU, format!("no NVIDIA GPU/driver: {why}")).fix(
                "install the NVIDIA driver on a machine with an NVIDIA GPU (the CPU-side commands model:, vfio:, kmod: work without one)",
            )],
            GpuFacts {
                bdfs: Vec::new(),
                unusable: Some("needs a GPU".into()),
            },
        )
    };
    match gpu_info::enumerate(sys) {
        Err(e) => no_gpu(e.to_string()),
        Ok(gpus) if gpus.is_empty() => no_gpu("the CUDA driver sees no GPU".into()),
        Ok(gpus) => lines(&gpus, gpu_info::driver_cuda_version()),
    }
}

/// Without the `gpu` feature there is no CUDA in this build: the check is skipped.
#[cfg(not(feature = "gpu"))]
pub fn check(_sys: &Path) -> (Vec<Check>, GpuFacts) {
    (
        vec![
            Check::skip(ids::GPU, "built without GPU support (the gpu feature)")
                .fix("build bam with its default features to check the GPU"),
        ],
        GpuFacts {
            bdfs: Vec::new(),
            unusable: Some("built without GPU support".into()),
        },
    )
}

/// One line per GPU: OK, or WARN/FAIL for a BAR1 smaller than the memory and a compute
/// capability below sm_90 (FAIL when no GPU has sm_90).
#[cfg(feature = "gpu")]
pub fn lines(
    gpus: &[bam::cuda::info::GpuInfo],
    cuda: Option<(u32, u32)>,
) -> (Vec<Check>, GpuFacts) {
    use super::Status;
    use crate::units::binary_bytes;
    let any_new = gpus.iter().any(|g| g.cc_major >= MIN_CC_MAJOR);
    let mut out = Vec::new();
    if let Some((major, minor)) = cuda {
        out.push(Check::info(
            ids::GPU,
            format!("CUDA driver API {major}.{minor}"),
        ));
    }
    for g in gpus {
        let bar1 = g.bar1_bytes.map_or_else(
            || "BAR1 unknown".to_string(),
            |b| format!("BAR1 {}", binary_bytes(b)),
        );
        let mut msg = format!(
            "GPU {}: {}, {}, sm_{}{}, {}, {bar1}",
            g.ordinal,
            g.name,
            g.pci_bdf,
            g.cc_major,
            g.cc_minor,
            binary_bytes(g.memory_bytes)
        );
        let mut status = Status::Ok;
        let mut fixes: Vec<&str> = Vec::new();
        if g.cc_major < MIN_CC_MAJOR {
            status = if any_new { Status::Warn } else { Status::Fail };
            msg += "; bam's GPU kernels need sm_90 or newer";
            fixes.push(if any_new {
                "use a GPU with sm_90 or newer (CUDA_VISIBLE_DEVICES)"
            } else {
                "use a Hopper (sm_90) or newer GPU"
            });
        }
        if g.bar1_bytes.is_some_and(|b| b < g.memory_bytes) {
            status = status.max(Status::Warn);
            msg += "; BAR1 is smaller than the GPU memory: queues and buffers mapped through nvidia_p2p must fit in it";
            fixes.push("enable Resizable BAR / large BAR (Above 4G decoding) in the firmware");
        }
        let mut c = Check::new(ids::GPU, status, msg);
        if !fixes.is_empty() {
            c = c.fix(fixes.join("; "));
        }
        out.push(c);
    }
    let facts = GpuFacts {
        bdfs: gpus.iter().map(|g| g.pci_bdf.clone()).collect(),
        unusable: (!any_new).then(|| "needs an sm_90 or newer GPU".to_string()),
    };
    (out, facts)
}

#[cfg(all(test, feature = "gpu"))]
mod tests {
    use super::super::Status;
    use super::*;
    use bam::cuda::info::GpuInfo;

    fn gpu(ordinal: usize, cc: u32, mem: u64, bar1: Option<u64>) -> GpuInfo {
        GpuInfo {
            ordinal,
            name: "NVIDIA Test".into(),
            pci_bdf: format!("0000:{:02x}:00.0", 0x17 + ordinal),
            cc_major: cc,
            cc_minor: 0,
            memory_bytes: mem,
            bar1_bytes: bar1,
        }
    }

    #[test]
    fn gpu_lines() {
        let (c, f) = lines(&[gpu(0, 9, 80 << 30, Some(128 << 30))], Some((13, 0)));
        assert_eq!(c[0].message, "CUDA driver API 13.0");
        assert_eq!(c[1].status, Status::Ok, "{c:?}");
        assert_eq!(
            c[1].message,
            "GPU 0: NVIDIA Test, 0000:17:00.0, sm_90, 80.00 GiB, BAR1 128.00 GiB"
        );
        assert_eq!(f.bdfs, ["0000:17:00.0"]);
        assert_eq!(f.unusable, None);
        // Small BAR1.
        let (c, _) = lines(&[gpu(0, 9, 80 << 30, Some(256 << 20))], None);
        assert_eq!(c[0].status, Status::Warn);
        assert!(c[0].fix.as_deref().unwrap().contains("Resizable BAR"));
        // An old GPU next to a new one, and alone.
        let (c, f) = lines(
            &[gpu(0, 8, 40 << 30, None), gpu(1, 9, 80 << 30, None)],
            None,
        );
        assert_eq!((c[0].status, c[1].status), (Status::Warn, Status::Ok));
        assert!(c[0].message.contains("BAR1 unknown"));
        assert_eq!(f.unusable, None);
        let (c, f) = lines(&[gpu(0, 8, 40 << 30, Some(256 << 20))], None);
        assert_eq!(c[0].status, Status::Fail);
        assert!(c[0].fix.as_deref().unwrap().contains("Resizable BAR"));
        assert!(f.unusable.is_some());
    }
}
