// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_p2p_stub - TEST ONLY stand-in for the NVIDIA driver's nvidia_p2p
 * interface, so that bam_nvme's GPU-mapping path (including the free
 * callback) runs on machines without a GPU, e.g. in the QEMU test guest.
 *
 * "GPU memory" is host memory handed out in physically contiguous 64 KiB
 * chunks through the misc device /dev/bam-p2p-stub:
 *
 *   p = mmap(NULL, len, PROT_READ|PROT_WRITE, MAP_SHARED, stub_fd, 0);
 *
 * allocates len (a multiple of 64 KiB) and maps it; the user address p plays
 * the role of a CUDA device pointer, and the test reads and writes the
 * "GPU memory" through the mapping.  munmap() (or process exit) plays
 * cudaFree(): every non-persistent page table still handed out for that
 * memory gets its free callback, as with the real driver; persistent ones
 * keep the pages alive until nvidia_p2p_put_pages_persistent().
 *
 * The exported functions follow the documented contract of the NVIDIA
 * driver's functions of the same names (see ../nv_p2p_abi.h).  Counters for
 * tests, read-only module parameters under /sys/module/bam_p2p_stub/:
 * live_page_tables, live_dma_mappings, callbacks.  Writable parameter
 * pt_version selects the page table version handed out (0x00010002 as in
 * the 5xx drivers, 0x00010001 for the older layout, anything else to test
 * rejection).
 *
 * Writable parameter race_next_get_pages (test of bam_nvme's MAP_GPU vs
 * free-callback race): when set, the next non-persistent get_pages hands the
 * table out, then revokes it at once from a work item (as a concurrent
 * cudaFree would) and waits up to race_wait_ms for that callback to finish
 * before returning; the parameter clears itself.  A consumer that does not
 * serialize its callback against its own use of the page table sees the
 * table freed (and poisoned) before get_pages returns.
 *
 * Like the NVIDIA driver, put_pages waits for a free callback in flight on
 * the same page table before it returns, so its caller may free the
 * callback's data afterwards (bounded by put_wait_ms; the read-only counter
 * put_waits says how often it had to wait).  Writable cb_delay_ms delays
 * every free callback before it calls the consumer's, which makes that
 * wait happen on purpose in tests.
 *
 * Never load this next to the NVIDIA driver: both export the same symbols
 * (the module loader refuses the second one).
 */

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/jiffies.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "compat.h"
#include "nv_p2p_abi.h"

#define STUB_CHUNK (64UL * 1024)
#define STUB_CHUNK_ORDER (16 - PAGE_SHIFT)
#define STUB_MAX_BYTES (256UL << 20)

static unsigned int pt_version = BAM_NVP2P_PAGE_TABLE_VERSION_580;
module_param(pt_version, uint, 0644);
MODULE_PARM_DESC(pt_version, "nvidia_p2p page table version handed out");

static int live_page_tables;
module_param(live_page_tables, int, 0444);
static int live_dma_mappings;
module_param(live_dma_mappings, int, 0444);
static int callbacks;
module_param(callbacks, int, 0444);
static int race_next_get_pages;
module_param(race_next_get_pages, int, 0644);
MODULE_PARM_DESC(race_next_get_pages,
		 "Revoke the next non-persistent page table from a concurrent work item right after handing it out");
static unsigned int race_wait_ms = 500;
module_param(race_wait_ms, uint, 0644);
MODULE_PARM_DESC(race_wait_ms, "How long the racing get_pages waits for the callback to finish");

/* protects stub_allocs, every alloc's tables list and the counters */
static DEFINE_MUTEX(stub_lock);

/*
 * put_pages calls that found the free callback of their table pending or
 * running and waited for it (the NVIDIA driver's serialization): a test
 * asserts that the path ran.
 */
static int put_waits;
module_param(put_waits, int, 0444);
MODULE_PARM_DESC(put_waits, "put_pages calls that waited for a free callback in flight");
/* sleep this long in each free callback before calling the consumer's */
static unsigned int cb_delay_ms;
module_param(cb_delay_ms, uint, 0644);
MODULE_PARM_DESC(cb_delay_ms,
		 "Delay before each consumer free callback, to widen the put_pages vs callback window (default 0)");
