// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_nvme_iommu.c - what the IOMMU does for a controller's DMA: whether it
 * is translated and how strictly it is invalidated, and whether another
 * driver shares the controller's IOMMU group (open refuses that unless
 * allow_shared_iommu_group=1).  Calls nothing else of the module.
 */

#include <linux/iommu.h>
#include <linux/module.h>
#include <linux/string.h>

#include "bam_nvme.h"

static bool allow_shared_iommu_group;
module_param(allow_shared_iommu_group, bool, 0644);
MODULE_PARM_DESC(allow_shared_iommu_group,
		 "Allow opening a controller whose IOMMU group holds devices bound to other drivers, which share its DMA translations (default off)");

u32 bam_iommu_flags(struct pci_dev *pdev, const char **name)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(&pdev->dev);

	if (!dom) {
		*name = "none";
		return 0;
	}
	if (dom->type == IOMMU_DOMAIN_IDENTITY) {
		*name = "passthrough";
		return BAM_NVME_INFO_IOMMU_PASSTHROUGH;
	}
	if (dom->type & __IOMMU_DOMAIN_DMA_API) {
		*name = "dma";
		/* flush queue: an unmapped IOVA may stay usable for a while */
		if (dom->type & __IOMMU_DOMAIN_DMA_FQ)
			return BAM_NVME_INFO_IOMMU_DMA | BAM_NVME_INFO_IOMMU_LAZY;
		return BAM_NVME_INFO_IOMMU_DMA;
	}
	*name = "other";
	return 0;
}

/*
 * Whether the device's DMA is translated by an IOMMU that invalidates
 * strictly: an unmapped bus address then faults at once instead of
 * reaching the (soon reused) page.
 */
bool bam_dma_strict(struct pci_dev *pdev)
{
	const char *name;
	u32 f = bam_iommu_flags(pdev, &name);

	return (f & BAM_NVME_INFO_IOMMU_DMA) && !(f & BAM_NVME_INFO_IOMMU_LAZY);
}

/*
 * The first device of an IOMMU group, other than `self`, that is bound to
 * another driver: its driver can have its device DMA with this controller's
 * translations (the group shares one domain), so it can reach every buffer
 * mapped for the controller, and the controller every buffer mapped for it.
 * Bridges (they forward, they own no buffers) and other controllers bound
 * to this module are not counted.  dev->driver is read without the device
 * lock (the group's mutex is held, and taking device locks inside it would
 * invert the order probe takes them in): the answer is a snapshot.
 */
struct bam_group_scan {
	struct device *self;
	unsigned int devices;
	struct device *foreign;		/* referenced; put by the caller */
	char driver[32];
};

static int bam_scan_group_dev(struct device *dev, void *data)
{
	struct bam_group_scan *s = data;
	const struct device_driver *drv = READ_ONCE(dev->driver);

	s->devices++;
	if (dev == s->self || !drv || s->foreign)
		return 0;
	if (dev_is_pci(dev) && pci_is_bridge(to_pci_dev(dev)))
		return 0;
	if (!strcmp(drv->name, BAM_DRV_NAME))
		return 0;
	s->foreign = get_device(dev);
	strscpy(s->driver, drv->name, sizeof(s->driver));
	return 0;
}

static void bam_scan_group(struct pci_dev *pdev, struct bam_group_scan *s)
{
	struct iommu_group *grp = iommu_group_get(&pdev->dev);

	memset(s, 0, sizeof(*s));
	s->self = &pdev->dev;
	if (!grp)
		return;
	iommu_group_for_each_dev(grp, s, bam_scan_group_dev);
	iommu_group_put(grp);
}

/*
 * Under IOMMU translation, a group member bound to another driver shares the
 * controller's translations: refused (EPERM) unless the administrator set
 * allow_shared_iommu_group=1.
 */
int bam_check_group_open(struct pci_dev *pdev)
{
	struct bam_group_scan s;

	bam_scan_group(pdev, &s);
	if (!s.foreign)
		return 0;
	if (READ_ONCE(allow_shared_iommu_group))
		dev_warn_ratelimited(&pdev->dev,
			"IOMMU group shared with %s (bound to %s): allowed by allow_shared_iommu_group=1; that device can reach this controller's buffers and it theirs\n",
			dev_name(s.foreign), s.driver);
	else
		dev_warn_ratelimited(&pdev->dev,
			"open refused: the IOMMU group is shared with %s (bound to %s), which shares this controller's DMA translations; unbind it (or bind it to bam_nvme or vfio-pci), or set the module parameter allow_shared_iommu_group=1\n",
			dev_name(s.foreign), s.driver);
	put_device(s.foreign);
	return READ_ONCE(allow_shared_iommu_group) ? 0 : -EPERM;
}

/*
 * What the module says once at bind time: lazy IOTLB invalidation, and
 * other devices sharing the IOMMU group (open refuses while one of them is
 * bound to another driver, unless allow_shared_iommu_group=1; vfio likewise
 * requires the whole group to be viable).
 */
void bam_check_iommu(struct pci_dev *pdev, u32 iommu_flags)
{
	struct bam_group_scan s;

	if (iommu_flags & BAM_NVME_INFO_IOMMU_LAZY)
		dev_warn(&pdev->dev,
			 "IOMMU uses lazy invalidation (DMA-FQ): an unmapped page may stay reachable briefly; use iommu.strict=1 or set the group type to DMA\n");
	bam_scan_group(pdev, &s);
	if (s.foreign) {
		dev_warn(&pdev->dev,
			 "IOMMU group shared with %s (bound to %s), which shares this controller's DMA translations: open is refused unless allow_shared_iommu_group=1\n",
			 dev_name(s.foreign), s.driver);
		put_device(s.foreign);
	} else if (s.devices > 1) {
		dev_info(&pdev->dev,
			 "IOMMU group has %u devices, none bound to another driver\n",
			 s.devices);
	}
}
