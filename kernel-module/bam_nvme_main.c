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
 */

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/io.h>
#include <linux/iommu.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/security.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "bam_nvme.h"
#include "compat.h"

#define BAM_MAX_DEVICES 256

/* NVMe controller registers used to quiesce a controller on release. */
#define NVME_REG_CAP   0x00
#define NVME_REG_CC    0x14
#define NVME_REG_CSTS  0x1c
#define NVME_CC_EN            (1U << 0)
#define NVME_CC_SHN_MASK      (3U << 14)
#define NVME_CC_SHN_NORMAL    (1U << 14)
#define NVME_CSTS_RDY         (1U << 0)
#define NVME_CSTS_CFS         (1U << 1)
#define NVME_CSTS_SHST_MASK   (3U << 2)
#define NVME_CSTS_SHST_CMPLT  (2U << 2)

static unsigned int max_mappings = 16384;
module_param(max_mappings, uint, 0444);
MODULE_PARM_DESC(max_mappings, "Most mappings one open file may hold (default 16384)");

unsigned long bam_max_map_bytes = 1UL << 30;
module_param_named(max_map_bytes, bam_max_map_bytes, ulong, 0444);
MODULE_PARM_DESC(max_map_bytes, "Largest length of one MAP ioctl in bytes (default 1 GiB)");

static unsigned int quiesce_timeout_ms = 10000;
module_param(quiesce_timeout_ms, uint, 0644);
MODULE_PARM_DESC(quiesce_timeout_ms,
		 "Upper bound on waiting for controller shutdown/disable on release (default 10000)");

static bool force_deferred_unmap;
module_param(force_deferred_unmap, bool, 0644);
MODULE_PARM_DESC(force_deferred_unmap,
		 "Defer UNMAP of mappings while the controller is enabled even under a strict IOMMU (testing; default off)");

static unsigned int max_deferred_mappings = 1024;
module_param(max_deferred_mappings, uint, 0644);
MODULE_PARM_DESC(max_deferred_mappings,
		 "MAP_* fail with ENOSPC while an open file has this many deferred unmaps pending (default 1024)");

static bool allow_unsafe_noiommu;
module_param(allow_unsafe_noiommu, bool, 0644);
MODULE_PARM_DESC(allow_unsafe_noiommu,
		 "Allow opening a controller whose DMA no IOMMU translates (no IOMMU, passthrough); taints the kernel (default off)");

static bool allow_shared_iommu_group;
module_param(allow_shared_iommu_group, bool, 0644);
MODULE_PARM_DESC(allow_shared_iommu_group,
		 "Allow opening a controller whose IOMMU group holds devices bound to other drivers, which share its DMA translations (default off)");

static dev_t bam_devt;
static struct class *bam_class;
static DEFINE_IDA(bam_ida);

/* ---------------------------------------------------------------------- */
/* controller quiesce                                                      */

/*
 * Wait until (CSTS & mask) == want, or timeout.  Returns true on success.
 * All-ones reads mean the device fell off the bus: give up at once.
 */
static bool bam_wait_csts(struct bam_dev *bdev, u32 mask, u32 want,
			  unsigned int timeout_ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	u32 csts;

	for (;;) {
		csts = readl(bdev->regs + NVME_REG_CSTS);
		if (csts == ~0U)
			return false;
		if ((csts & mask) == want)
			return true;
		if (time_after(jiffies, deadline))
			return false;
		usleep_range(1000, 2000);
	}
}

/*
 * Stop the controller from doing any further DMA into memory we are about
 * to unmap: normal shutdown notification (so a real drive flushes its
 * volatile cache), then CC.EN = 0, which aborts every outstanding command.
 * Called with bdev->hw_lock held and bdev->hw_alive.
 */