/* bound on put_pages' wait for a callback in flight */
static unsigned int put_wait_ms = 10000;
module_param(put_wait_ms, uint, 0644);
MODULE_PARM_DESC(put_wait_ms, "Longest put_pages waits for a free callback in flight (default 10000)");
/* bumped (under stub_lock) whenever a free callback finished */
static unsigned long stub_cb_seq;
static LIST_HEAD(stub_allocs);

struct stub_alloc {
	struct list_head node;      /* in stub_allocs while not freed */
	u64 va;
	u64 len;
	unsigned long nchunks;
	struct page **pages;        /* every 4 KiB page, chunk after chunk */
	struct kref ref;            /* the mapping + each live page table */
	struct list_head tables;    /* live stub_pt of this allocation */
};

struct stub_pt {
	struct nvidia_p2p_page_table pt;   /* handed out */
	struct list_head node;             /* in alloc->tables while live */
	struct stub_alloc *alloc;
	struct nvidia_p2p_page *page_array;
	struct nvidia_p2p_page **page_ptrs;
	unsigned long first_chunk;
	bool persistent;
	bool live;                         /* false once revoked or put */
	bool cb_pending;                   /* revoked, callback not yet run */
	void (*cb)(void *data);
	void *data;
	struct nvidia_p2p_dma_mapping *dma;
	u8 uuid[BAM_NVP2P_GPU_UUID_LEN];
};

static void stub_alloc_release(struct kref *ref)
{
	struct stub_alloc *a = container_of(ref, struct stub_alloc, ref);
	unsigned long i;

	for (i = 0; i < a->nchunks << STUB_CHUNK_ORDER; i++)
		__free_page(a->pages[i]);
	kvfree(a->pages);
	kfree(a);
}

static struct stub_alloc *stub_find(u64 va, u64 len)
{
	struct stub_alloc *a;

	list_for_each_entry(a, &stub_allocs, node)
		if (va >= a->va && va - a->va < a->len && len <= a->len - (va - a->va))
			return a;
	return NULL;
}

/* Detached tables of freed allocations stay findable here until freed. */
static LIST_HEAD(stub_revoked);

/* free callbacks running now (under stub_lock); put_pages waits for them */
struct stub_cb_rec {
	struct list_head node;
	const struct nvidia_p2p_page_table *pt;
};
static LIST_HEAD(stub_inflight);
static DECLARE_WAIT_QUEUE_HEAD(stub_cb_wq);

struct stub_pt;
static void stub_fire_cb(struct stub_pt *s);

/* pt's free callback is running; stub_lock held */
static bool stub_cb_inflight_locked(const struct nvidia_p2p_page_table *pt)
{
	struct stub_cb_rec *r;

	list_for_each_entry(r, &stub_inflight, node)
		if (r->pt == pt)
			return true;
	return false;
}

/* pt's free callback is pending or running; stub_lock held */
static bool stub_cb_running_locked(const struct nvidia_p2p_page_table *pt)
{
	struct stub_pt *s;

	if (stub_cb_inflight_locked(pt))
		return true;
	list_for_each_entry(s, &stub_revoked, node)
		if (&s->pt == pt && s->cb_pending)
			return true;
	return false;
}

/*
 * Wait (at most put_wait_ms) until no free callback of pt is pending or
 * running.  The check runs under stub_lock, outside the wait condition,
 * which only compares the completion counter (nothing sleeps in it).
 * Called and returns with stub_lock held.  Returns false on timeout.
 */
static bool stub_wait_cb_locked(const struct nvidia_p2p_page_table *pt)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(READ_ONCE(put_wait_ms));
	bool waited = false;

	while (stub_cb_running_locked(pt)) {
		unsigned long seq = stub_cb_seq;
		long left = (long)(deadline - jiffies);

		if (left <= 0)
			return false;
		if (!waited) {
			waited = true;
			put_waits++;
		}
		mutex_unlock(&stub_lock);
		wait_event_timeout(stub_cb_wq, READ_ONCE(stub_cb_seq) != seq, left);
		mutex_lock(&stub_lock);
	}
	return true;
}

