/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * bam_nvme.h - internal declarations of the bam_nvme driver.
 *
 * Objects and lifetimes
 * ---------------------
 * struct bam_dev    one per bound PCI function.  Embeds the class device
 *                   (struct device) whose release frees it, and the cdev
 *                   whose kobject has that device as parent, so an open file
 *                   keeps it alive after the PCI device is unbound.
 * struct bam_file   one per open file (at most one per bam_dev at a time:
 *                   opens are exclusive).  Holds a reference on the bam_dev
 *                   and on the opener's mm_struct (mmgrab) for accounting.
 * struct bam_map    one per MAP_HOST / MAP_GPU; lives in bam_file.maps, an
 *                   xarray keyed by the handle given to user space.
 *
 * Locking
 * -------
 * bam_dev.lock (rw_semaphore) protects bam_dev.alive, bam_dev.owner, the
 *   PCIe error state (bam_dev.in_error, bam_dev.dead, bam_file.failed) and
 *   orders every use of the PCI device for DMA against unbind:
 *   - read: ioctls, mmap, the BAR fault handler;
 *   - write: open (owner change), release, remove (unbind), the PCI error
 *     handlers.
 *   While it is held for read with alive == true, the PCI device is bound to
 *   this driver, its BAR is reserved and DMA-mapping calls are valid;
 *   bam_usable() says whether the file may use them (not after a PCIe
 *   error).
 * Lock order: mmap_lock -> bam_dev.lock -> i_mmap_rwsem (zap in remove).
 *   Nothing that takes mmap_lock (pinning user pages, copy_to/from_user,
 *   locked-memory accounting) runs while bam_dev.lock is held, which is what
 *   keeps the BAR fault handler (called with mmap_lock held) deadlock-free.
 * bam_file.maps is an xarray and uses its own internal lock; an entry is
 *   owned by whoever removed it with xa_erase(), so unmap and teardown never
 *   race on one mapping.
 * bam_file.deferred_lock (spinlock) protects bam_file.deferred, the
 *   mappings UNMAPped while the controller was enabled; whoever splices the
 *   list (under the lock) owns and frees its entries (with bdev->lock held
 *   and alive, like any teardown, and only once the controller is stopped).
 * bam_dev.hw_lock (mutex) serializes stopping the controller (registers,
 *   bus mastering) and protects bam_dev.hw_alive.  It is the innermost lock
 *   of the driver: nothing is called under it that takes another lock of
 *   ours or any nvidia_p2p function.  The NVIDIA free callback takes it
 *   (and not bam_dev.lock: the callback may run with NVIDIA-internal locks
 *   held that our ioctls' calls into nvidia_p2p also take, an AB-BA risk).
 *   Order: bam_dev.lock -> hw_lock; [mmap_lock / NVIDIA locks] -> hw_lock.
 * bam_map.gpu.lock (mutex, as gdrdrv's mr->sem) is held by MAP_GPU from
 *   before nvidia_p2p_get_pages until the mapping is validated, DMA-mapped
 *   and published; the free callback takes it first, so it can never free
 *   the page table under MAP_GPU's validation and DMA mapping.  It is never
 *   held while our teardown calls put_pages (which may wait for a running
 *   callback).
 * bam_map.gpu.cb_lock (spinlock) decides, between our teardown and the
 *   NVIDIA free callback, which side releases the nvidia_p2p structures.
 * bam_held_mutex (bam_nvme_main.c) protects the list of devices that were
 *   unbound with a file open and still hold BAR0 (bam_dev.held_node).
 *   Order: bam_dev.lock -> bam_held_mutex; the PCI bus notifier takes the
 *   mutex alone, then (after dropping it) bam_dev.lock.
 *
 * PCIe errors (AER)
 * -----------------
 * error_detected stops the controller's DMA (bam_revoke_controller), marks
 * the open file failed (every later ioctl and mmap: EIO; BAR faults:
 * SIGBUS; its BAR PTEs are zapped) and the device in_error (open: EIO)
 * until resume; a permanent failure marks it dead for good.  The failed
 * file keeps its mappings until it is released, like any file.
 */
#ifndef BAM_NVME_H
#define BAM_NVME_H

#include <linux/cdev.h>
#include <linux/completion.h>
#include <linux/device.h>
#include <linux/list.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>

#include "bam_nvme_ioctl.h"

#define BAM_DRV_NAME "bam_nvme"
#define BAM_GPU_PAGE_SIZE (64UL * 1024)

struct nvidia_p2p_page_table;
struct nvidia_p2p_dma_mapping;
struct bam_p2p_ops;

struct bam_dev {
	struct device dev;          /* class device, refcount owner */
	struct cdev cdev;
	struct pci_dev *pdev;       /* referenced (pci_dev_get) for our life */
	int minor;

	struct rw_semaphore lock;
	bool alive;                 /* bound, BAR reserved; under lock */
	struct bam_file *owner;     /* the open file, if any; under lock */

	resource_size_t bar_start;
	resource_size_t bar_len;
	void __iomem *regs;         /* kernel mapping of BAR0 (quiesce) */

	struct mutex hw_lock;       /* stopping the controller; see above */
	bool hw_alive;              /* regs mapped, device bound; under hw_lock */
	/*
	 * remove() ran while a file was open: BAR0 stays requested (so no
	 * other driver, the kernel's nvme included, can bind and reuse the BAR
	 * a process or a GPU may still reach) until that file is released.
	 * Under lock.
	 */
	bool region_held;
	struct list_head held_node; /* in bam_held_list while region_held */
	bool noiommu_warned;        /* allow_unsafe_noiommu warning given; under lock */
	/*
	 * A PCIe error was reported and recovery has not finished (resume):
	 * open fails with EIO.  dead: a permanent failure (or a recovery that
	 * never ends), for good while bound.  Under lock.
	 */
	bool in_error;
	bool dead;
};

struct bam_file {
	struct bam_dev *bdev;
	struct file *filp;
	struct mm_struct *mm;       /* opener's mm, mmgrab()ed */
	pid_t pid;
	struct xarray maps;         /* handle -> struct bam_map */
	atomic_t nr_maps;
	atomic64_t pinned_pages;    /* host pages pinned through this file */
	u32 next_handle;            /* xa_alloc_cyclic cursor, under xa_lock */
	/*
	 * Set (never cleared) by the NVIDIA free callback after it stopped the
	 * controller: GPU memory was freed while mapped.  MAP_* then fail with
	 * ENOTRECOVERABLE until the file is closed; INFO reports it.
	 */
	bool revoked;               /* READ_ONCE/WRITE_ONCE */
	/*
	 * A PCIe error hit the controller while this file was open: the
	 * controller was stopped and may have been reset under the owner's
	 * queues; every ioctl and mmap fails with EIO and BAR accesses raise
	 * SIGBUS until the file is closed.  Written under bdev->lock held for
	 * write (WRITE_ONCE); read under it, or with READ_ONCE for early exits.
	 */
	bool failed;
	/*
	 * Mappings UNMAPped while the controller was enabled and its DMA not
	 * strictly translated: gone from the user's view (not in maps, not in
	 * nr_maps) but still DMA-mapped and pinned until the controller is
	 * next known to be stopped.  Whoever splices the list owns its entries.
	 */
	spinlock_t deferred_lock;
	struct list_head deferred;  /* struct bam_map.deferred_node */
	atomic_t nr_deferred;
};

enum bam_map_kind { BAM_MAP_HOST, BAM_MAP_GPU };

/* GPU mapping state, decided under cb_lock */
enum bam_gpu_state {
	BAM_GPU_LIVE,       /* ours to tear down */
	BAM_GPU_TEARDOWN,   /* we are releasing it; the callback must not */
	BAM_GPU_REVOKED,    /* the free callback released it */
};

struct bam_map {
	enum bam_map_kind kind;
	struct list_head deferred_node; /* in bam_file.deferred once deferred */
	u64 vaddr;
	u64 length;
	union {
		struct {
			struct page **pages;
			unsigned long npages;
			struct sg_table sgt;
			bool dma_mapped;
		} host;
		struct {
			const struct bam_p2p_ops *ops;
			struct bam_file *bf;      /* owner; outlives the mapping */
			struct mutex lock;        /* MAP_GPU vs free callback */
			struct nvidia_p2p_page_table *pt;
			struct nvidia_p2p_dma_mapping *dma;
			bool persistent;
			spinlock_t cb_lock;
			enum bam_gpu_state state;
			struct completion cb_done;
			bool cb_started;
		} gpu;
	};
};

/*
 * Whether bf may use its device now: 0, -ENODEV once the device is unbound,
 * -EIO after a PCIe error.  bdev->lock held (read or write).
 */
static inline int bam_usable(const struct bam_file *bf)
{
	if (!bf->bdev->alive)
		return -ENODEV;
	if (READ_ONCE(bf->failed))
		return -EIO;
	return 0;
}

/*
 * Who calls whom (no circle): main -> ioctl, bar, dma, iommu, ctrl, p2p;
 * ioctl -> dma, p2p, maps, iommu; dma -> p2p, maps, ctrl, iommu;
 * p2p -> maps, ctrl; bar, maps, ctrl and iommu call nothing of ours.
 */

/* bam_nvme_ctrl.c: the controller's registers; takes bdev->hw_lock */
/*
 * Stop all DMA of the controller: shutdown notification, CC.EN = 0, bus
 * mastering off.  A no-op once the device is unbound.  Sleeps (bounded by
 * CAP.TO and quiesce_timeout_ms).
 */
void bam_stop_controller(struct bam_dev *bdev);
/* bus mastering off, then CC.EN = 0; no waits but for hw_lock */
void bam_revoke_controller(struct bam_dev *bdev);
/* CC.EN or CSTS.RDY set, or the registers unreadable */
bool bam_controller_enabled(struct bam_dev *bdev);

/* bam_nvme_maps.c: an open file's table of mappings */
extern unsigned int bam_max_mappings;
extern unsigned long bam_max_map_bytes;
int bam_check_map_req(const struct bam_nvme_map *req, unsigned long granule,
		      bool user_range);
bool bam_maps_full(struct bam_file *bf);
/* give m a handle in bf->maps (bdev->lock held, alive) */
int bam_insert_map(struct bam_file *bf, struct bam_map *m, u32 *handle);

/* bam_nvme_iommu.c */
u32 bam_iommu_flags(struct pci_dev *pdev, const char **name);
bool bam_dma_strict(struct pci_dev *pdev);
int bam_check_group_open(struct pci_dev *pdev);
void bam_check_iommu(struct pci_dev *pdev, u32 iommu_flags);

/* bam_nvme_dma.c */
/*
 * Pin and DMA-map the user range in req (validated), publish it in
 * bf->maps and fill req->handle/entries/page_size; *addrs_out (kvmalloc'ed,
 * caller frees) receives the bus addresses.  Called without bdev->lock.
 */
int bam_host_map(struct bam_file *bf, struct bam_nvme_map *req, u64 **addrs_out);
/* UNMAP: release (or defer) one mapping; takes bdev->lock */
int bam_unmap_handle(struct bam_file *bf, u64 handle, u32 *flags_out,
		     bool quiesced);
/* release every mapping of bf; bdev->lock held for write, alive */
void bam_teardown_all(struct bam_dev *bdev, struct bam_file *bf);

/* bam_nvme_ioctl.c and bam_nvme_bar.c: file operations */
long bam_ioctl(struct file *filp, unsigned int cmd, unsigned long arg);
int bam_mmap(struct file *filp, struct vm_area_struct *vma);

/* bam_nvme_p2p.c */
/*
 * Pin and DMA-map the GPU range in req, publish it in bf->maps and fill
 * req->handle/entries/page_size; *addrs_out (kvmalloc'ed, caller frees)
 * receives the bus addresses.  Called without bdev->lock.
 */
int bam_p2p_map(struct bam_file *bf, struct bam_nvme_map *req, u64 **addrs_out);
/* undo bam_p2p_map's DMA mapping and pin; needs bdev->lock and alive */
void bam_p2p_unmap(struct bam_dev *bdev, struct bam_map *m, u32 *flags_out);
/* drop the symbol references and free m; no device needed */
void bam_p2p_free(struct bam_map *m);
bool bam_p2p_built(void);
bool bam_p2p_available(void);

#endif /* BAM_NVME_H */
