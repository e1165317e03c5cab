/*
 * sim_abi.h — the simulated SSD array's structs (its controller kernel, sim.cu beside this
 * file, and crates/bam/src/storage/sim/). Not part of the public device headers.
 * Plain C, fixed-width fields; each struct has a #[repr(C)] twin in crates/bam/src/storage/sim/abi.rs
 * (sizes asserted on both sides, offsets compared by crates/bam/tests/layout.rs).
 */
#ifndef BAM_SIM_ABI_H
#define BAM_SIM_ABI_H

#include <bam/abi.h>

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
                            * the host may change these fields while the kernel runs
                            * (bam_sim_control.fault_epoch)                            */
    uint32_t flags;        /* BAM_SIM_LIE_*: how their completions lie (0: they don't)  */
    uint64_t vclock;       /* uint64_t*: the SSD's virtual clock in ps (rate caps)      */
    uint64_t lie_ns;       /* BAM_SIM_LIE_WITHHOLD: how late the completion comes       */
    uint64_t reserved;
} bam_sim_ssd;

/* A lying controller (bam_sim_ssd.flags, for the commands in the fault range): what the
 * completions of those commands do wrong. The host's queues must end each in a typed
 * error and never take a wrong value as success (docs/robustness.md). */
#define BAM_SIM_LIE_NONE 0u
#define BAM_SIM_LIE_DUPLICATE 1u   /* the CQE is posted twice                               */
#define BAM_SIM_LIE_OTHER_CID 2u   /* the CQE names another command completed with it       */
#define BAM_SIM_LIE_UNSUBMITTED 3u /* an extra CQE names the slot's next, unsubmitted
                                    * command (CID + queue depth)                            */
#define BAM_SIM_LIE_STALE 4u       /* with the CQE, the previous lying command's CQE again
                                    * (its slot reused or released by then)                   */
#define BAM_SIM_LIE_PHASE 5u       /* the CQE is posted with the wrong phase (never seen)    */
#define BAM_SIM_LIE_SQ_HEAD 6u     /* the CQE's SQ head is outside the queue                 */
#define BAM_SIM_LIE_WITHHOLD 7u    /* the CQE comes lie_ns late (past the host's timeout)    */
#define BAM_SIM_LIE_FLOOD 8u       /* after the CQE, a queue depth of copies of it, ignoring
                                    * the CQ head (a controller that keeps posting)         */
#define BAM_SIM_LIE_MASK 0xffu

/* One I/O queue pair as the simulated controller sees it. The *_state fields are
 * owned by the one warp that serves the queue. */
typedef struct bam_sim_queue {
    uint64_t sq;         /* bam_sqe* (translated from the IOVA given at Create I/O SQ) */
    uint64_t cq;         /* bam_cqe*                                                   */
    uint64_t sq_db;      /* uint32_t*: where the host's SQ tail doorbell stores land    */
    uint64_t cq_db;      /* uint32_t*: CQ head doorbell                                 */
    uint64_t pending;    /* bam_sim_pending[depth]: fetched, not yet posted             */
    uint64_t cid_bitmap; /* uint32_t[2048]: CIDs in flight                              */
    uint32_t depth;      /* entries, | BAM_SIM_Q_SYSTEM for another GPU's queue         */
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
    uint32_t flags;  /* bit 0: CID conflict (do not free the CID when posting);
                      * bits 8..15: BAM_SIM_LIE_* of the command                   */
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
/* In bam_sim_queue.depth (the high bit; the depth is the rest): the queue, its
 * doorbells' writers and its buffers are on another GPU, reached through peer access:
 * the controller kernel polls, acquires and releases it at system scope. */
#define BAM_SIM_Q_SYSTEM 0x80000000u

/* Host <-> simulator control block, in GPU memory: the kernel uses device-scope atomics,
 * the host copies to and from it on a non-blocking stream while the kernel runs. */
typedef struct bam_sim_control {
    uint32_t stop;    /* host sets 1: the controller kernel exits          */
    uint32_t stall;   /* host sets 1: stop serving (fault: stalled device) */
    uint32_t started; /* blocks that entered their loop (handshake)       */
    uint32_t exited;  /* blocks that left                                 */
    uint64_t loops;   /* service loop iterations of warp 0 (liveness)     */
    uint64_t clock_base;  /* globaltimer time base of the virtual clocks (set by block 0) */
    /* Profile of warp 0, published with `loops` every 64 iterations: */
    uint64_t prof_cycles; /* SM cycles in the service loop                        */
    uint64_t prof_fetch;  /* ... in visits that fetched commands                  */
    uint64_t prof_post;   /* ... in visits that posted completions                */
    uint64_t prof_cmds;   /* commands fetched                                     */
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

BAM_ABI_ASSERT(sizeof(bam_sim_ssd) == 128, "bam_sim_ssd");
BAM_ABI_ASSERT(sizeof(bam_sim_queue) == 128, "bam_sim_queue");
BAM_ABI_ASSERT(sizeof(bam_sim_pending) == 16, "bam_sim_pending");
BAM_ABI_ASSERT(sizeof(bam_sim_region) == 32, "bam_sim_region");
BAM_ABI_ASSERT(sizeof(bam_sim_control) == 128, "bam_sim_control");
BAM_ABI_ASSERT(sizeof(bam_sim_view) == 48, "bam_sim_view");

#endif /* BAM_SIM_ABI_H */
