// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_nvme - char-device access to NVMe controllers for a user-space (and
 * GPU-resident) NVMe driver.
 *
 * The driver never binds on its own: its id table is empty, so a controller
 * is bound only through driver_override:
 *
 *   echo bam_nvme > /sys/bus/pci/devices/0000:01:00.0/driver_override
 *   echo 0000:01:00.0 > /sys/bus/pci/drivers/nvme/unbind     # if bound
 *   echo 0000:01:00.0 > /sys/bus/pci/drivers/bam_nvme/bind
 *
 * and probe refuses anything that is not an NVMe controller (class 010802).
 * See include/bam_nvme_ioctl.h for the user ABI and bam_nvme.h for the
 * object lifetimes and locking rules.
 *
 * This file: module init, the PCI driver (probe, remove, shutdown, PCIe
 * error recovery), the char device's open and release, and sysfs.
 */

#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/security.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "bam_nvme.h"
#include "compat.h"

#define BAM_MAX_DEVICES 256

static bool allow_unsafe_noiommu;
module_param(allow_unsafe_noiommu, bool, 0644);
MODULE_PARM_DESC(allow_unsafe_noiommu,
		 "Allow opening a controller whose DMA no IOMMU translates (no IOMMU, passthrough); taints the kernel (default off)");

static dev_t bam_devt;
static struct class *bam_class;
static DEFINE_IDA(bam_ida);

/* ---------------------------------------------------------------------- */
/* BAR0 held past unbind                                                   */

/*
 * Devices unbound while a file was open still hold BAR0 (see bam_remove).
 * When such a device then leaves the bus (sysfs remove, hot removal), the
 * PCI core frees its resources, BAR0 among them, after deleting it: a
 * region still requested inside BAR0 would be cut off from the resource
 * tree and pci_release_region() at the file's release would find nothing
 * ("Trying to free nonexistent resource", the region leaked).  The PCI bus
 * notifier gives the region back when the device is deleted; no driver can
 * bind a deleted device.
 */
static LIST_HEAD(bam_held_list);
static DEFINE_MUTEX(bam_held_mutex);

/* bdev->lock held for write */
static void bam_hold_region(struct bam_dev *bdev)
{
	bdev->region_held = true;
	mutex_lock(&bam_held_mutex);
	list_add_tail(&bdev->held_node, &bam_held_list);
	mutex_unlock(&bam_held_mutex);
}

/* bdev->lock held for write, bdev->region_held */
static void bam_release_held_region(struct bam_dev *bdev)
{
	mutex_lock(&bam_held_mutex);
	list_del_init(&bdev->held_node);
	mutex_unlock(&bam_held_mutex);
	bdev->region_held = false;
	pci_release_region(bdev->pdev, 0);
}

static int bam_pci_notify(struct notifier_block *nb, unsigned long action,
			  void *data)
{
	struct device *dev = data;
	struct bam_dev *bdev = NULL, *b;

	if (action != BUS_NOTIFY_DEL_DEVICE)
		return NOTIFY_DONE;
	mutex_lock(&bam_held_mutex);
	list_for_each_entry(b, &bam_held_list, held_node) {
		if (&b->pdev->dev == dev) {
			/* on the list, so its file (and reference) is still open */
			bdev = b;
			get_device(&bdev->dev);
			break;
		}
	}
	mutex_unlock(&bam_held_mutex);
	if (!bdev)
		return NOTIFY_DONE;
	down_write(&bdev->lock);
	if (bdev->region_held) {
		bam_release_held_region(bdev);
		dev_info(dev, "removed from the bus while open by pid %d: BAR0 released with the device\n",
			 bdev->owner ? bdev->owner->pid : 0);
	}
	up_write(&bdev->lock);
	put_device(&bdev->dev);
	return NOTIFY_OK;
}

static struct notifier_block bam_pci_nb = {
	.notifier_call = bam_pci_notify,
};

/* ---------------------------------------------------------------------- */
/* open / release                                                          */

