/*
 * file_abi.h — the file backend's structs: its forwarder kernel (file.cu beside this
 * file) and its CPU service (crates/bam/src/storage/file/). Not part of the public device
 * headers. Plain C, fixed-width fields; each struct has a #[repr(C)] twin in
 * crates/bam/src/storage/file/abi.rs (sizes asserted on both sides, offsets compared by
 * crates/bam/tests/layout.rs).
 *
 * The GPU's NVMe queues stay in GPU memory, as on every backend. The forwarder kernel
 * serves them on the GPU: it fetches and validates SQEs, and hands each command to the
 * CPU as a request in pinned host memory. CPU service threads execute requests with
 * io_uring and post completions there. The forwarder moves the data between a staging
 * slot in pinned host memory and the command's PRP targets in GPU memory, and posts the
 * NVMe completion.
 *
 * Per queue, in pinned host memory (the CPU's pointers and the GPU's mapping of them):
 *   bam_file_ring                the two producer counters;
 *   bam_file_req[nslots]         requests, written by the GPU at req_prod % nslots;
 *   bam_file_cpl[nslots]         completions, written by the CPU at cpl_prod % nslots;
 *   staging[nslots * slot_bytes] one staging slot per request in flight.
 * A request holds its staging slot until the forwarder has consumed its completion, so
 * at most nslots requests are in flight and neither ring can overrun.
 */
#ifndef BAM_FILE_ABI_H
#define BAM_FILE_ABI_H

#include <bam/abi.h>

/* bam_file_req.op */
#define BAM_FILE_OP_READ 1u  /* file -> staging; the forwarder copies staging -> PRPs  */
#define BAM_FILE_OP_WRITE 2u /* the forwarder copied PRPs -> staging; staging -> file  */
#define BAM_FILE_OP_FLUSH 3u /* fdatasync                                              */
#define BAM_FILE_OP_ECHO 4u  /* no I/O: complete with bam_file_req.status (a command the
                              * forwarder refused: opcode, namespace, range, PRPs)      */

/* One request (GPU writes, CPU reads). */
typedef struct bam_file_req {
    uint64_t offset; /* byte offset in the SSD's file                                 */
    uint32_t bytes;  /* bytes to move                                                 */
    uint16_t slot;   /* staging slot: data at staging + slot * slot_bytes             */
    uint8_t op;      /* BAM_FILE_OP_*                                                 */
    uint8_t pad;
    uint16_t ssd;    /* which file                                                    */
    uint16_t status; /* ECHO: the NVMe status field to complete with                  */
    uint32_t seq;    /* request number (req_prod before it was posted): a check       */
} bam_file_req;

/* One completion (CPU writes, GPU reads). */
typedef struct bam_file_cpl {
    uint16_t slot;   /* the request's staging slot                                    */
    uint16_t status; /* NVMe status field ((SCT << 8) | SC), 0: success               */
    uint32_t seq;    /* the request's seq: a check                                    */
} bam_file_cpl;

/* The counters of one queue's rings, each in its own 64-byte line. The GPU stores
 * req_prod with release at system scope after the requests (and a write's staged data);
 * the CPU loads it with acquire. The CPU stores cpl_prod with release after the
 * completions (and a read's data in staging: the io_uring completion came first); the GPU
 * loads it with acquire at system scope. */
typedef struct bam_file_ring {
    uint32_t req_prod;
    uint32_t pad0[15];
    uint32_t cpl_prod;
    uint32_t pad1[15];
} bam_file_ring;

/* One I/O queue pair as the forwarder serves it (GPU memory). Pointers to host memory
 * are the GPU's mapping of it. The *_state fields belong to the one warp that serves
 * the queue; the counters are published for the host. */
typedef struct bam_file_queue {
    uint64_t sq;       /* bam_sqe[depth]                                               */
    uint64_t cq;       /* bam_cqe[depth]                                               */
    uint64_t sq_db;    /* uint32_t doorbells (GPU memory)                              */
    uint64_t cq_db;
    uint64_t ring;     /* bam_file_ring*, host memory                                  */
    uint64_t reqs;     /* bam_file_req[nslots], host memory                           */
    uint64_t cpls;     /* bam_file_cpl[nslots], host memory                           */
    uint64_t staging;  /* nslots * slot_bytes, host memory                             */
    uint64_t slots;    /* bam_file_slot[nslots] then uint16_t free[nslots], GPU memory */
    uint32_t depth;
    uint16_t qid;
    uint16_t ssd;
    uint32_t nslots;   /* staging slots (at most 65536)                                */
    uint32_t slot_bytes;
    /* state */
    uint32_t sq_head;  /* next SQ entry to fetch (mod depth)                           */
    uint32_t cq_tail;  /* next CQ entry to post (absolute: phase = lap parity)         */
    uint32_t cq_head;  /* the host's CQ head doorbell last read (mod depth)            */
    uint32_t req_prod; /* requests posted                                              */
    uint32_t cpl_cons; /* completions consumed                                         */
    uint32_t free_top; /* free staging slots on the stack                              */
    /* counters */
    uint64_t reads;
    uint64_t writes;
    uint64_t others;
    uint64_t read_bytes;
    uint64_t write_bytes;
    uint64_t errors;
    uint64_t refused;  /* completions the CPU posted that named no request in flight  */
    uint64_t bad_doorbells; /* SQ tail doorbell values outside the queue               */
    uint64_t reserved[2];
} bam_file_queue;

/* What the forwarder keeps about a request in flight (GPU memory, per staging slot). */
typedef struct bam_file_slot {
    uint64_t prp1;
    uint64_t prp2;
    uint32_t bytes;
    uint16_t cid;
    uint8_t op;
    uint8_t busy;
    uint32_t seq;
    uint32_t pad;
} bam_file_slot;

/* One file as the forwarder sees it: namespace geometry. */
typedef struct bam_file_ssd {
    uint64_t nlb;
    uint32_t lba_shift;
    uint32_t nsid;
    uint32_t mdts_bytes;
    uint32_t pad;
} bam_file_ssd;

/* Control block (GPU memory): stop, handshake. */
typedef struct bam_file_control {
    uint32_t stop;
    uint32_t started;
    uint32_t exited;
    uint32_t pad;
    uint64_t loops;
    uint64_t reserved[13];
} bam_file_control;

/* The forwarder's parameters. PRPs must lie in [buf, buf + buf_len): the I/O layer's
 * buffer region (its bus addresses are its device addresses on this backend). */
typedef struct bam_file_view {
    uint64_t queues;  /* bam_file_queue[nqueues]                                        */
    uint64_t ssds;    /* bam_file_ssd[nssd]                                             */
    uint64_t control; /* bam_file_control*                                             */
    uint64_t buf;
    uint64_t buf_len;
    uint32_t nqueues;
    uint32_t nssd;
} bam_file_view;

#endif
