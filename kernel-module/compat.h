/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * compat.h - the few kernel API differences between Debian bookworm's 6.1
 * and current kernels (6.8, 6.12 and later) that bam_nvme meets.
 */
#ifndef BAM_COMPAT_H
#define BAM_COMPAT_H

#include <linux/device.h>
#include <linux/mm.h>
#include <linux/version.h>

/* 6.3 made vma->vm_flags read-only and added the setters. */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 3, 0)
static inline void bam_vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void bam_vm_flags_clear(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#else
#define bam_vm_flags_set(vma, flags) vm_flags_set(vma, flags)
#define bam_vm_flags_clear(vma, flags) vm_flags_clear(vma, flags)
#endif

/* 6.4 dropped the owner argument of class_create(). */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 4, 0)
#define bam_class_create(name) class_create(THIS_MODULE, name)
#else
#define bam_class_create(name) class_create(name)
#endif

#endif /* BAM_COMPAT_H */