/*
 * A table whose free callback is running: as with the NVIDIA driver, its
 * structures stay valid (and usable) until the callback frees them.
 */
static struct stub_pt *stub_lookup_revoking(struct nvidia_p2p_page_table *pt)
{
	struct stub_pt *s;

	if (!stub_cb_inflight_locked(pt))
		return NULL;
	list_for_each_entry(s, &stub_revoked, node)
		if (&s->pt == pt && !s->live)
			return s;
	return NULL;
}

/*
 * The stub_pt behind pt, if pt is one of ours and still handed out (live):
 * either on its allocation's list or, for a persistent table whose memory
 * was freed, on stub_revoked.
 */
static struct stub_pt *stub_lookup(struct nvidia_p2p_page_table *pt)
{
	struct stub_alloc *a;
	struct stub_pt *s;

	list_for_each_entry(a, &stub_allocs, node)
		list_for_each_entry(s, &a->tables, node)
			if (&s->pt == pt)
				return s;
	list_for_each_entry(s, &stub_revoked, node)
		if (&s->pt == pt && s->live)
			return s;
	return NULL;
}

static void stub_pt_free(struct stub_pt *s)
{
	kref_put(&s->alloc->ref, stub_alloc_release);
	kfree(s->page_ptrs);
	kfree(s->page_array);
	/* a consumer that reads the table after it was freed sees garbage */
	memset(s, 0x6b, sizeof(*s));
	kfree(s);
	live_page_tables--;
}

/* race_next_get_pages: one revocation at a time, from this work item */
static struct {
	struct work_struct work;
	struct stub_pt *s;
	struct completion done;
} stub_race;

static void stub_race_fn(struct work_struct *w)
{
	struct stub_pt *s = stub_race.s;

	mutex_lock(&stub_lock);
	/* compare addresses only: s may be gone already */
	if (stub_lookup(&s->pt) == s && s->live) {
		s->live = false;
		list_move_tail(&s->node, &stub_revoked);
		stub_fire_cb(s);	/* drops and retakes stub_lock */
	}
	mutex_unlock(&stub_lock);
	complete(&stub_race.done);
}

static int stub_get_pages_common(u64 va, u64 len,
				 struct nvidia_p2p_page_table **page_table,
				 bool persistent, void (*cb)(void *), void *data)
{
	struct stub_alloc *a;
	struct stub_pt *s;
	unsigned long n, i;

	if (!page_table || !len || !IS_ALIGNED(va, STUB_CHUNK) ||
	    !IS_ALIGNED(len, STUB_CHUNK) || (!persistent && (!cb || !data)))
		return -EINVAL;
	if (!persistent && race_next_get_pages)
		flush_work(&stub_race.work);	/* the previous race is over */
	n = len / STUB_CHUNK;
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	s->page_array = kcalloc(n, sizeof(*s->page_array), GFP_KERNEL);
	s->page_ptrs = kcalloc(n, sizeof(*s->page_ptrs), GFP_KERNEL);
	if (!s->page_array || !s->page_ptrs) {
		kfree(s->page_array);
		kfree(s->page_ptrs);
		kfree(s);
		return -ENOMEM;
	}

	mutex_lock(&stub_lock);
	a = stub_find(va, len);
	if (!a) {
		mutex_unlock(&stub_lock);
		kfree(s->page_array);
		kfree(s->page_ptrs);
		kfree(s);
		return -EINVAL;
	}
	s->alloc = a;
	s->first_chunk = (va - a->va) / STUB_CHUNK;
	for (i = 0; i < n; i++) {
		struct page *pg = a->pages[(s->first_chunk + i) << STUB_CHUNK_ORDER];

		s->page_array[i].physical_address = page_to_phys(pg);
		s->page_ptrs[i] = &s->page_array[i];
	}
	for (i = 0; i < sizeof(s->uuid); i++)
		s->uuid[i] = 0xb0 + i;
	s->pt.version = pt_version;
	s->pt.page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	s->pt.pages = s->page_ptrs;
	s->pt.entries = n;
	s->pt.gpu_uuid = BAM_NVP2P_MINOR(pt_version) >= 2 ? s->uuid : NULL;
	s->persistent = persistent;
	s->cb = cb;
	s->data = data;
	s->live = true;
	kref_get(&a->ref);
	list_add_tail(&s->node, &a->tables);
	live_page_tables++;
	*page_table = &s->pt;
	if (!persistent && race_next_get_pages) {
		race_next_get_pages = 0;
		stub_race.s = s;
		reinit_completion(&stub_race.done);
		schedule_work(&stub_race.work);
		mutex_unlock(&stub_lock);
		if (!wait_for_completion_timeout(&stub_race.done,
						 msecs_to_jiffies(race_wait_ms)))
			pr_info("bam_p2p_stub: racing free callback still blocked after %u ms (consumer holds its lock)\n",
				race_wait_ms);
		return 0;
	}
	mutex_unlock(&stub_lock);
	return 0;
}

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	if (p2p_token || va_space)
		return -EINVAL;	/* tokens are deprecated: must be 0 */
	return stub_get_pages_common(virtual_address, length, page_table, false,
				     free_callback, data);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	if (flags > 1)
		return -EINVAL;
	return stub_get_pages_common(virtual_address, length, page_table, true,
				     NULL, NULL);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);