static void bam_quiesce(struct bam_dev *bdev)
{
	u32 cap_lo, cc, csts;
	unsigned int timeout_ms;

	cap_lo = readl(bdev->regs + NVME_REG_CAP);
	cc = readl(bdev->regs + NVME_REG_CC);
	csts = readl(bdev->regs + NVME_REG_CSTS);
	if (cc == ~0U || csts == ~0U) {
		dev_warn(&bdev->pdev->dev, "controller not responding; not quiesced\n");
		return;
	}
	if (!(cc & NVME_CC_EN))
		return;

	/* CAP.TO: worst-case ready transition time in 500 ms units */
	timeout_ms = min_t(unsigned int, ((cap_lo >> 24) & 0xff) * 500 + 500,
			   quiesce_timeout_ms);

	if ((csts & NVME_CSTS_RDY) && !(csts & NVME_CSTS_CFS)) {
		writel((cc & ~NVME_CC_SHN_MASK) | NVME_CC_SHN_NORMAL,
		       bdev->regs + NVME_REG_CC);
		if (!bam_wait_csts(bdev, NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_CMPLT,
				   timeout_ms))
			dev_warn(&bdev->pdev->dev, "shutdown did not complete\n");
	}
	writel(cc & ~(NVME_CC_EN | NVME_CC_SHN_MASK), bdev->regs + NVME_REG_CC);
	if (!bam_wait_csts(bdev, NVME_CSTS_RDY, 0, timeout_ms))
		dev_warn(&bdev->pdev->dev, "controller did not become not-ready\n");
	else
		dev_dbg(&bdev->pdev->dev, "controller quiesced\n");
}

void bam_stop_controller(struct bam_dev *bdev)
{
	mutex_lock(&bdev->hw_lock);
	if (bdev->hw_alive) {
		bam_quiesce(bdev);
		pci_clear_master(bdev->pdev);
	}
	mutex_unlock(&bdev->hw_lock);
}

/*
 * Stop the controller's DMA at once, for the NVIDIA free callback (memory
 * is being taken away; the callback must not sleep for the shutdown's
 * bounded waits, up to twice quiesce_timeout_ms): bus mastering off first
 * (the function can no longer issue memory requests; the config write's
 * completion follows every DMA write the device issued before it), then
 * CC.EN = 0 to abort what is outstanding, without waiting for RDY. No
 * shutdown notification: the next owner resets the controller before use.
 * The only wait is for hw_lock, held at most for one bam_quiesce.
 */
void bam_revoke_controller(struct bam_dev *bdev)
{
	u32 cc;

	mutex_lock(&bdev->hw_lock);
	if (bdev->hw_alive) {
		pci_clear_master(bdev->pdev);
		cc = readl(bdev->regs + NVME_REG_CC);
		if (cc != ~0U && (cc & NVME_CC_EN))
			writel(cc & ~(NVME_CC_EN | NVME_CC_SHN_MASK), bdev->regs + NVME_REG_CC);
	}
	mutex_unlock(&bdev->hw_lock);
}

/* ---------------------------------------------------------------------- */
/* mappings                                                                */

static int bam_account_pinned(struct bam_file *bf, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	s64 total;

	total = atomic64_add_return(npages, &bf->mm->pinned_vm);
	if (total > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &bf->mm->pinned_vm);
		return -ENOMEM;
	}
	atomic64_add(npages, &bf->pinned_pages);
	return 0;
}

static void bam_unaccount_pinned(struct bam_file *bf, unsigned long npages)
{
	atomic64_sub(npages, &bf->mm->pinned_vm);
	atomic64_sub(npages, &bf->pinned_pages);
}

/* Release the pins and memory of a host mapping whose DMA mapping is gone. */
static void bam_host_free(struct bam_file *bf, struct bam_map *m,
			  unsigned long npinned)
{
	if (npinned)
		unpin_user_pages_dirty_lock(m->host.pages, npinned, true);
	if (m->host.sgt.sgl)
		sg_free_table(&m->host.sgt);
	kvfree(m->host.pages);
	bam_unaccount_pinned(bf, m->host.npages);
	kfree(m);
}

