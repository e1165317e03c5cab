/*
 * bam/abi.h — the I/O layer's structs, shared between the Rust host runtime
 * (crates/bam/src/abi.rs) and the CUDA device library: NVMe entries, GPU queue pairs,
 * SSDs, the I/O buffer region and the error log. Plain C, fixed-width fields, explicit
 * padding. The cache's structs are in bam/cache_abi.h; the simulated SSD array's in
 * sim_abi.h beside its kernel (crates/bam/cuda/src), the benchmark kernels' in
 * crates/bam-bench/cuda/bench_abi.h (neither is part of the public headers).
 *
 * Every struct here has a #[repr(C)] twin in Rust. Sizes and offsets are asserted
 * on both sides (BAM_ABI_ASSERT below, const asserts in Rust) and a CI test
 * (crates/bam/tests/layout.rs) compiles crates/bam/tests/layout_dump.cpp with the host
 * C++ compiler and compares every offset with Rust's offset_of!.
 *
 * Pointers are stored as uint64_t device addresses so that the layout is the same
 * for host and device compilers.
 */
#ifndef BAM_ABI_H
#define BAM_ABI_H

#include <stddef.h>
#include <stdint.h>

#define BAM_ABI_VERSION 1u

/* ---- NVMe entries (NVMe Base Specification 2.0, figures 88 and 89) ---------------- */

/* Submission queue entry, 64 bytes. */
typedef struct bam_sqe {
    uint32_t cdw0; /* opcode [7:0], FUSE [9:8], PSDT [15:14], CID [31:16] */
    uint32_t nsid;
    uint32_t cdw2;
    uint32_t cdw3;
    uint64_t mptr;
    uint64_t prp1;
    uint64_t prp2;
    uint32_t cdw10; /* I/O: starting LBA [31:0]  */
    uint32_t cdw11; /* I/O: starting LBA [63:32] */
    uint32_t cdw12; /* I/O: NLB - 1 [15:0]       */
    uint32_t cdw13;
    uint32_t cdw14;
    uint32_t cdw15;
} bam_sqe;

/* Completion queue entry, 16 bytes. */
typedef struct bam_cqe {
    uint32_t dw0;
    uint32_t dw1;
    uint16_t sqhd; /* SQ head pointer at the time of posting */
    uint16_t sqid;
    uint16_t cid;
    uint16_t status; /* bit 0: phase tag; bits 15:1: status field (SC, SCT, CRD, M, DNR) */
} bam_cqe;

/* ---- GPU queue pairs -------------------------------------------------------------- */

/* Flags of bam_qp_view.flags */
#define BAM_QP_F_MMIO 1u /* doorbells are MMIO (a real controller's BAR): system-scope fences */

/* Host-written description of one I/O queue pair whose SQ and CQ live in GPU memory. */
typedef struct bam_qp_view {
    uint64_t sq;    /* bam_sqe[depth], GPU memory                                   */
    uint64_t cq;    /* bam_cqe[depth], GPU memory, zeroed (phase of lap 0 is 1)     */
    uint64_t sq_db; /* uint32_t SQ tail doorbell (device pointer; BAR or GPU memory) */
    uint64_t cq_db; /* uint32_t CQ head doorbell                                    */
    uint64_t state; /* bam_qp_state, GPU memory, zeroed                             */
    uint64_t slots; /* uint32_t[3 * depth]: sq_mark, cpl, seq (see queue.cuh)       */
    uint32_t depth; /* entries of SQ and CQ; power of two, 2..65536                 */
    uint16_t qid;   /* NVMe queue id of both SQ and CQ                              */
    uint16_t ssd;   /* index of the SSD in the array                                */
    uint32_t flags; /* BAM_QP_F_*                                                   */
    uint32_t reserved;
} bam_qp_view;

/* Mutable per-queue state in GPU memory (protocol in bam/detail/queue.cuh). Words that are hit
 * by different atomics live in different 32-byte L2 sectors. */