static void stub_dma_release(struct nvidia_p2p_dma_mapping *dma)
{
	u32 i;

	for (i = 0; i < dma->entries; i++)
		dma_unmap_page(&dma->pci_dev->dev, dma->dma_addresses[i], STUB_CHUNK,
			       DMA_BIDIRECTIONAL);
	pci_dev_put(dma->pci_dev);
	kfree(dma->dma_addresses);
	kfree(dma);
	live_dma_mappings--;
}

static int stub_put_common(u64 va, struct nvidia_p2p_page_table *pt, bool persistent)
{
	struct stub_pt *s;

	mutex_lock(&stub_lock);
	s = stub_lookup(pt);
	if (!s) {
		struct stub_pt *r, *found = NULL;

		/*
		 * Revoked under the caller: as the NVIDIA driver does, wait for
		 * the free callback in flight to return (the caller frees its
		 * data next).  If the callback left the table to us (its owner
		 * was tearing down already), release it here.
		 */
		if (!stub_wait_cb_locked(pt)) {
			mutex_unlock(&stub_lock);
			pr_warn("bam_p2p_stub: put_pages: free callback still running after %u ms\n",
				put_wait_ms);
			return -EBUSY;
		}
		list_for_each_entry(r, &stub_revoked, node)
			if (&r->pt == pt && !r->live && !r->persistent)
				found = r;
		if (!found || persistent) {
			mutex_unlock(&stub_lock);
			return -EINVAL;
		}
		if (found->dma) {
			stub_dma_release(found->dma);
			found->dma = NULL;
		}
		list_del(&found->node);
		stub_pt_free(found);
		mutex_unlock(&stub_lock);
		return 0;
	}
	if (s->persistent != persistent ||
	    va != s->alloc->va + s->first_chunk * STUB_CHUNK) {
		mutex_unlock(&stub_lock);
		return -EINVAL;
	}
	if (s->dma) {
		pr_warn("bam_p2p_stub: put_pages with a live DMA mapping\n");
		stub_dma_release(s->dma);
		s->dma = NULL;
	}
	list_del(&s->node);
	s->live = false;
	stub_pt_free(s);
	mutex_unlock(&stub_lock);
	return 0;
}

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	return stub_put_common(virtual_address, page_table, false);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	if (flags)
		return -EINVAL;
	return stub_put_common(virtual_address, page_table, true);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);