/*
 * DMA-unmap, unpin and free one mapping.  The caller owns m (took it out of
 * bf->maps or bf->deferred) and holds bdev->lock (read or write) with
 * bdev->alive.
 */
static void bam_map_free(struct bam_dev *bdev, struct bam_file *bf,
			 struct bam_map *m, u32 *flags_out)
{
	if (m->kind == BAM_MAP_HOST) {
		if (m->host.dma_mapped)
			dma_unmap_sgtable(&bdev->pdev->dev, &m->host.sgt,
					  DMA_BIDIRECTIONAL, 0);
		bam_host_free(bf, m, m->host.npages);
	} else {
		bam_p2p_unmap(bdev, m, flags_out);
		bam_p2p_free(m);
	}
}

/* Tear down a mapping taken out of bf->maps (locking as bam_map_free). */
static void bam_map_release(struct bam_dev *bdev, struct bam_file *bf,
			    struct bam_map *m, u32 *flags_out)
{
	atomic_dec(&bf->nr_maps);
	bam_map_free(bdev, bf, m, flags_out);
}

/*
 * Free every deferred mapping of bf.  Only once the controller is known to
 * be stopped (no command in flight can still DMA).  bdev->lock held (read
 * or write) with bdev->alive.  Returns how many were freed.
 */
static unsigned int bam_free_deferred(struct bam_dev *bdev, struct bam_file *bf)
{
	struct bam_map *m, *tmp;
	LIST_HEAD(list);
	unsigned int n = 0;

	spin_lock(&bf->deferred_lock);
	list_splice_init(&bf->deferred, &list);
	spin_unlock(&bf->deferred_lock);
	list_for_each_entry_safe(m, tmp, &list, deferred_node) {
		list_del(&m->deferred_node);
		atomic_dec(&bf->nr_deferred);
		bam_map_free(bdev, bf, m, NULL);
		n++;
	}
	return n;
}

/* Release every mapping of bf.  bdev->lock held for write, bdev->alive. */
static void bam_teardown_all(struct bam_dev *bdev, struct bam_file *bf)
{
	struct bam_map *m;
	unsigned long idx;
	unsigned int n = 0;

	xa_for_each(&bf->maps, idx, m) {
		if (xa_erase(&bf->maps, idx) != m)
			continue;
		bam_map_release(bdev, bf, m, NULL);
		n++;
	}
	n += bam_free_deferred(bdev, bf);
	if (n)
		dev_info(&bdev->pdev->dev, "released %u mapping(s) of pid %d\n",
			 n, bf->pid);
}

/*
 * Validate a MAP request's range.  granule is the page size the addresses
 * are returned in (host page or 64 KiB GPU page).
 */
static int bam_check_map_req(const struct bam_nvme_map *req,
			     unsigned long granule, bool user_range)
{
	u64 end, n;

	if (req->length == 0)
		return -EINVAL;
	if (!IS_ALIGNED(req->vaddr, granule) || !IS_ALIGNED(req->length, granule))
		return -EINVAL;
	if (check_add_overflow(req->vaddr, req->length, &end))
		return -EOVERFLOW;
	if (req->length > bam_max_map_bytes)
		return -E2BIG;
	n = req->length / granule;
	if (req->addrs_len < n)
		return -ENOBUFS;
	if (!access_ok(u64_to_user_ptr(req->addrs), n * sizeof(u64)))
		return -EFAULT;
	if (user_range && !access_ok(u64_to_user_ptr(req->vaddr), req->length))
		return -EFAULT;
	return 0;
}

/* Give m a handle in bf->maps.  Returns the handle or a negative errno. */
int bam_insert_map(struct bam_file *bf, struct bam_map *m, u32 *handle)
{
	int ret;

	if (atomic_inc_return(&bf->nr_maps) > (int)max_mappings) {
		atomic_dec(&bf->nr_maps);
		return -ENOSPC;
	}
	/* cyclic: a stale handle does not name a new mapping soon after */
	ret = xa_alloc_cyclic(&bf->maps, handle, m, XA_LIMIT(1, U32_MAX),
			      &bf->next_handle, GFP_KERNEL);
	if (ret < 0) {
		atomic_dec(&bf->nr_maps);
		return ret == -EBUSY ? -ENOSPC : ret;
	}
	return 0;
}

