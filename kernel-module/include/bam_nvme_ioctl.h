/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * bam_nvme_ioctl.h - user/kernel ABI of the bam_nvme char device.
 *
 * One char device per NVMe controller bound to the bam_nvme driver:
 * /dev/bam-nvme<N>.  /sys/class/bam-nvme/bam-nvme<N>/device links to the
 * PCI device; the class device carries the read-only attributes
 * "pci_addr" (DDDD:BB:DD.F), "bar0_size" (bytes, decimal), "iommu"
 * ("none", "passthrough", "dma" or "other") and "owner_pid" (0 when free).
 *
 * The device is opened exclusively (a second open() fails with EBUSY) by the
 * process that drives the controller.  Operations:
 *
 *  mmap(fd, offset 0, len <= BAR0 size, PROT_READ|PROT_WRITE, MAP_SHARED)
 *      maps BAR0 (controller registers and doorbells) uncached.
 *  BAM_NVME_IOC_INFO      device and driver facts (struct bam_nvme_info)
 *  BAM_NVME_IOC_MAP_HOST  pin a page-aligned range of the caller's memory and
 *                         DMA-map it for the controller; returns one bus
 *                         address per host page (struct bam_nvme_map)
 *  BAM_NVME_IOC_MAP_GPU   pin and DMA-map a range of GPU memory through the
 *                         NVIDIA driver's nvidia_p2p interface; returns one
 *                         bus address per GPU page (64 KiB); EOPNOTSUPP when
 *                         the NVIDIA driver (or the module's p2p support) is
 *                         absent (struct bam_nvme_map)
 *  BAM_NVME_IOC_UNMAP     release one mapping by handle (struct bam_nvme_unmap);
 *                         while the controller is enabled and its DMA is not
 *                         strictly translated, the release is deferred until
 *                         the controller is stopped (see deferred_mappings)
 *
 * Opening needs CAP_SYS_RAWIO (EPERM otherwise), fails under kernel
 * lockdown (EPERM), and fails with EPERM for a device whose DMA no IOMMU
 * translates (no IOMMU, passthrough) unless the module parameter
 * allow_unsafe_noiommu is set (which taints the kernel).
 *
 * Closing the file (or the death of the process) quiesces the controller
 * (shutdown notification, then CC.EN = 0, then bus mastering off) and
 * releases every mapping made through that file.  Unbinding the device does
 * the same at once; afterwards every call on a still-open file fails with
 * ENODEV and BAR accesses raise SIGBUS.  A PCIe error reported for the
 * device (AER) stops its DMA (bus mastering off, CC.EN = 0) and fails the
 * open file: every call and mmap returns EIO and BAR accesses raise SIGBUS
 * until it is closed; open fails with EIO until the kernel's recovery is
 * done (the controller is then reset and disabled).
 *
 * All structures have explicit padding, are naturally aligned and have the
 * same layout for 32- and 64-bit user space.  Reserved fields and unknown
 * flag bits must be zero.
 */
#ifndef _UAPI_BAM_NVME_IOCTL_H
#define _UAPI_BAM_NVME_IOCTL_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define BAM_NVME_ABI_VERSION 1

/* struct bam_nvme_info.flags */
/* DMA from this device is translated by an IOMMU (bus address != physical) */
#define BAM_NVME_INFO_IOMMU_DMA         (1U << 0)
/* an IOMMU is present for this device but in passthrough (identity) mode */
#define BAM_NVME_INFO_IOMMU_PASSTHROUGH (1U << 1)
/* the module was built with nvidia_p2p support */
#define BAM_NVME_INFO_P2P_BUILT         (1U << 2)
/* the nvidia_p2p symbols can be resolved right now (NVIDIA driver loaded) */
#define BAM_NVME_INFO_P2P_AVAILABLE     (1U << 3)
/*
 * GPU memory mapped through this file was freed while mapped (NVIDIA free
 * callback): the module stopped the controller (CC.EN = 0, bus mastering
 * off) before the DMA mapping was released.  MAP_HOST and MAP_GPU fail with
 * ENOTRECOVERABLE from then on; UNMAP, INFO and the BAR mapping keep
 * working.  Close the file and open the device again to start over.
 */
#define BAM_NVME_INFO_REVOKED           (1U << 4)
/*
 * The IOMMU domain invalidates lazily (flush queue, "DMA-FQ"): after UNMAP
 * the device may still reach the pages for a short while.  Boot with
 * iommu.strict=1 or set the IOMMU group's type to "DMA" before binding.
 */
#define BAM_NVME_INFO_IOMMU_LAZY        (1U << 5)

struct bam_nvme_info {
	__u32 abi_version;   /* BAM_NVME_ABI_VERSION */
	__u32 flags;         /* BAM_NVME_INFO_* */
	__u32 pci_domain;
	__u8  pci_bus;
	__u8  pci_device;
	__u8  pci_function;
	__u8  reserved0;
	__u16 vendor_id;
	__u16 device_id;
	__u32 class_code;    /* 24-bit PCI class code, 0x010802 for NVMe */
	__u64 bar0_size;     /* bytes */
	__u64 max_map_bytes; /* largest length accepted by one MAP ioctl */
	__u32 max_mappings;  /* most mappings one open file may hold */
	__u32 page_size;     /* host page size: granule of MAP_HOST */
	__u32 nr_mappings;   /* mappings held by this file now */
	/*
	 * Mappings UNMAPped while the controller was enabled and its DMA was
	 * not strictly translated (no IOMMU, passthrough, lazy invalidation,
	 * or the force_deferred_unmap parameter): still pinned and DMA-mapped
	 * (and counted in pinned_bytes) until the controller is known to be
	 * stopped: the next UNMAP that finds CC.EN = 0 and CSTS.RDY = 0 or
	 * follows a revocation, close, unbind.  MAP_* fail with ENOSPC while
	 * max_deferred_mappings are pending.
	 */
	__u32 deferred_mappings;
	__u64 pinned_bytes;  /* host memory pinned by this file now */
	__u64 dma_mask;      /* the device's streaming DMA mask */
};

/* struct bam_nvme_map.flags (MAP_GPU only) */
/* use nvidia_p2p_get_pages_persistent (no free callback) */
#define BAM_NVME_MAP_GPU_PERSISTENT (1U << 0)

/*
 * MAP_HOST: vaddr and length must be multiples of the host page size,
 *   length > 0, length <= max_map_bytes, vaddr + length must not overflow
 *   and must lie in the caller's address space; flags must be 0.
 * MAP_GPU: vaddr (a CUDA device pointer) and length must be multiples of
 *   64 KiB, same limits otherwise.
 * addrs points to an array of addrs_len __u64 that receives one bus address
 * per page; addrs_len must be at least length / page size.  On success the
 * kernel writes handle (non-zero), entries (addresses written) and page_size
 * (bytes covered by each address).
 */
struct bam_nvme_map {
	__u64 vaddr;     /* in */
	__u64 length;    /* in, bytes */
	__u64 addrs;     /* in: user pointer to __u64[addrs_len] (out array) */
	__u32 addrs_len; /* in: capacity of addrs in entries */
	__u32 flags;     /* in: BAM_NVME_MAP_* */
	__u64 handle;    /* out */
	__u32 entries;   /* out */
	__u32 page_size; /* out */
};

/* struct bam_nvme_unmap.flags_out */
/* the GPU memory was freed (NVIDIA free callback) before this unmap */
#define BAM_NVME_UNMAP_REVOKED (1U << 0)

/* struct bam_nvme_unmap.flags (in) */
/*
 * The caller states that no command it submitted can still reach the
 * mapping (the queues that used it were deleted, or every command on it
 * completed): the release is not deferred even while the controller runs.
 * A wrong statement brings back what deferral prevents, so only a driver
 * that knows (e.g. after deleting its queue pairs on a controller that
 * keeps serving others) sets it.
 */
#define BAM_NVME_UNMAP_QUIESCED (1U << 0)

struct bam_nvme_unmap {
	__u64 handle;    /* in */
	__u32 flags_out; /* out: BAM_NVME_UNMAP_* */
	__u32 flags;     /* in: BAM_NVME_UNMAP_QUIESCED or 0 */
};

#define BAM_NVME_IOC_MAGIC 'B'
#define BAM_NVME_IOC_INFO     _IOR(BAM_NVME_IOC_MAGIC, 0x00, struct bam_nvme_info)
#define BAM_NVME_IOC_MAP_HOST _IOWR(BAM_NVME_IOC_MAGIC, 0x01, struct bam_nvme_map)
#define BAM_NVME_IOC_MAP_GPU  _IOWR(BAM_NVME_IOC_MAGIC, 0x02, struct bam_nvme_map)
#define BAM_NVME_IOC_UNMAP    _IOWR(BAM_NVME_IOC_MAGIC, 0x03, struct bam_nvme_unmap)

#endif /* _UAPI_BAM_NVME_IOCTL_H */