typedef struct bam_qp_state {
    uint64_t sq_ticket;    /* next ticket: atomic add                                  */
    uint64_t failed;       /* nonzero once a wait on this queue timed out              */
    uint64_t pad0[2];
    uint64_t sq_tail;      /* (absolute tail rung << 20) | submitters not yet pushed   */
    uint64_t sq_doorbells; /* number of SQ doorbell writes                             */
    uint64_t pad1[2];
    uint64_t cq_head;      /* (absolute CQ head consumed << 1) | reaper lock           */
    uint64_t cq_rung;      /* CQ head last written to the doorbell (under the lock)    */
    uint64_t cq_doorbells; /* number of CQ head doorbell writes                        */
    uint64_t completions;  /* CQEs consumed                                            */
    uint32_t sq_head;      /* SQ head of the last CQE a warp reaper consumed (diagnostic) */
    uint32_t pad2;
    uint64_t pad3[3];
} bam_qp_state;

/* ---- SSDs, I/O buffers, error log ---------------------------------------------------- */

typedef struct bam_ssd_view {
    uint64_t nlb;        /* namespace size in logical blocks                 */
    uint32_t nsid;       /* namespace id used for I/O                         */
    uint32_t lba_shift;  /* log2(LBA size)                                    */
    uint32_t mdts_bytes; /* maximum bytes per command, 0 = no limit            */
    uint32_t nqueues;    /* I/O queue pairs of this SSD                       */
    uint32_t first_qp;   /* index of its first queue pair in bam_io_view.qps  */
    uint32_t reserved;
} bam_ssd_view;

/* A region of GPU memory that controllers may DMA into, cut into buffer slots.
 * Behind the slots lie the prebuilt PRP lists, one per slot (prp_stride bytes each,
 * a power of two <= 4096, so a list never crosses a 4 KiB page). */
typedef struct bam_buf_view {
    uint64_t base;       /* device pointer of the region                          */
    uint64_t len;        /* bytes                                                 */
    uint64_t iova_table; /* uint64_t[]: bus address of each (1 << iova_shift) page */
    uint64_t slot_bytes; /* bytes per slot                                        */
    uint64_t prp_off;    /* offset of the PRP lists from base                     */
    uint32_t iova_shift; /* log2 of the IOVA table's page size (16 for GPU pages)  */
    uint32_t nslots;
    uint32_t prp_stride; /* bytes per slot's PRP list, 0 if slots need no list     */
    uint32_t page_shift; /* controller memory page size (CC.MPS), log2: 12         */
    uint64_t reserved;
} bam_buf_view;

/* Kinds of bam_error_entry.kind */
#define BAM_ERR_NVME 1u     /* a completion carried a nonzero status              */
#define BAM_ERR_TIMEOUT 2u  /* a wait ran past the timeout                         */
#define BAM_ERR_INVALID 3u  /* the caller asked for something impossible          */
#define BAM_ERR_PROTOCOL 4u /* the controller broke the protocol (bad CID, SQHD)   */
#define BAM_ERR_ABORTED 5u  /* the queue had failed before (after a timeout)       */
/* What a BAM_ERR_PROTOCOL entry's opcode field says went wrong (its status field holds
 * the CQE's DW3, or 0): */
#define BAM_PROTO_NO_COMMAND 0u  /* the CQE names no command in flight: the LBA field holds
                                  * the slot's mark << 32 | seq, the NLB field its cpl   */
#define BAM_PROTO_SQ_HEAD 1u     /* the CQE's SQ head is outside the queue (NLB field)    */
#define BAM_PROTO_CQ_FLOOD 2u    /* more than depth - 1 CQEs posted at once (LBA field)   */
#define BAM_ERR_VERIFY 6u   /* data verification failed (benchmarks and tests)     */
/* Detail codes (bam_error_entry.status) of the entries the cache logs (bam/cache.cuh). */
#define BAM_CACHE_ERR_NO_SLOT 0xC001u   /* every slot pinned or busy for timeout_ns      */
#define BAM_CACHE_ERR_LINE_BUSY 0xC002u /* a line stayed busy (fill/evict) for timeout_ns */
#define BAM_CACHE_ERR_RANGE 0xC003u     /* element index out of range (the entry's LBA
                                         * field holds the index, its qid the array id)  */
