// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_nvme_p2p.c - DMA mapping of GPU memory for the NVMe controller through
 * the NVIDIA driver's nvidia_p2p interface (GPUDirect RDMA).
 *
 * The nvidia_p2p functions are resolved with symbol_get() each time a
 * mapping is made and released with symbol_put() when it is gone, so:
 *  - bam_nvme loads and works (host memory only) without the NVIDIA driver,
 *    and MAP_GPU answers EOPNOTSUPP with a log line saying why;
 *  - the NVIDIA driver (or the test stand-in) cannot be unloaded while one
 *    of its pages is mapped for the controller.
 * Build with BAM_NVME_NO_P2P defined (make P2P=0) to leave it out entirely.
 *
 * Free callback protocol (see bam_nvme.h for the states and locks):
 *  - MAP_GPU holds bam_map.gpu.lock from before nvidia_p2p_get_pages until
 *    the page table is validated, DMA-mapped and the mapping published (or
 *    claimed for teardown on failure); the callback takes that lock first,
 *    so it never frees a page table MAP_GPU is still reading (gdrdrv holds
 *    its mr->sem the same way).  The lock is dropped before any put_pages.
 *  - the first of {our teardown, the NVIDIA free callback} to move the state
 *    away from LIVE releases the nvidia_p2p structures; the other side does
 *    nothing except, for our teardown, wait for a running callback to finish
 *    before freeing the bam_map the callback's data points to.
 *  - the callback stops the controller (bus mastering off, then CC.EN = 0,
 *    with no wait but for hw_lock) BEFORE it releases the DMA mapping: commands in flight and queues
 *    that hold the bus addresses cannot DMA into memory the NVIDIA driver
 *    is about to give to someone else.  The file is marked revoked.
 *  - our teardown relies on nvidia_p2p_put_pages waiting for a callback in
 *    flight on the same page table (the NVIDIA driver serializes the two;
 *    the test stand-in does too) before it frees the bam_map.
 */

#include <linux/errno.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/mm.h>

#include "bam_nvme.h"
#include "nv_p2p_abi.h"

#ifndef BAM_NVME_NO_P2P

struct bam_p2p_ops {
	typeof(&nvidia_p2p_get_pages) get_pages;
	typeof(&nvidia_p2p_put_pages) put_pages;
	typeof(&nvidia_p2p_get_pages_persistent) get_pages_persistent;
	typeof(&nvidia_p2p_put_pages_persistent) put_pages_persistent;
	typeof(&nvidia_p2p_free_page_table) free_page_table;
	typeof(&nvidia_p2p_dma_map_pages) dma_map_pages;
	typeof(&nvidia_p2p_dma_unmap_pages) dma_unmap_pages;
	typeof(&nvidia_p2p_free_dma_mapping) free_dma_mapping;
};

bool bam_p2p_built(void)
{
	return true;
}

bool bam_p2p_available(void)
{
	typeof(&nvidia_p2p_get_pages) fn = symbol_get(nvidia_p2p_get_pages);

	if (!fn)
		return false;
	symbol_put(nvidia_p2p_get_pages);
	return true;
}

static void bam_p2p_put_ops(struct bam_p2p_ops *ops)
{
	if (!ops)
		return;
	if (ops->get_pages)
		symbol_put(nvidia_p2p_get_pages);
	if (ops->put_pages)
		symbol_put(nvidia_p2p_put_pages);
	if (ops->get_pages_persistent)
		symbol_put(nvidia_p2p_get_pages_persistent);
	if (ops->put_pages_persistent)
		symbol_put(nvidia_p2p_put_pages_persistent);
	if (ops->free_page_table)
		symbol_put(nvidia_p2p_free_page_table);
	if (ops->dma_map_pages)
		symbol_put(nvidia_p2p_dma_map_pages);
	if (ops->dma_unmap_pages)
		symbol_put(nvidia_p2p_dma_unmap_pages);
	if (ops->free_dma_mapping)
		symbol_put(nvidia_p2p_free_dma_mapping);
	kfree(ops);
}

static struct bam_p2p_ops *bam_p2p_get_ops(bool persistent)
{
	struct bam_p2p_ops *ops = kzalloc(sizeof(*ops), GFP_KERNEL);

