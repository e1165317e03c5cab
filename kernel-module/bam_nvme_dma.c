// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_nvme_dma.c - host memory for the controller's DMA, and the release of
 * every kind of mapping: pinning and DMA-mapping a range of the caller's
 * memory (MAP_HOST), UNMAP (at once, or deferred while the controller may
 * still reach the memory), and tearing down all of a file's mappings on
 * close, unbind and remove.  GPU mappings are made and released by
 * bam_nvme_p2p.c; their teardown is started here.
 */

#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "bam_nvme.h"

static bool force_deferred_unmap;
module_param(force_deferred_unmap, bool, 0644);
MODULE_PARM_DESC(force_deferred_unmap,
		 "Defer UNMAP of mappings while the controller is enabled even under a strict IOMMU (testing; default off)");

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
void bam_teardown_all(struct bam_dev *bdev, struct bam_file *bf)
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
 * No command of bf's can DMA any more: the controller is disabled, or a
 * revocation stopped it with bus mastering off.
 */
static bool bam_controller_stopped(struct bam_dev *bdev, struct bam_file *bf)
{
	return READ_ONCE(bf->revoked) || !bam_controller_enabled(bdev);
}

int bam_unmap_handle(struct bam_file *bf, u64 handle, u32 *flags_out,
		     bool quiesced)
{
	struct bam_dev *bdev = bf->bdev;
	bool may_defer, stopped;
	struct bam_map *m;
	int ret = 0;

	if (handle == 0 || handle > U32_MAX)
		return -ENOENT;
	down_read(&bdev->lock);
	/* after a PCIe error too: the file's mappings go when it is closed */
	ret = bam_usable(bf);
	if (ret)
		goto out;
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

/*
 * Pin the page-aligned user range in req (validated by the caller), DMA-map
 * it for the controller, publish it in bf->maps and fill
 * req->handle/entries/page_size; *addrs_out (kvmalloc'ed, caller frees)
 * receives one bus address per host page.  Called without bdev->lock.
 */
int bam_host_map(struct bam_file *bf, struct bam_nvme_map *req, u64 **addrs_out)
{
	struct bam_dev *bdev = bf->bdev;
	struct device *dma_dev = &bdev->pdev->dev;
	unsigned long npages = req->length >> PAGE_SHIFT, pinned = 0, idx = 0;
	struct scatterlist *sg;
	unsigned int max_seg, i;
	struct bam_map *m;
	u64 *addrs = NULL;
	u32 handle;
	int ret;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->kind = BAM_MAP_HOST;
	m->vaddr = req->vaddr;
	m->length = req->length;
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
		int n = pin_user_pages_fast(req->vaddr + (pinned << PAGE_SHIFT),
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
						0, req->length, max_seg, GFP_KERNEL);
	if (ret)
		goto err_free;

	down_read(&bdev->lock);
	ret = bam_usable(bf);
	if (ret)
		goto err_unlock;
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

	req->handle = handle;
	req->entries = npages;
	req->page_size = PAGE_SIZE;
	*addrs_out = addrs;
	return 0;

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