#define BAM_CACHE_ERR_READ_ONLY 0xC004u /* write-back of a line of a read-only array      */
#define BAM_CACHE_ERR_QUARANTINED 0xC005u /* flush: the line's write-back may still be in the device's hands */

typedef struct bam_error_entry {
    uint64_t lba;
    uint64_t time_ns; /* globaltimer */
    uint32_t status;  /* NVMe status field (SCT << 8 | SC, plus CRD/M/DNR bits) or detail */
    uint16_t ssd;
    uint16_t qid;
    uint16_t cid;
    uint8_t opcode;
    uint8_t kind; /* BAM_ERR_* */
    uint32_t nlb;
    uint32_t seq; /* 1 + the index of the error this entry holds, stored last (a release) */
    uint32_t reserved;
} bam_error_entry;

/* An error log: a ring the device appends to and its owner (the I/O layer's raw jobs, a
 * cache, a scan; crates/bam/src/io/error_log.rs) drains without writing any word the
 * device writes, so no entry logged while the host reads is lost. Error i (count's value
 * before the device's fetch_add) goes into entries[i mod capacity], whose seq becomes
 * i + 1 once its other fields are written; the host keeps its own cursor. Past `capacity`
 * errors not yet drained the oldest are overwritten (the count says how many there were).
 * BAM_ERR_ABORTED entries (the waiters of a queue that failed: consequences, many at
 * once) take a ticket first: past capacity / 2 of them since the host's last drain they
 * are only counted (`suppressed`), so that a flood of them never overwrites the errors
 * that caused it. */
typedef struct bam_error_log {
    uint32_t suppressed; /* BAM_ERR_ABORTED errors counted, not logged            */
    uint32_t count;      /* errors logged since the log was made (mod 2^32)       */
    uint32_t capacity;   /* entries of the ring, a power of two                   */
    uint32_t abort_base; /* written by the host: `aborts` at its last drain       */
    uint64_t entries;    /* bam_error_entry[capacity]                             */
    uint32_t aborts;     /* BAM_ERR_ABORTED errors recorded (tickets)             */
    uint32_t reserved;
} bam_error_log;

#define BAM_IO_QPS_PER_SSD_SHIFT 16u
/* bam_io_view.flags bits 0-15: of SSD s's k queue pairs, the first this many are shared
 * (default_qp picks among them); the others belong to a cache's fill service (its fill
 * queues, bam/detail/fill_queue.cuh). 0: all k are shared. */
#define BAM_IO_SHARED_QPS_MASK 0xffffu

/* Everything an I/O kernel needs, passed by value as a kernel parameter. */
typedef struct bam_io_view {
    uint64_t qps;        /* bam_qp_view[nqp]                                      */
    uint64_t ssds;       /* bam_ssd_view[nssd]                                    */
    uint64_t errlog;     /* bam_error_log                                          */
    uint64_t timeout_ns; /* bound of every wait                                   */
    uint32_t nssd;
    uint32_t nqp;
    uint32_t stripe_lbas; /* striping unit of the striped address space, in LBAs */
    uint32_t flags;       /* bits 16-31: queue pairs per SSD k when SSD s owns queue pairs
                           * s*k .. s*k+k-1 (then a queue pair is found without reading the
                           * SSD's view first); 0: see each bam_ssd_view. Bits 0-15:
                           * BAM_IO_SHARED_QPS_MASK                                  */
    bam_buf_view buf;
} bam_io_view;

/* ---- scans: sequential reads of large byte ranges (bam/scan.cuh, crates/bam/src/scan.rs) */
#define BAM_SCAN_MAX_SPANS 8u
#define BAM_SCAN_MAX_DEPTH 8u
/* Detail code (status field) of the BAM_ERR_ABORTED entry a scan logs when it finds a
 * failed queue pair at its start: its slots may still receive a late DMA of a read that
 * did not settle, so it reads nothing until the I/O layer is recovered (IoArray::recover). */