	if (!ops)
		return ERR_PTR(-ENOMEM);
	ops->free_page_table = symbol_get(nvidia_p2p_free_page_table);
	ops->dma_map_pages = symbol_get(nvidia_p2p_dma_map_pages);
	ops->dma_unmap_pages = symbol_get(nvidia_p2p_dma_unmap_pages);
	ops->free_dma_mapping = symbol_get(nvidia_p2p_free_dma_mapping);
	if (persistent) {
		ops->get_pages_persistent = symbol_get(nvidia_p2p_get_pages_persistent);
		ops->put_pages_persistent = symbol_get(nvidia_p2p_put_pages_persistent);
	} else {
		ops->get_pages = symbol_get(nvidia_p2p_get_pages);
		ops->put_pages = symbol_get(nvidia_p2p_put_pages);
	}
	if (!ops->free_page_table || !ops->dma_map_pages || !ops->dma_unmap_pages ||
	    !ops->free_dma_mapping ||
	    (persistent && (!ops->get_pages_persistent || !ops->put_pages_persistent)) ||
	    (!persistent && (!ops->get_pages || !ops->put_pages))) {
		pr_info_ratelimited(BAM_DRV_NAME
			": GPU mapping not supported: nvidia_p2p%s symbols not found (is the NVIDIA driver loaded?)\n",
			persistent ? " persistent" : "");
		bam_p2p_put_ops(ops);
		return ERR_PTR(-EOPNOTSUPP);
	}
	return ops;
}

/* NVIDIA's functions answer the kernel-internal ENOTSUPP; users see EOPNOTSUPP. */
static int bam_p2p_errno(int ret)
{
	if (ret == -ENOTSUPP)
		return -EOPNOTSUPP;
	if (ret > 0 || ret < -MAX_ERRNO)
		return -EIO;
	return ret;
}

/*
 * The NVIDIA free callback (GPU memory freed while mapped).  It may sleep
 * (NVIDIA documents a process context; gdrdrv takes a rw-semaphore here),
 * but must not take bam_dev.lock (see bam_nvme.h).
 */
static void bam_p2p_free_cb(void *data)
{
	struct bam_map *m = data;
	const struct bam_p2p_ops *ops = m->gpu.ops;
	struct bam_file *bf = m->gpu.bf;
	bool mine;

	/* MAP_GPU may still be validating and DMA-mapping: wait for it */
	mutex_lock(&m->gpu.lock);
	spin_lock(&m->gpu.cb_lock);
	mine = m->gpu.state == BAM_GPU_LIVE;
	if (mine) {
		m->gpu.state = BAM_GPU_REVOKED;
		m->gpu.cb_started = true;
	}
	spin_unlock(&m->gpu.cb_lock);
	mutex_unlock(&m->gpu.lock);
	if (!mine)
		return;	/* our teardown owns the structures */

	/*
	 * Commands in flight and queues in GPU memory may hold these bus
	 * addresses: stop the controller before the addresses go away.
	 * bf (and its bam_dev) outlive m: release and remove tear every
	 * mapping down, waiting for this callback, before letting go of them.
	 */
	WRITE_ONCE(bf->revoked, true);
	bam_revoke_controller(bf->bdev);

	/* only the free_* calls are allowed from inside the callback */
	if (m->gpu.dma)
		ops->free_dma_mapping(m->gpu.dma);
	if (m->gpu.pt)
		ops->free_page_table(m->gpu.pt);
	dev_warn_ratelimited(&bf->bdev->pdev->dev,
		"GPU memory at %#llx (+%llu) freed while mapped (pid %d): controller stopped, mapping revoked\n",
		m->vaddr, m->length, bf->pid);
	complete_all(&m->gpu.cb_done);
}

/*
 * Take over the teardown.  Returns true if the structures are ours to
 * release; false if the free callback already released them (it has then
 * finished when this returns).
 */
static bool bam_p2p_claim(struct bam_map *m)
{
	bool mine, cb;

	spin_lock(&m->gpu.cb_lock);
	mine = m->gpu.state == BAM_GPU_LIVE;
	if (mine)
		m->gpu.state = BAM_GPU_TEARDOWN;
	cb = m->gpu.cb_started;
	spin_unlock(&m->gpu.cb_lock);
	if (cb)
		wait_for_completion(&m->gpu.cb_done);
	return mine;
}

static void bam_p2p_put_pages(struct bam_map *m)
{
	const struct bam_p2p_ops *ops = m->gpu.ops;
	int ret;

	if (m->gpu.persistent)
		ret = ops->put_pages_persistent(m->vaddr, m->gpu.pt, 0);
	else
		ret = ops->put_pages(0, 0, m->vaddr, m->gpu.pt);
	if (ret)
		pr_info_ratelimited(BAM_DRV_NAME ": nvidia_p2p_put_pages(%#llx): %d\n",
				    m->vaddr, ret);
	m->gpu.pt = NULL;
}