static u32 bam_iommu_flags(struct pci_dev *pdev, const char **name);

/*
 * Whether the device's DMA is translated by an IOMMU that invalidates
 * strictly: an unmapped bus address then faults at once instead of
 * reaching the (soon reused) page.
 */
static bool bam_dma_strict(struct pci_dev *pdev)
{
	const char *name;
	u32 f = bam_iommu_flags(pdev, &name);

	return (f & BAM_NVME_INFO_IOMMU_DMA) && !(f & BAM_NVME_INFO_IOMMU_LAZY);
}

/*
 * Whether the controller may still be processing commands: CC.EN or
 * CSTS.RDY set (a controller that went 1 -> 0 on both has aborted every
 * command and does no more DMA).  An unreadable controller counts as
 * enabled: we cannot tell.
 */
static bool bam_controller_enabled(struct bam_dev *bdev)
{
	bool en = false;
	u32 cc, csts;

	mutex_lock(&bdev->hw_lock);
	if (bdev->hw_alive) {
		cc = readl(bdev->regs + NVME_REG_CC);
		csts = readl(bdev->regs + NVME_REG_CSTS);
		en = cc == ~0U || csts == ~0U || (cc & NVME_CC_EN) ||
		     (csts & NVME_CSTS_RDY);
	}
	mutex_unlock(&bdev->hw_lock);
	return en;
}

/*
 * No command of bf's can DMA any more: the controller is disabled, or a
 * revocation stopped it with bus mastering off.
 */
static bool bam_controller_stopped(struct bam_dev *bdev, struct bam_file *bf)
{
	return READ_ONCE(bf->revoked) || !bam_controller_enabled(bdev);
}

static int bam_unmap_handle(struct bam_file *bf, u64 handle, u32 *flags_out,
			    bool quiesced)
{
	struct bam_dev *bdev = bf->bdev;
	bool may_defer, stopped;
	struct bam_map *m;
	int ret = 0;

	if (handle == 0 || handle > U32_MAX)
		return -ENOENT;
	down_read(&bdev->lock);
	if (!bdev->alive) {
		ret = -ENODEV;
		goto out;
	}
	m = xa_erase(&bf->maps, (unsigned long)handle);
	if (!m) {
		ret = -ENOENT;
		goto out;
	}
	/*
	 * UNMAP must not release pages a command in flight may still DMA
	 * into: defer while the controller runs, unless a strict IOMMU turns
	 * a late access into a fault (force_deferred_unmap defers even then,
	 * for tests), or the caller states that nothing can reach the mapping
	 * any more (BAM_NVME_UNMAP_QUIESCED).  The registers are read only when
	 * it matters.
	 */
	may_defer = !quiesced &&
		    (READ_ONCE(force_deferred_unmap) || !bam_dma_strict(bdev->pdev));
	stopped = (may_defer || atomic_read(&bf->nr_deferred)) &&
		  bam_controller_stopped(bdev, bf);
	if (may_defer && !stopped) {
		/* still pinned and DMA-mapped; freed when the controller stops */
		atomic_dec(&bf->nr_maps);
		atomic_inc(&bf->nr_deferred);
		spin_lock(&bf->deferred_lock);
		list_add_tail(&m->deferred_node, &bf->deferred);
		spin_unlock(&bf->deferred_lock);
		dev_dbg(&bdev->pdev->dev, "UNMAP of handle %llu deferred\n", handle);
		goto out;
	}
	bam_map_release(bdev, bf, m, flags_out);
	/* the controller is stopped: what was deferred can go too */
	if (stopped)
		bam_free_deferred(bdev, bf);
out:
	up_read(&bdev->lock);
	return ret;
}

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