/* Only valid for a page table whose free callback has run. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	struct stub_pt *s, *found = NULL;

	mutex_lock(&stub_lock);
	list_for_each_entry(s, &stub_revoked, node)
		if (&s->pt == page_table && !s->live)
			found = s;
	if (!found) {
		mutex_unlock(&stub_lock);
		return -EINVAL;
	}
	list_del(&found->node);
	stub_pt_free(found);
	mutex_unlock(&stub_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	struct nvidia_p2p_dma_mapping *dma;
	struct stub_pt *s;
	u32 i;
	int ret = 0;

	if (!peer || !page_table || !dma_mapping)
		return -EINVAL;
	mutex_lock(&stub_lock);
	s = stub_lookup(page_table);
	if (!s)
		s = stub_lookup_revoking(page_table);
	if (!s || s->dma) {
		ret = -EINVAL;
		goto out;
	}
	dma = kzalloc(sizeof(*dma), GFP_KERNEL);
	if (!dma) {
		ret = -ENOMEM;
		goto out;
	}
	dma->dma_addresses = kcalloc(s->pt.entries, sizeof(u64), GFP_KERNEL);
	if (!dma->dma_addresses) {
		kfree(dma);
		ret = -ENOMEM;
		goto out;
	}
	dma->version = BAM_NVP2P_DMA_MAPPING_VERSION;
	dma->page_size_type = NVIDIA_P2P_PAGE_SIZE_64KB;
	dma->pci_dev = pci_dev_get(peer);
	dma->private = s;
	for (i = 0; i < s->pt.entries; i++) {
		struct page *pg = s->alloc->pages[(s->first_chunk + i) << STUB_CHUNK_ORDER];
		dma_addr_t a = dma_map_page(&peer->dev, pg, 0, STUB_CHUNK,
					    DMA_BIDIRECTIONAL);

		if (dma_mapping_error(&peer->dev, a)) {
			ret = -EIO;
			break;
		}
		dma->dma_addresses[i] = a;
		dma->entries = i + 1;
	}
	live_dma_mappings++;
	if (ret) {
		stub_dma_release(dma);
		goto out;
	}
	s->dma = dma;
	*dma_mapping = dma;
out:
	mutex_unlock(&stub_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct stub_pt *s;

	mutex_lock(&stub_lock);
	s = stub_lookup(page_table);
	if (!s || !dma_mapping || s->dma != dma_mapping ||
	    dma_mapping->pci_dev != peer) {
		mutex_unlock(&stub_lock);
		return -EINVAL;
	}
	stub_dma_release(dma_mapping);
	s->dma = NULL;
	mutex_unlock(&stub_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

/* Only valid for a DMA mapping whose page table's free callback has run. */
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct stub_pt *s, *found = NULL;

	mutex_lock(&stub_lock);
	list_for_each_entry(s, &stub_revoked, node)
		if (!s->live && s->dma == dma_mapping && dma_mapping)
			found = s;
	if (!found) {
		mutex_unlock(&stub_lock);
		return -EINVAL;
	}
	stub_dma_release(dma_mapping);
	found->dma = NULL;
	mutex_unlock(&stub_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);

/* ---------------------------------------------------------------------- */
/* the "GPU memory": mmap of /dev/bam-p2p-stub                            */

/* cudaFree(): revoke the non-persistent tables, drop the mapping's ref */
static void stub_vma_close(struct vm_area_struct *vma)
{
	struct stub_alloc *a = vma->vm_private_data;
	struct stub_pt *s, *tmp;

	mutex_lock(&stub_lock);
	list_del(&a->node);
	list_for_each_entry_safe(s, tmp, &a->tables, node) {
		if (s->persistent) {
			/* stays until put_pages_persistent */
			list_move_tail(&s->node, &stub_revoked);
			continue;
		}
		s->live = false;
		s->cb_pending = true;	/* put_pages waits for it from now on */
		list_move_tail(&s->node, &stub_revoked);
	}
	/* callbacks run without stub_lock: they call free_* which take it */
	for (;;) {
		struct stub_pt *next = NULL;

		list_for_each_entry(s, &stub_revoked, node)
			if (s->cb_pending && s->alloc == a) {
				next = s;
				break;
			}
		if (!next)
			break;
		next->cb_pending = false;
		stub_fire_cb(next);	/* drops and retakes stub_lock */
	}
	mutex_unlock(&stub_lock);
	kref_put(&a->ref, stub_alloc_release);
}