/* MAP_GPU's failure paths: claim under gpu.lock (the callback cannot have) */
static void bam_p2p_claim_locked(struct bam_map *m)
{
	spin_lock(&m->gpu.cb_lock);
	WARN_ON_ONCE(m->gpu.state != BAM_GPU_LIVE);
	m->gpu.state = BAM_GPU_TEARDOWN;
	spin_unlock(&m->gpu.cb_lock);
	mutex_unlock(&m->gpu.lock);
}

/* DMA-unmap and put the pages of a claimed mapping; bdev->lock, alive */
static void bam_p2p_release(struct bam_dev *bdev, struct bam_map *m)
{
	const struct bam_p2p_ops *ops = m->gpu.ops;

	if (m->gpu.dma) {
		int ret = ops->dma_unmap_pages(bdev->pdev, m->gpu.pt, m->gpu.dma);

		if (ret)
			pr_info_ratelimited(BAM_DRV_NAME
				": nvidia_p2p_dma_unmap_pages(%#llx): %d\n",
				m->vaddr, ret);
		m->gpu.dma = NULL;
	}
	bam_p2p_put_pages(m);
}

void bam_p2p_unmap(struct bam_dev *bdev, struct bam_map *m, u32 *flags_out)
{
	if (!bam_p2p_claim(m)) {
		if (flags_out)
			*flags_out |= BAM_NVME_UNMAP_REVOKED;
		return;
	}
	bam_p2p_release(bdev, m);
}

void bam_p2p_free(struct bam_map *m)
{
	bam_p2p_put_ops((struct bam_p2p_ops *)m->gpu.ops);
	kfree(m);
}

static int bam_p2p_check_pt(const struct bam_map *m)
{
	const struct nvidia_p2p_page_table *pt = m->gpu.pt;
	u32 i;

	if (BAM_NVP2P_MAJOR(pt->version) != BAM_NVP2P_MAJOR(BAM_NVP2P_PAGE_TABLE_VERSION_580) ||
	    BAM_NVP2P_MINOR(pt->version) < BAM_NVP2P_MINOR(BAM_NVP2P_PAGE_TABLE_VERSION_OLD)) {
		pr_err(BAM_DRV_NAME ": unsupported nvidia_p2p page table version %#x\n",
		       pt->version);
		return -EPROTO;
	}
	if (pt->page_size != NVIDIA_P2P_PAGE_SIZE_64KB) {
		pr_err(BAM_DRV_NAME ": nvidia_p2p page size type %u, expected 64 KiB\n",
		       pt->page_size);
		return -EPROTO;
	}
	if (pt->entries != m->length / BAM_GPU_PAGE_SIZE || !pt->pages) {
		pr_err(BAM_DRV_NAME ": nvidia_p2p page table has %u entries for %llu bytes\n",
		       pt->entries, m->length);
		return -EPROTO;
	}
	for (i = 0; i < pt->entries; i++)
		if (!pt->pages[i])
			return -EPROTO;
	/* the 5xx layout (minor >= 2) also names the GPU */
	if (BAM_NVP2P_MINOR(pt->version) >= BAM_NVP2P_MINOR(BAM_NVP2P_PAGE_TABLE_VERSION_580) &&
	    pt->gpu_uuid)
		pr_debug(BAM_DRV_NAME ": mapping %#llx of GPU %pUb\n", m->vaddr,
			 pt->gpu_uuid);
	return 0;
}

static int bam_p2p_check_dma(const struct bam_map *m)
{
	const struct nvidia_p2p_dma_mapping *dma = m->gpu.dma;
	u32 i;

	if (BAM_NVP2P_MAJOR(dma->version) != BAM_NVP2P_MAJOR(BAM_NVP2P_DMA_MAPPING_VERSION)) {
		pr_err(BAM_DRV_NAME ": unsupported nvidia_p2p DMA mapping version %#x\n",
		       dma->version);
		return -EPROTO;
	}
	if (dma->page_size_type != NVIDIA_P2P_PAGE_SIZE_64KB ||
	    dma->entries != m->gpu.pt->entries || !dma->dma_addresses) {
		pr_err(BAM_DRV_NAME ": nvidia_p2p DMA mapping: page size %u, %u entries\n",
		       dma->page_size_type, dma->entries);
		return -EPROTO;
	}
	/* PRP entries need (at least) 4 KiB-aligned bus addresses */
	for (i = 0; i < dma->entries; i++)
		if (dma->dma_addresses[i] & (SZ_4K - 1))
			return -EPROTO;
	return 0;
}