/*
 * MAP_* refuse (ENOSPC) while the file holds max_mappings mappings or has
 * max_deferred_mappings deferred unmaps pending.
 */
static bool bam_maps_full(struct bam_file *bf)
{
	return atomic_read(&bf->nr_maps) >= (int)max_mappings ||
	       atomic_read(&bf->nr_deferred) >= (int)READ_ONCE(max_deferred_mappings);
}

static long bam_ioctl_map_host(struct bam_file *bf, void __user *uarg)
{
	struct bam_dev *bdev = bf->bdev;
	struct device *dma_dev = &bdev->pdev->dev;
	struct bam_nvme_map req;
	struct scatterlist *sg;
	unsigned long npages, pinned = 0, idx = 0;
	unsigned int max_seg, i;
	struct bam_map *m;
	u64 *addrs = NULL;
	u32 handle;
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
	npages = req.length >> PAGE_SHIFT;
	if (bam_maps_full(bf))
		return -ENOSPC;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->kind = BAM_MAP_HOST;
	m->vaddr = req.vaddr;
	m->length = req.length;
	m->host.npages = npages;
	ret = bam_account_pinned(bf, npages);
	if (ret) {
		kfree(m);
		return ret;
	}
	m->host.pages = kvmalloc_array(npages, sizeof(*m->host.pages), GFP_KERNEL);
	addrs = kvmalloc_array(npages, sizeof(*addrs), GFP_KERNEL);
	if (!m->host.pages || !addrs) {
		ret = -ENOMEM;
		goto err_free;
	}

	/* No bam_dev.lock here: pinning takes mmap_lock (see bam_nvme.h). */
	while (pinned < npages) {
		int n = pin_user_pages_fast(req.vaddr + (pinned << PAGE_SHIFT),
					    min_t(unsigned long, npages - pinned, INT_MAX),
					    FOLL_WRITE | FOLL_LONGTERM,
					    m->host.pages + pinned);
		if (n <= 0) {
			ret = n ? n : -EFAULT;
			goto err_free;
		}
		pinned += n;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto err_free;
		}
	}

	max_seg = min_t(unsigned int, dma_get_max_seg_size(dma_dev), UINT_MAX);
	max_seg = max_t(unsigned int, ALIGN_DOWN(max_seg, PAGE_SIZE), PAGE_SIZE);
	ret = sg_alloc_table_from_pages_segment(&m->host.sgt, m->host.pages, npages,
						0, req.length, max_seg, GFP_KERNEL);
	if (ret)
		goto err_free;

	down_read(&bdev->lock);
	if (!bdev->alive) {
		ret = -ENODEV;
		goto err_unlock;
	}
	ret = dma_map_sgtable(dma_dev, &m->host.sgt, DMA_BIDIRECTIONAL, 0);
	if (ret)
		goto err_unlock;
	m->host.dma_mapped = true;

	/* One bus address per host page; every DMA segment is page-granular. */
	for_each_sgtable_dma_sg(&m->host.sgt, sg, i) {
		dma_addr_t a = sg_dma_address(sg);
		unsigned int len = sg_dma_len(sg), off;

		if (!PAGE_ALIGNED(a) || !PAGE_ALIGNED(len)) {
			ret = -EIO;
			break;
		}
		for (off = 0; off < len && idx < npages; off += PAGE_SIZE)
			addrs[idx++] = a + off;
	}
	if (!ret && idx != npages)
		ret = -EIO;
	if (ret) {
		dev_err(dma_dev, "DMA mapping of %lu pages is not page-granular\n",
			npages);
		goto err_dma;
	}
	ret = bam_insert_map(bf, m, &handle);
	if (ret)
		goto err_dma;
	up_read(&bdev->lock);

	req.handle = handle;
	req.entries = npages;
	req.page_size = PAGE_SIZE;
	ret = bam_map_copy_out(bf, uarg, &req, addrs);
	kvfree(addrs);
	return ret;