#define BAM_SCAN_ERR_QUEUE_FAILED 0x5CA1u

/* One byte range ("span") of the striped address space, read chunk by chunk. Chunk k
 * holds bytes [k * chunk_bytes, (k + 1) * chunk_bytes) of the span, delivered with up to
 * halo_bytes of the bytes that follow it (records that cross the chunk's end). */
typedef struct bam_span_view {
    uint64_t first_lba;   /* global (striped) LBA of the span's byte 0                 */
    uint64_t bytes;       /* length of the span                                        */
    uint32_t chunk_bytes; /* bytes per chunk, a multiple of the LBA size               */
    uint32_t halo_bytes;  /* bytes after each chunk delivered with it (LBA multiple)   */
} bam_span_view;

/* A scan: up to BAM_SCAN_MAX_SPANS spans with the same number of chunks, read in
 * lockstep (chunk k of every span together: the columns of one row range). Block b of
 * a scan kernel reads chunks b, b + gridDim.x, ... into its own `depth` groups of I/O
 * buffer slots, first_slot + (b * depth + i) * nspans + s, up to depth chunks ahead. */
typedef struct bam_scan_view {
    bam_io_view io;
    bam_span_view spans[BAM_SCAN_MAX_SPANS];
    uint64_t chunks;     /* chunks of every span                                       */
    uint32_t nspans;
    uint32_t depth;      /* chunks in flight per block, 1..BAM_SCAN_MAX_DEPTH          */
    uint32_t first_slot; /* the scan's I/O buffer slots: first_slot .. + nslots         */
    uint32_t nslots;     /* at least gridDim.x * depth * nspans                          */
    uint32_t lba_shift;  /* log2 of the LBA size (the same on every SSD)               */
    uint32_t reserved;
} bam_scan_view;

/* ---- layout assertions (the same numbers are asserted in crates/bam/src/abi.rs) ------ */
#ifdef __cplusplus
#define BAM_ABI_ASSERT(c, m) static_assert(c, m)
#else
#define BAM_ABI_ASSERT(c, m) _Static_assert(c, m)
#endif
BAM_ABI_ASSERT(sizeof(bam_sqe) == 64, "bam_sqe");
BAM_ABI_ASSERT(sizeof(bam_cqe) == 16, "bam_cqe");
BAM_ABI_ASSERT(offsetof(bam_sqe, prp1) == 24, "bam_sqe.prp1");
BAM_ABI_ASSERT(offsetof(bam_cqe, cid) == 12, "bam_cqe.cid");
BAM_ABI_ASSERT(sizeof(bam_qp_view) == 64, "bam_qp_view");
BAM_ABI_ASSERT(sizeof(bam_qp_state) == 128, "bam_qp_state");
BAM_ABI_ASSERT(offsetof(bam_qp_state, sq_tail) == 32, "bam_qp_state.sq_tail");
BAM_ABI_ASSERT(offsetof(bam_qp_state, cq_head) == 64, "bam_qp_state.cq_head");
BAM_ABI_ASSERT(sizeof(bam_ssd_view) == 32, "bam_ssd_view");
BAM_ABI_ASSERT(sizeof(bam_buf_view) == 64, "bam_buf_view");
BAM_ABI_ASSERT(sizeof(bam_error_entry) == 40, "bam_error_entry");
BAM_ABI_ASSERT(sizeof(bam_error_log) == 32, "bam_error_log");
BAM_ABI_ASSERT(sizeof(bam_io_view) == 112, "bam_io_view");
BAM_ABI_ASSERT(sizeof(bam_span_view) == 24, "bam_span_view");
BAM_ABI_ASSERT(sizeof(bam_scan_view) == 336, "bam_scan_view");

#endif /* BAM_ABI_H */