/*
 * Called with stub_lock held, s no longer live and on stub_revoked; runs its
 * callback without stub_lock (it calls free_*, which take it),
 * recorded as in flight so that put_pages can wait for it.  Returns with
 * stub_lock held again.
 */
static void stub_fire_cb(struct stub_pt *s)
{
	void (*cb)(void *) = s->cb;
	void *data = s->data;
	struct stub_cb_rec rec = { .pt = &s->pt };

	unsigned int delay = READ_ONCE(cb_delay_ms);

	list_add_tail(&rec.node, &stub_inflight);
	callbacks++;
	mutex_unlock(&stub_lock);
	if (delay)
		msleep(delay);	/* a slow callback: put_pages must wait */
	cb(data);	/* may free s */
	mutex_lock(&stub_lock);
	list_del(&rec.node);
	stub_cb_seq++;
	wake_up_all(&stub_cb_wq);
}

static int stub_vma_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;	/* an allocation is freed whole */
}

static const struct vm_operations_struct stub_vm_ops = {
	.close = stub_vma_close,
	.may_split = stub_vma_may_split,
};

static int stub_mmap(struct file *filp, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;
	struct stub_alloc *a;
	unsigned long i, j, n;
	int ret;

	if (vma->vm_pgoff || !(vma->vm_flags & VM_SHARED) ||
	    !IS_ALIGNED(vma->vm_start, STUB_CHUNK) || !IS_ALIGNED(len, STUB_CHUNK) ||
	    len > STUB_MAX_BYTES)
		return -EINVAL;
	n = len / STUB_CHUNK;
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	a->pages = kvcalloc(n << STUB_CHUNK_ORDER, sizeof(*a->pages), GFP_KERNEL);
	if (!a->pages) {
		kfree(a);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		struct page *pg = alloc_pages(GFP_KERNEL | __GFP_ZERO, STUB_CHUNK_ORDER);

		if (!pg)
			goto err_pages;
		split_page(pg, STUB_CHUNK_ORDER);
		for (j = 0; j < (1UL << STUB_CHUNK_ORDER); j++)
			a->pages[(i << STUB_CHUNK_ORDER) + j] = pg + j;
		a->nchunks = i + 1;
	}
	a->va = vma->vm_start;
	a->len = len;
	kref_init(&a->ref);
	INIT_LIST_HEAD(&a->tables);
	ret = vm_map_pages(vma, a->pages, n << STUB_CHUNK_ORDER);
	if (ret) {
		kref_put(&a->ref, stub_alloc_release);
		return ret;
	}
	bam_vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND);
	vma->vm_ops = &stub_vm_ops;
	vma->vm_private_data = a;
	mutex_lock(&stub_lock);
	list_add_tail(&a->node, &stub_allocs);
	mutex_unlock(&stub_lock);
	return 0;

err_pages:
	kref_init(&a->ref);
	kref_put(&a->ref, stub_alloc_release);
	return -ENOMEM;
}

static const struct file_operations stub_fops = {
	.owner = THIS_MODULE,
	.mmap = stub_mmap,
	.llseek = noop_llseek,
};

static struct miscdevice stub_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "bam-p2p-stub",
	.fops = &stub_fops,
	.mode = 0600,
};

static int __init stub_init(void)
{
	INIT_WORK(&stub_race.work, stub_race_fn);
	init_completion(&stub_race.done);
	pr_warn("bam_p2p_stub: TEST ONLY nvidia_p2p stand-in loaded\n");
	return misc_register(&stub_misc);
}

static void __exit stub_exit(void)
{
	misc_deregister(&stub_misc);
	flush_work(&stub_race.work);
}

module_init(stub_init);
module_exit(stub_exit);

MODULE_DESCRIPTION("TEST ONLY: nvidia_p2p stand-in backed by host memory");
MODULE_AUTHOR("The bam-rs authors");
MODULE_LICENSE("Dual MIT/GPL");
