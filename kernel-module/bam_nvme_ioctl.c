// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_nvme_ioctl.c - the ioctls of an open /dev/bam-nvmeN (see
 * include/bam_nvme_ioctl.h): copying requests in and results out, the
 * checks every request gets, and the dispatch to host mappings
 * (bam_nvme_dma.c) and GPU mappings (bam_nvme_p2p.c).
 */

#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "bam_nvme.h"

/* Copy the result of a MAP ioctl out; undo the mapping if that fails. */
static long bam_map_copy_out(struct bam_file *bf, void __user *uarg,
			     struct bam_nvme_map *req, const u64 *addrs)
{
	if (copy_to_user(u64_to_user_ptr(req->addrs), addrs,
			 (size_t)req->entries * sizeof(u64)) ||
	    copy_to_user(uarg, req, sizeof(*req))) {
		bam_unmap_handle(bf, req->handle, NULL, false);
		return -EFAULT;
	}
	return 0;
}

static long bam_ioctl_map_host(struct bam_file *bf, void __user *uarg)
{
	struct bam_nvme_map req;
	u64 *addrs = NULL;
	long ret;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.flags)
		return -EINVAL;
	ret = bam_check_map_req(&req, PAGE_SIZE, true);
	if (ret)
		return ret;
	if (current->mm != bf->mm)
		return -EPERM;
	if (READ_ONCE(bf->revoked))
		return -ENOTRECOVERABLE;
	if (bam_maps_full(bf))
		return -ENOSPC;

	ret = bam_host_map(bf, &req, &addrs);
	if (ret)
		return ret;
	ret = bam_map_copy_out(bf, uarg, &req, addrs);
	kvfree(addrs);
	return ret;
}

static long bam_ioctl_map_gpu(struct bam_file *bf, void __user *uarg)
{
	struct bam_nvme_map req;
	u64 *addrs = NULL;
	long ret;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.flags & ~BAM_NVME_MAP_GPU_PERSISTENT)
		return -EINVAL;
	ret = bam_check_map_req(&req, BAM_GPU_PAGE_SIZE, false);
	if (ret)
		return ret;
	if (current->mm != bf->mm)
		return -EPERM;
	if (!bam_p2p_built())
		return -EOPNOTSUPP;
	if (READ_ONCE(bf->revoked))
		return -ENOTRECOVERABLE;
	if (bam_maps_full(bf))
		return -ENOSPC;

	ret = bam_p2p_map(bf, &req, &addrs);
	if (ret)
		return ret;
	ret = bam_map_copy_out(bf, uarg, &req, addrs);
	kvfree(addrs);
	return ret;
}

static long bam_ioctl_unmap(struct bam_file *bf, void __user *uarg)
{
	struct bam_nvme_unmap req;
	long ret;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.flags & ~BAM_NVME_UNMAP_QUIESCED)
		return -EINVAL;
	if (current->mm != bf->mm)
		return -EPERM;
	req.flags_out = 0;
	ret = bam_unmap_handle(bf, req.handle, &req.flags_out,
			       req.flags & BAM_NVME_UNMAP_QUIESCED);
	if (ret)
		return ret;
	/* the mapping is gone either way; report flags if we can */
	if (copy_to_user(uarg, &req, sizeof(req)))
		return -EFAULT;
	return 0;
}

static long bam_ioctl_info(struct bam_file *bf, void __user *uarg)
{
	struct bam_dev *bdev = bf->bdev;
	struct pci_dev *pdev = bdev->pdev;
	struct bam_nvme_info info;
	const char *name;
	long ret;

	memset(&info, 0, sizeof(info));
	down_read(&bdev->lock);
	ret = bam_usable(bf);
	if (ret) {
		up_read(&bdev->lock);
		return ret;
	}
	info.abi_version = BAM_NVME_ABI_VERSION;
	info.flags = bam_iommu_flags(pdev, &name);
	if (bam_p2p_built())
		info.flags |= BAM_NVME_INFO_P2P_BUILT;
	if (bam_p2p_available())
		info.flags |= BAM_NVME_INFO_P2P_AVAILABLE;
	if (READ_ONCE(bf->revoked))
		info.flags |= BAM_NVME_INFO_REVOKED;
	info.pci_domain = pci_domain_nr(pdev->bus);
	info.pci_bus = pdev->bus->number;
	info.pci_device = PCI_SLOT(pdev->devfn);
	info.pci_function = PCI_FUNC(pdev->devfn);
	info.vendor_id = pdev->vendor;
	info.device_id = pdev->device;
	info.class_code = pdev->class;
	info.bar0_size = bdev->bar_len;
	info.max_map_bytes = bam_max_map_bytes;
	info.max_mappings = bam_max_mappings;
	info.page_size = PAGE_SIZE;
	info.nr_mappings = atomic_read(&bf->nr_maps);
	info.deferred_mappings = atomic_read(&bf->nr_deferred);
	info.pinned_bytes = (u64)atomic64_read(&bf->pinned_pages) << PAGE_SHIFT;
	info.dma_mask = dma_get_mask(&pdev->dev);
	up_read(&bdev->lock);

	if (copy_to_user(uarg, &info, sizeof(info)))
		return -EFAULT;
	return 0;
}

long bam_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct bam_file *bf = filp->private_data;
	void __user *uarg = (void __user *)arg;

	/* a PCIe error failed the file (checked again under bdev->lock) */
	if (READ_ONCE(bf->failed))
		return -EIO;
	switch (cmd) {
	case BAM_NVME_IOC_INFO:
		return bam_ioctl_info(bf, uarg);
	case BAM_NVME_IOC_MAP_HOST:
		return bam_ioctl_map_host(bf, uarg);
	case BAM_NVME_IOC_MAP_GPU:
		return bam_ioctl_map_gpu(bf, uarg);
	case BAM_NVME_IOC_UNMAP:
		return bam_ioctl_unmap(bf, uarg);
	default:
		return -ENOTTY;
	}
}