static int bam_open(struct inode *inode, struct file *filp)
{
	struct bam_dev *bdev = container_of(inode->i_cdev, struct bam_dev, cdev);
	struct bam_file *bf;
	const char *iommu;
	int ret = 0;

	/*
	 * Whoever holds the file can make the controller DMA anywhere it is
	 * allowed to (anywhere at all without an IOMMU) and send any admin
	 * command (format, firmware update): like vfio's no-IOMMU mode, require
	 * CAP_SYS_RAWIO, and refuse under kernel lockdown (raw PCI access).
	 */
	if (!capable(CAP_SYS_RAWIO))
		return -EPERM;
	ret = security_locked_down(LOCKDOWN_PCI_ACCESS);
	if (ret)
		return ret;
	if (!current->mm)
		return -EINVAL;
	bf = kzalloc(sizeof(*bf), GFP_KERNEL);
	if (!bf)
		return -ENOMEM;

	down_write(&bdev->lock);
	if (!bdev->alive)
		ret = -ENODEV;
	else if (bdev->owner)
		ret = -EBUSY;
	else if (bdev->in_error) {
		dev_warn_ratelimited(&bdev->pdev->dev,
			"open refused: a PCIe error was reported and %s\n",
			bdev->dead ? "the device failed for good (remove it and rescan the bus)" :
			"its recovery has not finished (if it failed: unbind and bind the device again)");
		ret = -EIO;
	}
	/*
	 * Without IOMMU translation (none, passthrough) the controller can
	 * reach all of physical memory: like vfio's no-IOMMU mode, only when
	 * the administrator opted in, and then the kernel is tainted.
	 */
	else if (!(bam_iommu_flags(bdev->pdev, &iommu) & BAM_NVME_INFO_IOMMU_DMA)) {
		if (!READ_ONCE(allow_unsafe_noiommu)) {
			dev_warn_ratelimited(&bdev->pdev->dev,
				"open refused: DMA is not translated by an IOMMU (iommu %s); set the module parameter allow_unsafe_noiommu=1 to allow it (taints the kernel)\n",
				iommu);
			ret = -EPERM;
		} else {
			if (!bdev->noiommu_warned) {
				bdev->noiommu_warned = true;
				dev_warn(&bdev->pdev->dev,
					 "UNSAFE no-IOMMU use (iommu %s, allow_unsafe_noiommu=1) by pid %d: the controller can DMA to any memory; kernel tainted\n",
					 iommu, task_tgid_nr(current));
			}
			add_taint(TAINT_USER, LOCKDEP_STILL_OK);
		}
	} else {
		ret = bam_check_group_open(bdev->pdev);
	}
	if (ret) {
		up_write(&bdev->lock);
		kfree(bf);
		return ret;
	}
	xa_init_flags(&bf->maps, XA_FLAGS_ALLOC1);
	spin_lock_init(&bf->deferred_lock);
	INIT_LIST_HEAD(&bf->deferred);
	atomic_set(&bf->nr_deferred, 0);
	atomic_set(&bf->nr_maps, 0);
	atomic64_set(&bf->pinned_pages, 0);
	bf->bdev = bdev;
	bf->filp = filp;
	bf->mm = current->mm;
	mmgrab(bf->mm);
	bf->pid = task_tgid_nr(current);
	get_device(&bdev->dev);
	mutex_lock(&bdev->hw_lock);
	pci_set_master(bdev->pdev);
	mutex_unlock(&bdev->hw_lock);
	bdev->owner = bf;
	up_write(&bdev->lock);

	filp->private_data = bf;
	return nonseekable_open(inode, filp);
}

