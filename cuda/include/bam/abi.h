/*
 * bam/abi.h — structs shared between the Rust host runtime (crates/bam/src/abi.rs)
 * and the CUDA device library. Plain C, fixed-width fields, explicit padding.
 *
 * Every struct here has a #[repr(C)] twin in Rust. Sizes and offsets are asserted
 * on both sides (BAM_ABI_ASSERT below, const asserts in Rust) and a CI test
 * (crates/bam/tests/layout.rs) compiles cuda/tests/layout_dump.cpp with the host
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

/* Mutable per-queue state in GPU memory (protocol in bam/queue.cuh). Words that are hit
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
#define BAM_ERR_VERIFY 6u   /* data verification failed (benchmarks and tests)     */

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
} bam_error_entry;

typedef struct bam_error_log {
    uint32_t flag;     /* sticky: nonzero once any error was recorded   */
    uint32_t count;    /* errors recorded (may exceed capacity)         */
    uint32_t capacity; /* entries available                             */
    uint32_t reserved;
    uint64_t entries;  /* bam_error_entry[capacity]                     */
    uint64_t reserved2;
} bam_error_log;

#define BAM_IO_QPS_PER_SSD_SHIFT 16u

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
                           * SSD's view first); 0: see each bam_ssd_view             */
    bam_buf_view buf;
} bam_io_view;

/* ---- the simulated SSD array ----------------------------------------------------------- */

/* One simulated SSD: medium, namespace geometry, performance model, fault injection. */
typedef struct bam_sim_ssd {
    uint64_t medium;       /* device-accessible pointer to the medium                  */
    uint64_t nlb;          /* namespace size in LBAs (medium holds nlb << lba_shift)   */
    uint32_t lba_shift;
    uint32_t nsid;
    uint32_t mdts_bytes;   /* 0 = no limit                                            */
    uint32_t page_shift;   /* controller memory page size, log2                       */
    uint64_t lat_read_ns;  /* modelled device latency                                 */
    uint64_t lat_write_ns;
    uint64_t ps_per_read_cmd;   /* 1e12 / IOPS cap (0 = no cap)                       */
    uint64_t ps_per_write_cmd;
    uint64_t ps_per_read_byte;  /* 1e12 / bandwidth cap in bytes/s (0 = no cap)       */
    uint64_t ps_per_write_byte;
    uint64_t fault_lba;    /* commands touching [fault_lba, fault_lba + fault_nlb) ... */
    uint64_t fault_nlb;
    uint32_t fault_status; /* ... complete with this status field (fault_nlb 0: none);
                            * the host may change the three while the kernel runs
                            * (bam_sim_control.fault_epoch)                            */
    uint32_t flags;
    uint64_t vclock;       /* uint64_t*: the SSD's virtual clock in ps (rate caps)      */
    uint64_t reserved[2];
} bam_sim_ssd;

/* One I/O queue pair as the simulated controller sees it. The *_state fields are
 * owned by the one warp that serves the queue. */
typedef struct bam_sim_queue {
    uint64_t sq;         /* bam_sqe* (translated from the IOVA given at Create I/O SQ) */
    uint64_t cq;         /* bam_cqe*                                                   */
    uint64_t sq_db;      /* uint32_t*: where the host's SQ tail doorbell stores land    */
    uint64_t cq_db;      /* uint32_t*: CQ head doorbell                                 */
    uint64_t pending;    /* bam_sim_pending[depth]: fetched, not yet posted             */
    uint64_t cid_bitmap; /* uint32_t[2048]: CIDs in flight                              */
    uint32_t depth;
    uint16_t qid;
    uint16_t ssd;
    /* state, owned by the serving warp */
    uint32_t sq_head;    /* absolute count of fetched SQEs                              */
    uint32_t cq_tail;    /* absolute count of posted CQEs                               */
    uint32_t pend_head;
    uint32_t pend_tail;
    /* counters, owned by the serving warp, read by the host */
    uint64_t reads;
    uint64_t writes;
    uint64_t others;
    uint64_t read_bytes;
    uint64_t write_bytes;
    uint64_t errors;
    uint64_t bad_doorbells;
} bam_sim_queue;

typedef struct bam_sim_pending {
    uint64_t due_ns;
    uint16_t cid;
    uint16_t status; /* status field (without phase) */
    uint32_t flags;  /* 1: CID conflict (do not free the CID when posting) */
} bam_sim_pending;

/* A range of GPU memory registered for DMA (Transport::map_gpu). */
typedef struct bam_sim_region {
    uint64_t iova;
    uint64_t len;
    uint64_t dev; /* device pointer of iova */
    uint64_t reserved;
} bam_sim_region;

/* Dynamic shared memory of a controller block: staging for small commands' data (8 KiB
 * per warp of 512-thread blocks: 16 commands of 512 B in flight per warp), then the
 * constants of the queues each warp serves and the SSDs' parameters (every acquire
 * empties L1; shared memory keeps them one shared load away). */
#define BAM_SIM_STAGE_BYTES (128u * 1024u)
#define BAM_SIM_TABLE_BYTES (32u * 1024u)
#define BAM_SIM_SMEM_BYTES (BAM_SIM_STAGE_BYTES + BAM_SIM_TABLE_BYTES)

