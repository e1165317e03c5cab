// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_nvme_bar.c - BAR0 (registers and doorbells) in the owner's address
 * space: mmap fills every PTE at once; the fault handler runs only after
 * the PTEs were zapped (unbind, remove, a PCIe error) and then refuses with
 * SIGBUS.
 */

#include <linux/mm.h>
#include <linux/module.h>

#include "bam_nvme.h"
#include "compat.h"

static vm_fault_t bam_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct bam_file *bf = vma->vm_private_data;
	struct bam_dev *bdev = bf->bdev;
	/*
	 * The page of BAR0 this address shows: vm_pgoff counts too (mmap
	 * takes offset 0 only, but a split VMA, e.g. after munmap of its
	 * first pages, carries the offset of its new start).
	 */
	unsigned long pgoff = vma->vm_pgoff + ((vmf->address - vma->vm_start) >> PAGE_SHIFT);
	vm_fault_t ret = VM_FAULT_SIGBUS;

	/* mmap_lock is held (read) by the caller: lock order is respected */
	down_read(&bdev->lock);
	if (!bam_usable(bf) && pgoff < (PAGE_ALIGN(bdev->bar_len) >> PAGE_SHIFT))
		ret = vmf_insert_pfn(vma, vmf->address,
				     (bdev->bar_start >> PAGE_SHIFT) + pgoff);
	up_read(&bdev->lock);
	return ret;
}

static const struct vm_operations_struct bam_vm_ops = {
	.fault = bam_vm_fault,
};

int bam_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct bam_file *bf = filp->private_data;
	struct bam_dev *bdev = bf->bdev;
	unsigned long size = vma->vm_end - vma->vm_start;
	unsigned long addr;
	int ret = 0;

	if (vma->vm_pgoff != 0)
		return -EINVAL;
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;	/* a private (COW) mapping of MMIO makes no sense */
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	if (current->mm != bf->mm)
		return -EPERM;

	down_read(&bdev->lock);
	ret = bam_usable(bf);
	if (ret)
		goto out;
	if (size > PAGE_ALIGN(bdev->bar_len)) {
		ret = -EINVAL;
		goto out;
	}
	bam_vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP |
			 VM_DONTCOPY);
	bam_vm_flags_clear(vma, VM_MAYEXEC);
	vma->vm_page_prot = pgprot_noncached(vma->vm_page_prot);
	vma->vm_ops = &bam_vm_ops;
	vma->vm_private_data = bf;

	/*
	 * Populate the whole range now: consumers such as
	 * cuMemHostRegister(IOMEMORY) look the PFNs up without faulting.
	 * After unbind, the PTEs are zapped and the fault handler refuses.
	 */
	for (addr = vma->vm_start; addr < vma->vm_end; addr += PAGE_SIZE) {
		vm_fault_t vf = vmf_insert_pfn(vma, addr,
			(bdev->bar_start >> PAGE_SHIFT) +
			((addr - vma->vm_start) >> PAGE_SHIFT));
		if (vf != VM_FAULT_NOPAGE) {
			ret = vf == VM_FAULT_OOM ? -ENOMEM : -EFAULT;
			break;
		}
	}
out:
	up_read(&bdev->lock);
	return ret;
}