static int bam_release(struct inode *inode, struct file *filp)
{
	struct bam_file *bf = filp->private_data;
	struct bam_dev *bdev = bf->bdev;

	down_write(&bdev->lock);
	if (bdev->alive) {
		/*
		 * No DMA may target memory we unmap below.  After a PCIe error
		 * the DMA was stopped already and the registers may be out of
		 * reach or reset: no shutdown and its waits then.
		 */
		if (bf->failed)
			bam_revoke_controller(bdev);
		else
			bam_stop_controller(bdev);
		bam_teardown_all(bdev, bf);
	}
	/* after unbind, remove() already released every mapping */
	WARN_ON_ONCE(!xa_empty(&bf->maps) || !list_empty(&bf->deferred));
	bdev->owner = NULL;
	if (bdev->region_held) {
		/* unbound while open: only now may another driver take BAR0 */
		bam_release_held_region(bdev);
		dev_info(&bdev->pdev->dev,
			 "last file of the unbound device closed: BAR0 released\n");
	}
	up_write(&bdev->lock);

	xa_destroy(&bf->maps);
	mmdrop(bf->mm);
	put_device(&bdev->dev);
	kfree(bf);
	return 0;
}

static const struct file_operations bam_fops = {
	.owner = THIS_MODULE,
	.open = bam_open,
	.release = bam_release,
	.unlocked_ioctl = bam_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = bam_mmap,
	.llseek = noop_llseek,
};

/* ---------------------------------------------------------------------- */
/* sysfs                                                                   */

static ssize_t pci_addr_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	struct bam_dev *bdev = container_of(dev, struct bam_dev, dev);

	return sysfs_emit(buf, "%s\n", pci_name(bdev->pdev));
}
static DEVICE_ATTR_RO(pci_addr);

static ssize_t bar0_size_show(struct device *dev, struct device_attribute *attr,
			      char *buf)
{
	struct bam_dev *bdev = container_of(dev, struct bam_dev, dev);

	return sysfs_emit(buf, "%llu\n", (unsigned long long)bdev->bar_len);
}
static DEVICE_ATTR_RO(bar0_size);

static ssize_t iommu_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct bam_dev *bdev = container_of(dev, struct bam_dev, dev);
	const char *name;

	bam_iommu_flags(bdev->pdev, &name);
	return sysfs_emit(buf, "%s\n", name);
}
static DEVICE_ATTR_RO(iommu);

static ssize_t owner_pid_show(struct device *dev, struct device_attribute *attr,
			      char *buf)
{
	struct bam_dev *bdev = container_of(dev, struct bam_dev, dev);
	pid_t pid;

	down_read(&bdev->lock);
	pid = bdev->owner ? bdev->owner->pid : 0;
	up_read(&bdev->lock);
	return sysfs_emit(buf, "%d\n", pid);
}
static DEVICE_ATTR_RO(owner_pid);

static struct attribute *bam_attrs[] = {
	&dev_attr_pci_addr.attr,
	&dev_attr_bar0_size.attr,
	&dev_attr_iommu.attr,
	&dev_attr_owner_pid.attr,
	NULL,
};
ATTRIBUTE_GROUPS(bam);

/* ---------------------------------------------------------------------- */
/* PCI driver                                                              */

static void bam_dev_release(struct device *dev)
{
	struct bam_dev *bdev = container_of(dev, struct bam_dev, dev);

	ida_free(&bam_ida, bdev->minor);
	pci_dev_put(bdev->pdev);
	kfree(bdev);
}

static bool bam_is_nvme(struct pci_dev *pdev)
{
	return pdev->class == PCI_CLASS_STORAGE_EXPRESS; /* 0x010802 */
}

