// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_nvme_maps.c - an open file's table of mappings: the limits on it,
 * the validation of a MAP request's range, and publishing a mapping under
 * a handle.  Host mappings (bam_nvme_dma.c) and GPU mappings
 * (bam_nvme_p2p.c) both publish here; this file calls nothing else of the
 * module.
 */

#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/uaccess.h>

#include "bam_nvme.h"

unsigned int bam_max_mappings = 16384;
module_param_named(max_mappings, bam_max_mappings, uint, 0444);
MODULE_PARM_DESC(max_mappings, "Most mappings one open file may hold (default 16384)");

unsigned long bam_max_map_bytes = 1UL << 30;
module_param_named(max_map_bytes, bam_max_map_bytes, ulong, 0444);
MODULE_PARM_DESC(max_map_bytes, "Largest length of one MAP ioctl in bytes (default 1 GiB)");

static unsigned int max_deferred_mappings = 1024;
module_param(max_deferred_mappings, uint, 0644);
MODULE_PARM_DESC(max_deferred_mappings,
		 "MAP_* fail with ENOSPC while an open file has this many deferred unmaps pending (default 1024)");

/*
 * Validate a MAP request's range.  granule is the page size the addresses
 * are returned in (host page or 64 KiB GPU page).
 */
int bam_check_map_req(const struct bam_nvme_map *req, unsigned long granule,
		      bool user_range)
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

/*
 * MAP_* refuse (ENOSPC) while the file holds max_mappings mappings or has
 * max_deferred_mappings deferred unmaps pending.
 */
bool bam_maps_full(struct bam_file *bf)
{
	return atomic_read(&bf->nr_maps) >= (int)bam_max_mappings ||
	       atomic_read(&bf->nr_deferred) >= (int)READ_ONCE(max_deferred_mappings);
}

/* Give m a handle in bf->maps.  Returns 0 or a negative errno. */
int bam_insert_map(struct bam_file *bf, struct bam_map *m, u32 *handle)
{
	int ret;

	if (atomic_inc_return(&bf->nr_maps) > (int)bam_max_mappings) {
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