err_dma:
	dma_unmap_sgtable(dma_dev, &m->host.sgt, DMA_BIDIRECTIONAL, 0);
err_unlock:
	up_read(&bdev->lock);
err_free:
	kvfree(addrs);
	/* bam_host_free unaccounts host.npages, which we accounted above */
	bam_host_free(bf, m, pinned);
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

static u32 bam_iommu_flags(struct pci_dev *pdev, const char **name)
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

static long bam_ioctl_info(struct bam_file *bf, void __user *uarg)
{
	struct bam_dev *bdev = bf->bdev;
	struct pci_dev *pdev = bdev->pdev;
	struct bam_nvme_info info;
	const char *name;

	memset(&info, 0, sizeof(info));
	down_read(&bdev->lock);
	if (!bdev->alive) {
		up_read(&bdev->lock);
		return -ENODEV;
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
	info.max_mappings = max_mappings;
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

static long bam_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct bam_file *bf = filp->private_data;
	void __user *uarg = (void __user *)arg;

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

/* ---------------------------------------------------------------------- */
/* BAR0 mmap                                                               */

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
	if (bdev->alive && pgoff < (PAGE_ALIGN(bdev->bar_len) >> PAGE_SHIFT))
		ret = vmf_insert_pfn(vma, vmf->address,
				     (bdev->bar_start >> PAGE_SHIFT) + pgoff);
	up_read(&bdev->lock);
	return ret;
}

static const struct vm_operations_struct bam_vm_ops = {
	.fault = bam_vm_fault,
};

static int bam_mmap(struct file *filp, struct vm_area_struct *vma)
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
	if (!bdev->alive) {
		ret = -ENODEV;
		goto out;
	}
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

/* ---------------------------------------------------------------------- */
/* open / release                                                          */

static int bam_check_group_open(struct pci_dev *pdev);

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
		/* no DMA may target memory we unmap below */
		bam_stop_controller(bdev);
		bam_teardown_all(bdev, bf);
	}
	/* after unbind, remove() already released every mapping */
	WARN_ON_ONCE(!xa_empty(&bf->maps) || !list_empty(&bf->deferred));
	bdev->owner = NULL;
	if (bdev->region_held) {
		/* unbound while open: only now may another driver take BAR0 */
		bdev->region_held = false;
		pci_release_region(bdev->pdev, 0);
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
static int bam_check_group_open(struct pci_dev *pdev)
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
static void bam_check_iommu(struct pci_dev *pdev, u32 iommu_flags)
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
		 * released so no driver (nvme) can bind and reuse it meanwhile.
		 */
		bdev->region_held = true;
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

static struct pci_driver bam_driver = {
	.name = BAM_DRV_NAME,
	.id_table = bam_ids,
	.probe = bam_probe,
	.remove = bam_remove,
	.shutdown = bam_shutdown,
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
	ret = pci_register_driver(&bam_driver);
	if (ret)
		goto err_class;
	pr_info(BAM_DRV_NAME ": loaded (nvidia_p2p support %s)\n",
		bam_p2p_built() ? "built in, resolved at map time" : "not built");
	return 0;

err_class:
	class_destroy(bam_class);
err_region:
	unregister_chrdev_region(bam_devt, BAM_MAX_DEVICES);
	return ret;
}

static void __exit bam_exit(void)
{
	pci_unregister_driver(&bam_driver);
	class_destroy(bam_class);
	unregister_chrdev_region(bam_devt, BAM_MAX_DEVICES);
	ida_destroy(&bam_ida);
}

module_init(bam_init);
module_exit(bam_exit);

MODULE_DESCRIPTION("Char-device access to NVMe controllers for user-space and GPU-initiated I/O");
MODULE_AUTHOR("The bam-rs authors");
MODULE_LICENSE("Dual MIT/GPL");