static int bam_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct bam_dev *bdev;
	const char *iommu;
	int minor, ret;

	if (!bam_is_nvme(pdev)) {
		dev_info(&pdev->dev, "class %06x is not an NVMe controller; not binding\n",
			 pdev->class);
		return -ENODEV;
	}
	if (!(pci_resource_flags(pdev, 0) & IORESOURCE_MEM) ||
	    pci_resource_len(pdev, 0) < PAGE_SIZE ||
	    !PAGE_ALIGNED(pci_resource_start(pdev, 0))) {
		dev_err(&pdev->dev, "BAR0 is not a page-aligned memory BAR\n");
		return -ENODEV;
	}

	minor = ida_alloc_max(&bam_ida, BAM_MAX_DEVICES - 1, GFP_KERNEL);
	if (minor < 0)
		return minor;
	bdev = kzalloc(sizeof(*bdev), GFP_KERNEL);
	if (!bdev) {
		ida_free(&bam_ida, minor);
		return -ENOMEM;
	}
	bdev->minor = minor;
	bdev->pdev = pci_dev_get(pdev);
	init_rwsem(&bdev->lock);
	mutex_init(&bdev->hw_lock);
	INIT_LIST_HEAD(&bdev->held_node);
	bdev->bar_start = pci_resource_start(pdev, 0);
	bdev->bar_len = pci_resource_len(pdev, 0);

	device_initialize(&bdev->dev);
	bdev->dev.class = bam_class;
	bdev->dev.parent = &pdev->dev;
	bdev->dev.devt = MKDEV(MAJOR(bam_devt), minor);
	bdev->dev.groups = bam_groups;
	bdev->dev.release = bam_dev_release;
	/* from here on, put_device() frees bdev, the minor and the pdev ref */
	ret = dev_set_name(&bdev->dev, "bam-nvme%d", minor);
	if (ret)
		goto err_put;

	ret = pci_enable_device_mem(pdev);
	if (ret)
		goto err_put;
	ret = pci_request_region(pdev, 0, BAM_DRV_NAME);
	if (ret)
		goto err_disable;
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(32));
	if (ret) {
		dev_err(&pdev->dev, "no usable DMA mask\n");
		goto err_release;
	}
	/*
	 * The config space the error recovery restores after a link reset:
	 * memory decoding on, bus mastering off (open turns it on).
	 */
	pci_clear_master(pdev);
	pci_save_state(pdev);
	bdev->regs = pci_iomap(pdev, 0, min_t(resource_size_t, bdev->bar_len, 4096));
	if (!bdev->regs) {
		ret = -ENOMEM;
		goto err_release;
	}

	bdev->hw_alive = true;
	bdev->alive = true;
	pci_set_drvdata(pdev, bdev);
	cdev_init(&bdev->cdev, &bam_fops);
	bdev->cdev.owner = THIS_MODULE;
	ret = cdev_device_add(&bdev->cdev, &bdev->dev);
	if (ret)
		goto err_unmap;

	bam_check_iommu(pdev, bam_iommu_flags(pdev, &iommu));
	dev_info(&pdev->dev, "bound as /dev/%s, BAR0 %pR, iommu %s\n",
		 dev_name(&bdev->dev), &pdev->resource[0], iommu);
	return 0;

err_unmap:
	pci_set_drvdata(pdev, NULL);
	bdev->alive = false;
	bdev->hw_alive = false;
	pci_iounmap(pdev, bdev->regs);
err_release:
	pci_release_region(pdev, 0);
err_disable:
	pci_disable_device(pdev);
err_put:
	put_device(&bdev->dev);
	return ret;
}