/* Host <-> simulator control block, in GPU memory: the kernel uses device-scope atomics,
 * the host copies to and from it on a non-blocking stream while the kernel runs. */
typedef struct bam_sim_control {
    uint32_t stop;    /* host sets 1: the controller kernel exits          */
    uint32_t stall;   /* host sets 1: stop serving (fault: stalled device) */
    uint32_t started; /* blocks that entered their loop (handshake)       */
    uint32_t exited;  /* blocks that left                                 */
    uint64_t loops;   /* service loop iterations of warp 0 (liveness)     */
    /* reserved[0]: globaltimer time base of the virtual clocks (set by block 0);
     * reserved[1..4]: profile of warp 0: SM cycles in the loop, in fetch visits, in
     * post visits, commands fetched (published with `loops`, every 64 iterations). */
    uint64_t reserved[5];
    /* Fault injection while the kernel runs (SimArray::set_fault): the host rewrites the
     * fault fields of bam_sim_ssd, zeroes fault_acks and increments fault_epoch; each warp
     * that sees a new epoch (every 64 loop iterations) copies the fault fields into its
     * block's shared copy of the table and then adds 1 to fault_acks (release), and the
     * host waits until every warp has. */
    uint32_t fault_epoch;
    uint32_t fault_acks;
    uint64_t reserved2[7];
} bam_sim_control;

typedef struct bam_sim_view {
    uint64_t queues;  /* bam_sim_queue[nqueues]  */
    uint64_t ssds;    /* bam_sim_ssd[nssd]       */
    uint64_t regions; /* bam_sim_region[nregions] */
    uint64_t control; /* bam_sim_control*         */
    uint32_t nqueues;
    uint32_t nssd;
    uint32_t nregions;
    uint32_t flags;
} bam_sim_view;

/* ---- benchmark kernels --------------------------------------------------------------- */

#define BAM_BENCH_HIST_BUCKETS 512u /* log-linear latency histogram: 16 sub-buckets per octave */

typedef struct bam_bench_params {
    uint64_t ios_per_thread; /* 0: run until deadline                         */
    uint64_t deadline_ns;    /* globaltimer deadline (0: none)                */
    uint64_t span_lbas;      /* LBAs per SSD the benchmark touches            */
    uint64_t seed;
    uint32_t nlb;            /* LBAs per I/O                                   */
    uint32_t read_pct;       /* 0..100                                        */
    uint32_t random;         /* 1: uniform random, 0: sequential per thread   */
    uint32_t verify;         /* 1: check reads; writes read back              */
    uint32_t gen;            /* pattern generation written by writes          */
    uint32_t queues_used;    /* queues per SSD used (<= nqueues)               */
    uint32_t ssds_used;      /* SSDs used (<= nssd)                            */
    uint32_t warp_io;        /* 1: the warp submits together (warp API)        */
} bam_bench_params;

/* One command for bam_raw_cmds (GPU tests of a controller's validation). */
typedef struct bam_raw_cmd {
    uint32_t cdw0; /* opcode | FUSE/PSDT bits | CID << 16, as given                        */
    uint32_t nsid; /* 0: the SSD's namespace                                               */
    uint64_t slba;
    uint32_t nlb;  /* blocks, >= 1                                                          */
    uint32_t prp;  /* 0: start of the buffer region, 1: an address outside every registered
                    * region, 2: the start + 2 (not dword aligned)                          */
} bam_raw_cmd;

typedef struct bam_bench_result {
    uint64_t ios;
    uint64_t bytes;
    uint64_t errors;
    uint64_t verify_failures;
    uint64_t t_start_ns; /* min globaltimer over threads */
    uint64_t t_end_ns;   /* max globaltimer over threads */
    uint64_t cycles;     /* sum over threads of clock64 spent in the loop */
    uint64_t thread_ns;  /* sum over threads of globaltimer ns in the loop */
    uint64_t lat_cycles_sum;
    uint64_t reserved[7];
    uint64_t hist[BAM_BENCH_HIST_BUCKETS];
} bam_bench_result;

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
BAM_ABI_ASSERT(sizeof(bam_error_entry) == 32, "bam_error_entry");
BAM_ABI_ASSERT(sizeof(bam_error_log) == 32, "bam_error_log");
BAM_ABI_ASSERT(sizeof(bam_io_view) == 112, "bam_io_view");
BAM_ABI_ASSERT(sizeof(bam_sim_ssd) == 128, "bam_sim_ssd");
BAM_ABI_ASSERT(sizeof(bam_sim_queue) == 128, "bam_sim_queue");
BAM_ABI_ASSERT(sizeof(bam_sim_pending) == 16, "bam_sim_pending");
BAM_ABI_ASSERT(sizeof(bam_sim_region) == 32, "bam_sim_region");
BAM_ABI_ASSERT(sizeof(bam_sim_control) == 128, "bam_sim_control");
BAM_ABI_ASSERT(sizeof(bam_sim_view) == 48, "bam_sim_view");
BAM_ABI_ASSERT(sizeof(bam_bench_params) == 64, "bam_bench_params");
BAM_ABI_ASSERT(sizeof(bam_raw_cmd) == 24, "bam_raw_cmd");
BAM_ABI_ASSERT(sizeof(bam_bench_result) == 128 + 8 * BAM_BENCH_HIST_BUCKETS, "bam_bench_result");

#endif /* BAM_ABI_H */
