/*
 * bench_abi.h — the structs of the I/O benchmark and test kernels
 * (crates/bam-bench/cuda/bench.cu, crates/bam-tests/cuda/tests.cu).
 * Plain C, fixed-width fields; each struct has a #[repr(C)] twin in crates/bam-bench/src/abi.rs
 * (sizes asserted on both sides, offsets compared by crates/bam-bench/tests/layout.rs).
 */
#ifndef BAM_BENCH_ABI_H
#define BAM_BENCH_ABI_H

#include <bam/abi.h>

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

BAM_ABI_ASSERT(sizeof(bam_bench_params) == 64, "bam_bench_params");
BAM_ABI_ASSERT(sizeof(bam_raw_cmd) == 24, "bam_raw_cmd");
BAM_ABI_ASSERT(sizeof(bam_bench_result) == 128 + 8 * BAM_BENCH_HIST_BUCKETS, "bam_bench_result");

#endif /* BAM_BENCH_ABI_H */