static void bam_remove(struct pci_dev *pdev)
{
	struct bam_dev *bdev = pci_get_drvdata(pdev);
	struct bam_file *owner;
	bool release_region;

	/* no new opens from here on */
	cdev_device_del(&bdev->cdev, &bdev->dev);

	down_write(&bdev->lock);
	owner = bdev->owner;
	if (owner) {
		/* as release(): no shutdown waits after a PCIe error */
		if (owner->failed)
			bam_revoke_controller(bdev);
		else
			bam_stop_controller(bdev);
		bam_teardown_all(bdev, owner);
		/*
		 * Drop the owner's BAR PTEs; with alive cleared below, the
		 * fault handler answers SIGBUS from now on.  The file (and so
		 * owner) stays valid while we hold the lock: release() needs it
		 * for write.
		 */
		unmap_mapping_range(owner->filp->f_mapping, 0, 0, 1);
		/*
		 * A BAR registered into a GPU (cuMemHostRegister IOMEMORY)
		 * is beyond our reach; keep BAR0 requested until the file is
		 * released so no driver (nvme) can bind and reuse it meanwhile
		 * (or, if the device leaves the bus, until it is deleted).
		 */
		bam_hold_region(bdev);
		dev_info(&pdev->dev,
			 "unbound while open by pid %d; mappings revoked, BAR0 kept reserved until the file is closed\n",
			 owner->pid);
	}
	bdev->alive = false;
	/* decided under the lock: release() gives the region back otherwise */
	release_region = !bdev->region_held;
	up_write(&bdev->lock);

	/* a free callback of a mapping released above has finished by now */
	mutex_lock(&bdev->hw_lock);
	bdev->hw_alive = false;
	pci_clear_master(pdev);
	mutex_unlock(&bdev->hw_lock);
	pci_iounmap(pdev, bdev->regs);
	if (release_region)
		pci_release_region(pdev, 0);
	pci_disable_device(pdev);
	pci_set_drvdata(pdev, NULL);
	put_device(&bdev->dev);
}

/*
 * Empty id table: the driver binds only to devices whose driver_override
 * names it, never to a controller on its own.
 */
static const struct pci_device_id bam_ids[] = {
	{ 0, }
};
MODULE_DEVICE_TABLE(pci, bam_ids);

/*
 * Reboot, kexec, power-off: a controller a process still drives must stop
 * its DMA before the next kernel (kexec) or firmware reuses the memory; the
 * shutdown notification also lets a real drive flush its volatile cache.
 */
static void bam_shutdown(struct pci_dev *pdev)
{
	struct bam_dev *bdev = pci_get_drvdata(pdev);

	if (bdev)
		bam_stop_controller(bdev);
}

/* ---------------------------------------------------------------------- */
/* PCIe error recovery (AER, DPC, EEH)                                     */

static const char *bam_channel_state_name(pci_channel_state_t state)
{
	if (state == pci_channel_io_normal)
		return "non-fatal";
	if (state == pci_channel_io_frozen)
		return "fatal, the link is reset next";
	return "permanent failure";
}

/*
 * An uncorrectable error was reported for the controller or the link above
 * it.  The owner's queues and commands are in an unknown state and, after a
 * fatal error, the link reset that follows resets the controller under
 * them.  So: stop its DMA at once, as the NVIDIA free callback does (bus
 * mastering off, then CC.EN = 0, no waits), and fail the open file: every
 * later ioctl and mmap returns EIO and its BAR PTEs are zapped (accesses
 * raise SIGBUS), so the user-space driver learns it on its next call
 * instead of driving a reset controller through stale state.  The file's
 * mappings stay until it is closed (the device is still bound, no DMA can
 * reach them).  Opens are refused until resume.
 *
 * The answers are those of Linux's nvme driver: a non-fatal error can
 * recover without a reset, a frozen link needs the reset (slot_reset then
 * restores the config space), a permanent failure disconnects.
 */
static pci_ers_result_t bam_error_detected(struct pci_dev *pdev,
					   pci_channel_state_t state)
{
	struct bam_dev *bdev = pci_get_drvdata(pdev);
	struct bam_file *owner;
	pid_t pid = 0;

	if (!bdev)
		return PCI_ERS_RESULT_NONE;
	bam_revoke_controller(bdev);

	down_write(&bdev->lock);
	bdev->in_error = true;
	if (state == pci_channel_io_perm_failure)
		bdev->dead = true;
	owner = bdev->alive ? bdev->owner : NULL;
	if (owner) {
		WRITE_ONCE(owner->failed, true);
		pid = owner->pid;
		/* the fault handler answers SIGBUS for a failed file */
		unmap_mapping_range(owner->filp->f_mapping, 0, 0, 1);
	}
	up_write(&bdev->lock);

	if (owner)
		dev_warn(&pdev->dev,
			 "PCIe error reported (%s): DMA stopped (bus mastering off, controller disabled); the file open by pid %d fails with EIO from now on: close it\n",
			 bam_channel_state_name(state), pid);
	else
		dev_warn(&pdev->dev,
			 "PCIe error reported (%s): DMA stopped (bus mastering off, controller disabled)\n",
			 bam_channel_state_name(state));

	if (state == pci_channel_io_normal)
		return PCI_ERS_RESULT_CAN_RECOVER;
	if (state == pci_channel_io_frozen)
		return PCI_ERS_RESULT_NEED_RESET;
	return PCI_ERS_RESULT_DISCONNECT;
}

