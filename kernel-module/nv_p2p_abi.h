/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * nv_p2p_abi.h - our declarations of the NVIDIA kernel driver's GPUDirect
 * RDMA interface ("nvidia_p2p"), written from its documented semantics.
 *
 * Facts this file relies on (NVIDIA's GPUDirect RDMA documentation and the
 * driver's published header):
 *  - GPU memory is handed out in pages of 64 KiB; the virtual address and
 *    length passed to get_pages must be multiples of 64 KiB.
 *  - Every structure the driver allocates starts with a 32-bit version:
 *    major in the upper 16 bits, minor in the lower 16.  A changed major
 *    means an incompatible layout; a larger minor only appends fields.
 *  - The page table layout with version 1.1 (older drivers) ends after
 *    "entries"; version 1.2 (the 5xx series, 580 included) appends the GPU
 *    UUID pointer.  The fields read here exist in both.
 *  - The DMA mapping structure is version 2.x.
 *  - The free callback passed to nvidia_p2p_get_pages runs when the GPU
 *    memory is freed behind our back (cudaFree, process exit).  Inside it
 *    the third party must stop using the pages and release the structures
 *    with nvidia_p2p_free_dma_mapping and nvidia_p2p_free_page_table only;
 *    calling put_pages or dma_unmap_pages from the callback is forbidden.
 *  - The persistent variant has no callback: the pages stay until
 *    nvidia_p2p_put_pages_persistent.
 *  - The functions are exported GPL-only by current drivers (plain exports by
 *    old ones), so a GPL-compatible module can resolve them at run time with
 *    symbol_get() without a link-time dependency on nvidia.ko.
 */
#ifndef BAM_NV_P2P_ABI_H
#define BAM_NV_P2P_ABI_H

#include <linux/types.h>

struct pci_dev;

#define BAM_NVP2P_MAJOR(v) (((v) >> 16) & 0xffffU)
#define BAM_NVP2P_MINOR(v) ((v) & 0xffffU)

/* page table: version 1.1 (pre-5xx) and 1.2 (5xx/580: + gpu_uuid) */
#define BAM_NVP2P_PAGE_TABLE_VERSION_OLD 0x00010001U
#define BAM_NVP2P_PAGE_TABLE_VERSION_580 0x00010002U
#define BAM_NVP2P_DMA_MAPPING_VERSION    0x00020003U

#define BAM_NVP2P_GPU_UUID_LEN 16

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB,
	NVIDIA_P2P_PAGE_SIZE_128KB,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

struct nvidia_p2p_page {
	u64 physical_address;
	union {
		struct {
			u32 wreqmb_h;
			u32 rreqmb_h;
			u32 rreqmb_0;
			u32 reserved[3];
		} fermi;
	} registers;
};

/* Common prefix of page table versions 1.1 and 1.2. */
struct nvidia_p2p_page_table {
	u32 version;
	u32 page_size;                 /* enum nvidia_p2p_page_size_type */
	struct nvidia_p2p_page **pages;
	u32 entries;
	/* version >= 1.2 only; never read unless the minor says it is there */
	u8 *gpu_uuid;
};

struct nvidia_p2p_dma_mapping {
	u32 version;
	enum nvidia_p2p_page_size_type page_size_type;
	u32 entries;
	u64 *dma_addresses;
	void *private;
	struct pci_dev *pci_dev;
};

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

#endif /* BAM_NV_P2P_ABI_H */