int bam_p2p_map(struct bam_file *bf, struct bam_nvme_map *req, u64 **addrs_out)
{
	struct bam_dev *bdev = bf->bdev;
	bool persistent = req->flags & BAM_NVME_MAP_GPU_PERSISTENT;
	struct nvidia_p2p_dma_mapping *dma = NULL;
	struct bam_p2p_ops *ops;
	struct bam_map *m;
	u64 *addrs = NULL;
	u32 handle, i;
	int ret;

	ops = bam_p2p_get_ops(persistent);
	if (IS_ERR(ops))
		return PTR_ERR(ops);
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		bam_p2p_put_ops(ops);
		return -ENOMEM;
	}
	m->kind = BAM_MAP_GPU;
	m->vaddr = req->vaddr;
	m->length = req->length;
	m->gpu.ops = ops;
	m->gpu.bf = bf;
	m->gpu.persistent = persistent;
	m->gpu.state = BAM_GPU_LIVE;
	mutex_init(&m->gpu.lock);
	spin_lock_init(&m->gpu.cb_lock);
	init_completion(&m->gpu.cb_done);

	/*
	 * From a successful get_pages on, the free callback may run at any
	 * time; it waits for gpu.lock, which we hold until the mapping is
	 * published or claimed for teardown.  The NVIDIA driver takes its own
	 * locks; not under bdev->lock.
	 */
	mutex_lock(&m->gpu.lock);
	if (persistent)
		ret = ops->get_pages_persistent(m->vaddr, m->length, &m->gpu.pt, 0);
	else
		ret = ops->get_pages(0, 0, m->vaddr, m->length, &m->gpu.pt,
				     bam_p2p_free_cb, m);
	if (ret || !m->gpu.pt) {
		ret = ret ? bam_p2p_errno(ret) : -EIO;
		m->gpu.pt = NULL;
		mutex_unlock(&m->gpu.lock);
		goto err_free;
	}
	ret = bam_p2p_check_pt(m);
	if (ret)
		goto err_unlock_map;
	addrs = kvmalloc_array(m->gpu.pt->entries, sizeof(*addrs), GFP_KERNEL);
	if (!addrs) {
		ret = -ENOMEM;
		goto err_unlock_map;
	}

	down_read(&bdev->lock);
	ret = bam_usable(bf);
	if (ret)
		goto err_unlock;
	ret = ops->dma_map_pages(bdev->pdev, m->gpu.pt, &dma);
	if (ret || !dma) {
		ret = ret ? bam_p2p_errno(ret) : -EIO;
		goto err_unlock;
	}
	/* the callback cannot have run: it waits for gpu.lock */
	m->gpu.dma = dma;
	ret = bam_p2p_check_dma(m);
	if (ret)
		goto err_unmap;
	for (i = 0; i < dma->entries; i++)
		addrs[i] = dma->dma_addresses[i];
	ret = bam_insert_map(bf, m, &handle);
	if (ret)
		goto err_unmap;
	req->handle = handle;
	req->entries = dma->entries;
	req->page_size = BAM_GPU_PAGE_SIZE;
	up_read(&bdev->lock);
	/* published: from here on the callback may revoke it */
	mutex_unlock(&m->gpu.lock);
	*addrs_out = addrs;
	return 0;

err_unmap:
	/* still alive under bdev->lock: unmap and put the pages */
	bam_p2p_claim_locked(m);
	bam_p2p_release(bdev, m);
	up_read(&bdev->lock);
	kvfree(addrs);
	bam_p2p_free(m);
	return ret;
err_unlock:
	up_read(&bdev->lock);
err_unlock_map:
	kvfree(addrs);
	/* never call put_pages under gpu.lock: it may wait for the callback */
	bam_p2p_claim_locked(m);
	bam_p2p_put_pages(m);
err_free:
	bam_p2p_free(m);
	return ret;
}

#else /* BAM_NVME_NO_P2P */

bool bam_p2p_built(void)
{
	return false;
}

bool bam_p2p_available(void)
{
	return false;
}

int bam_p2p_map(struct bam_file *bf, struct bam_nvme_map *req, u64 **addrs_out)
{
	return -EOPNOTSUPP;
}

void bam_p2p_unmap(struct bam_dev *bdev, struct bam_map *m, u32 *flags_out)
{
}

void bam_p2p_free(struct bam_map *m)
{
	kfree(m);
}

#endif /* BAM_NVME_NO_P2P */