/*
 * After the link reset: the controller's config space was reset (BARs,
 * memory decoding).  Restore what probe saved: memory decoding on, bus
 * mastering off (the next open turns it on); the controller itself was
 * reset and is disabled.
 */
static pci_ers_result_t bam_slot_reset(struct pci_dev *pdev)
{
	pci_restore_state(pdev);
	pci_save_state(pdev);
	dev_info(&pdev->dev, "config space restored after the reset\n");
	return PCI_ERS_RESULT_RECOVERED;
}

static void bam_error_resume(struct pci_dev *pdev)
{
	struct bam_dev *bdev = pci_get_drvdata(pdev);
	bool failed_open;

	if (!bdev)
		return;
	down_write(&bdev->lock);
	bdev->in_error = bdev->dead;
	failed_open = bdev->owner && READ_ONCE(bdev->owner->failed);
	up_write(&bdev->lock);
	dev_info(&pdev->dev, "recovered from the PCIe error%s\n",
		 failed_open ? "; the device opens again once the file open during the error is closed" : "");
}

static const struct pci_error_handlers bam_err_handlers = {
	.error_detected = bam_error_detected,
	.slot_reset = bam_slot_reset,
	.resume = bam_error_resume,
};

static struct pci_driver bam_driver = {
	.name = BAM_DRV_NAME,
	.id_table = bam_ids,
	.probe = bam_probe,
	.remove = bam_remove,
	.shutdown = bam_shutdown,
	.err_handler = &bam_err_handlers,
};

static int __init bam_init(void)
{
	int ret;

	if (bam_max_map_bytes < BAM_GPU_PAGE_SIZE) {
		pr_err(BAM_DRV_NAME ": max_map_bytes must be at least 64 KiB\n");
		return -EINVAL;
	}
	ret = alloc_chrdev_region(&bam_devt, 0, BAM_MAX_DEVICES, "bam-nvme");
	if (ret)
		return ret;
	bam_class = bam_class_create("bam-nvme");
	if (IS_ERR(bam_class)) {
		ret = PTR_ERR(bam_class);
		goto err_region;
	}
	ret = bus_register_notifier(&pci_bus_type, &bam_pci_nb);
	if (ret)
		goto err_class;
	ret = pci_register_driver(&bam_driver);
	if (ret)
		goto err_notifier;
	pr_info(BAM_DRV_NAME ": loaded (nvidia_p2p support %s)\n",
		bam_p2p_built() ? "built in, resolved at map time" : "not built");
	return 0;

err_notifier:
	bus_unregister_notifier(&pci_bus_type, &bam_pci_nb);
err_class:
	class_destroy(bam_class);
err_region:
	unregister_chrdev_region(bam_devt, BAM_MAX_DEVICES);
	return ret;
}

static void __exit bam_exit(void)
{
	pci_unregister_driver(&bam_driver);
	/* no device holds BAR0 now: an open file would pin the module */
	bus_unregister_notifier(&pci_bus_type, &bam_pci_nb);
	class_destroy(bam_class);
	unregister_chrdev_region(bam_devt, BAM_MAX_DEVICES);
	ida_destroy(&bam_ida);
}

module_init(bam_init);
module_exit(bam_exit);

MODULE_DESCRIPTION("Char-device access to NVMe controllers for user-space and GPU-initiated I/O");
MODULE_AUTHOR("The bam-rs authors");
MODULE_LICENSE("Dual MIT/GPL");