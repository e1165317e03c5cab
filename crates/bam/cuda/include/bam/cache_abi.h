/*
 * bam/cache_abi.h — structs shared between the Rust cache module
 * (crates/bam/src/cache/abi.rs) and the device cache (cache.cuh, array.cuh).
 * Plain C, fixed-width fields; sizes asserted here and in Rust, offsets compared by
 * crates/bam/tests/cache_layout.rs.
 */
#ifndef BAM_CACHE_ABI_H
#define BAM_CACHE_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "abi.h"

/* Line word (64 bits, one per line of backing data):
 *   bits 63..32  slot index holding the line (meaningful while VALID)
 *   bits 31..0   the 32-bit state word: VALID | BUSY | DIRTY | 9-bit generation |
 *                20-bit reference count
 * One fetch_add pins the line, reads its state and reads its slot. The generation
 * advances (mod 512) each time the line is filled: a reader that reads the line without
 * pinning it (bam::array's optimistic hit, array.cuh) reads the word before and after its
 * data and keeps the data only if slot, flags and generation are unchanged. References:
 * at most one per thread that holds the line, and a GPU runs fewer than 2^20 threads at
 * once (H100: 270,336). */
#define BAM_LINE_VALID 0x80000000u
#define BAM_LINE_BUSY 0x40000000u
#define BAM_LINE_DIRTY 0x20000000u
#define BAM_LINE_GEN 0x1ff00000u
#define BAM_LINE_GEN_ONE 0x00100000u
#define BAM_LINE_REFS 0x000fffffu
/* Slot tag (64 bits): 0 = empty, else TAG_USED | (array id << 40) | line. */
#define BAM_TAG_LOCK (1ull << 63)
#define BAM_TAG_USED (1ull << 62)
#define BAM_TAG_LINE_MASK ((1ull << 40) - 1)
/* A quarantined slot: an I/O on it timed out or its queue broke, so the device may still
 * use it. The tag stays locked with QUARANTINE for the life of the cache and the slot is
 * never taken again (one slot less; counted in CacheState). After a fill's read the tag is
 * LOCK | QUARANTINE (no line; flushes skip it). After a write-back it keeps naming its
 * line (LOCK | QUARANTINE | USED | id | line) and the line word keeps VALID, DIRTY and
 * BUSY: the line can no longer be read or written, and every flush counts it as failed
 * (BAM_CACHE_ERR_QUARANTINED in the error log), so its data is reported, not dropped. */
#define BAM_TAG_QUARANTINE (1ull << 61)
/* A spare slot: empty, held locked by a warp of the fill service for its next fill
 * (LOCK | RESERVED, no line). The clock and flushes pass it by; the service gives it back
 * (tag 0) when it stops, and the host takes every spare back before it places a resident
 * array (bam_cache_recall_spares). Spare slots are on top of the slots the cache was
 * asked for (bam_cache_dev.spare_warps), so holding them costs no line a cache would keep.
 * Which slot each warp holds is in the spare table, uint32_t[spare_warps] right after the
 * tags (tags + 8 * nslots bytes): warp w's spare, or 0xffffffff for none. The host starts
 * warp w with slot nslots - spare_warps + w. */
#define BAM_TAG_RESERVED (1ull << 60)

/* The table of array views (bam_array_view[max_arrays], one per array id) starts this many
 * bytes after the cache descriptor, in the same allocation: out-of-line paths find a view
 * without a load first. */
#define BAM_CACHE_VIEWS_OFFSET 256u
/* Statistics shards (bam_cache_dev.nshards): a thread adds to shard smid % this. */
#define BAM_CACHE_STAT_SHARDS 256u
/* bam_array_view.epl_shift of an array whose elements per line are not a power of two
 * (lines are then found by division). */
#define BAM_EPL_NO_SHIFT 0xffffffffu
/* The most lines a streaming miss reads ahead (bam_cache_dev.readahead;
 * CacheConfig::MAX_READAHEAD). */
#define BAM_CACHE_MAX_READAHEAD 16u

/* Layouts of an array over the SSDs. */
#define BAM_LAYOUT_STRIPE 0u    /* line l lives on SSD first + l % nssd           */
#define BAM_LAYOUT_REPLICATE 1u /* every SSD holds every line; reads spread       */

/* The error-log detail codes of the cache (BAM_CACHE_ERR_*) are in abi.h, beside the
 * error log's other codes. */
/* bam_cache_arr.flags */
#define BAM_ARR_F_READ_ONLY 1u /* never written back (shared read-only: docs/multi-gpu.md) */

/* One array registered with a cache. */
typedef struct bam_cache_arr {
    uint64_t words;     /* uint64_t[nlines] line words, GPU memory          */
    uint64_t nlines;
    uint64_t start_lba; /* first LBA of the array on each SSD it uses       */
    uint32_t line_lbas; /* LBAs per line                                    */
    uint32_t layout;    /* BAM_LAYOUT_*                                     */
    uint32_t first_ssd;
    uint32_t nssd;
    uint32_t live;      /* 1 while the array exists                         */
    uint32_t flags;     /* BAM_ARR_F_*                                      */
    uint64_t prefetching; /* read-ahead fills of this array posted and not yet done (the
                           * flush that drops the array waits for 0: a read-ahead outlives
                           * the kernel that asked for it) */
    uint32_t resident;  /* references every line holds for Array::make_resident guards
                         * (a flush treats a line with exactly these as unpinned)        */
    uint32_t reserved;
} bam_cache_arr;

/* Statistics, one shard per 128 bytes (shard = SM id % nshards). */
typedef struct bam_cache_stats {
    uint64_t accesses;   /* element accesses through array / array_ref / line views */
    uint64_t hits;       /* line lookups that found the line valid (docs/cache.md)   */
    uint64_t misses;     /* line acquisitions that filled the line                   */
    uint64_t evictions;  /* valid lines evicted                                      */
    uint64_t writebacks; /* dirty lines written back (eviction and flush)            */
    uint64_t reads;      /* read commands issued (line fills)                        */
    uint64_t writes;     /* write requests issued (per replica)                      */
    uint64_t errors;     /* failed fills, write-backs and timeouts                   */
    uint64_t waits;      /* acquisitions that had to wait for a busy line            */
    uint64_t readaheads; /* lines read ahead of a streaming miss (not counted as misses) */
    uint64_t reserved[6];
} bam_cache_stats;

/* The cache as the device sees it (GPU memory, written by the host). */
typedef struct bam_cache_dev {
    bam_io_view io;      /* the I/O layer (queues, SSDs, error log, buffer region)    */
    uint64_t data;       /* address of slot 0 (slots are slot_bytes apart)            */
    uint64_t slot_bytes; /* power of two >= line_bytes                                */
    uint64_t tags;       /* uint64_t[nslots]                                          */
    uint64_t arrays;     /* bam_cache_arr[max_arrays]                                 */
    uint64_t stats;      /* bam_cache_stats[nshards]                                  */
    uint64_t clock;      /* uint64_t: the clock hand (own 128-byte line)              */
    /* timeout_ns .. nslots share one 32-byte sector (offsets 160 .. 191): a miss loads the
     * timeout right after its pin, and L1 fills by sector, so the fill ring's descriptors
     * that the miss's post reads next (post_fill) come from L1, not from L2. */
    uint64_t timeout_ns; /* bound of every cache wait                                 */
    uint64_t ring;       /* uint64_t[1 << ring_shift]: the fill ring (misses to fill), then
                            uint32_t[1 << ring_shift]: given-up tickets (lap + 1, 0: none) */
    uint64_t fill_ctl;   /* bam_fill_ctl: the ring's tickets and the service's control */
    uint32_t ring_shift; /* log2 of the fill ring's entries                           */
    uint32_t nslots;     /* every slot: the cache's lines and the service's spares    */
    uint32_t line_bytes;
    uint32_t max_arrays;
    uint32_t nshards;
    uint32_t slot_shift;
    uint32_t readahead;  /* lines a streaming miss reads ahead, a grid stride apart (0: off) */
    uint32_t spare_warps; /* fill service warps 0 .. spare_warps - 1 keep a spare slot each
                           * (BAM_TAG_RESERVED: the spare table)                         */
    uint32_t fill_qp0;    /* fill queues: block b of the fill service owns queue pair
                           * s * k + fill_qp0 + b of SSD s (k: the io view's queue pairs per
                           * SSD), for b < fill_qps (bam/detail/fill_queue.cuh)                     */
    uint32_t fill_qps;    /* fill queue pairs per SSD the cache reserved (0: none)         */
} bam_cache_dev;

/* An entry of the fill ring (uint64_t; a bounded multi-producer, multi-consumer ring of
 * requests, see bam/detail/cache_service.cuh): ticket t = L * entries + index belongs to the
 * ring's lap L, and the entry is
 *   ((L mod 8) << BAM_FILL_LAP_SHIFT)                               free for ticket t,
 *   ((L mod 8) << BAM_FILL_LAP_SHIFT) | BAM_FILL_POSTED | key       holding its request,
 * where key = (array id << 40) | line | [BAM_FILL_PREFETCH] (array ids < 2^19, so keys
 * fit 60 bits with the read-ahead flag). The service frees it for lap L + 1. Zeroed
 * memory is an empty ring. */
#define BAM_FILL_LAP_SHIFT 61
#define BAM_FILL_POSTED (1ull << 60)
#define BAM_FILL_KEY_MASK ((1ull << 60) - 1)
/* A read-ahead request: nobody waits for it; a failure is dropped, not reported (a reader
 * of the line reads it again and reports its own error). */
#define BAM_FILL_PREFETCH (1ull << 59)

/* The fill ring's tickets and the fill service's control words, each in its own 128-byte
 * line (producers, consumers and the host touch them independently). */
typedef struct bam_fill_ctl {
    uint64_t tail;        /* next ticket a requester takes                             */
    uint64_t pad0[15];
    uint64_t head;        /* next ticket the service takes                             */
    uint64_t pad1[15];
    uint32_t stop;        /* host: 1 = the service's threads exit when idle            */
    uint32_t started;     /* blocks of the service that are running                    */
    uint64_t pad2[15];
} bam_fill_ctl;

/* Threads per block of the fill service (bam_cache_fill_service; one block takes an SM's
   whole register file: 128 registers a thread). docs/cache.md, "How many blocks", says why
   512 and not 256. */
#define BAM_FILL_SERVICE_THREADS 512u

/* What a kernel gets for one array (inside bam::array<T>, passed by value). */
typedef struct bam_array_view {
    uint64_t cache;      /* bam_cache_dev*                                     */
    uint64_t words;      /* line words of this array                           */
    uint64_t n;          /* elements                                           */
    uint64_t data;       /* address of slot 0 (copy of cache->data)            */
    uint32_t slot_shift; /* log2(slot_bytes)                                   */
    uint32_t line_bytes;
    uint32_t elem_size;  /* sizeof(T) the view was made for                    */
    uint32_t id;         /* index in the cache's array table                   */
    uint32_t epl;        /* elements per line                                  */
    uint32_t epl_shift;  /* log2(epl) if epl is a power of two, else BAM_EPL_NO_SHIFT */
    /* Copies of what the cache's hit and miss paths read, so that they read nothing from
     * global memory: kernels get this view as a parameter (the constant bank), which
     * acquires and fences leave alone, while each descriptor read from global memory
     * after an acquire is an L2 round trip (see bam/io.cuh, io_target). */
    uint64_t stats;      /* bam_cache_stats[BAM_CACHE_STAT_SHARDS] (copy of cache->stats) */
    uint64_t start_lba;  /* copies of this array's bam_cache_arr fields                    */
    uint32_t line_lbas;
    uint32_t layout;
    uint32_t first_ssd;
    uint32_t nssd;
    uint64_t clock;      /* the clock hand (copy of cache->clock)                       */
    /* Resident views only (Array::make_resident): uint32_t[lines], the slot of each line,
     * fixed while the guard lives (every line pinned), or with BAM_VIEW_F_CONTIGUOUS the
     * address of line 0's slot; 0 in ordinary views. */
    uint64_t slots;
    uint32_t flags;      /* BAM_VIEW_F_*                                                 */
    /* In the cache's table of views only (what the fill service reads): 0, or 1 + the slot
     * that line 0 of the array should take; the service then fills line L into slot
     * place - 1 + L when that slot is free (Array::make_resident, which checks where the
     * lines landed). 0 in views handed to kernels. */
    uint32_t place;
} bam_array_view;

/* bam_array_view::flags: a resident view (its `slots` table is set). A 32-bit flag
 * rather than a test of `slots`: the hit path tests it on every access, and a 64-bit test
 * of a kernel parameter costs a constant load and two compares there. */
#define BAM_VIEW_F_RESIDENT 1u
/* ... whose lines sit in consecutive slots of exactly one line each: `slots` is then the
 * address of line 0's slot, and element i is at ((T*)slots)[i] (no table). */
#define BAM_VIEW_F_CONTIGUOUS 2u
/* ... that counts accesses and hits (CacheConfig::count_hits; `stats` is set). A flag,
 * like RESIDENT, because the hit path tests it on every access. */
#define BAM_VIEW_F_COUNTING 4u
/* ... whose elements per line are not a power of two (epl_shift is BAM_EPL_NO_SHIFT). */
#define BAM_VIEW_F_EPL_DIV 8u
/* ... of a cache that reads ahead (CacheConfig::readahead above 0): a warp whose lanes all
 * missed in one line looks at the line's neighbours (detail::read_ahead). Without it the
 * miss path skips the look, a call and a round trip the read-ahead needs and nothing else
 * does. */
#define BAM_VIEW_F_READAHEAD 16u
/* The views whose reads take bam::array's general paths; every other view (ordinary,
 * counting nothing, a line found by a shift) reads on the lean path after one test. */
#define BAM_VIEW_F_GENERAL (BAM_VIEW_F_RESIDENT | BAM_VIEW_F_COUNTING | BAM_VIEW_F_EPL_DIV)

/* A line that make_resident did not pin (its entry in the slot table). */
#define BAM_RESIDENT_NO_SLOT 0xffffffffu

/* Result of the flush kernel. */
typedef struct bam_flush_result {
    uint64_t written;  /* dirty lines written back                     */
    uint64_t dropped;  /* lines invalidated (invalidate mode)          */
    uint64_t pinned;   /* lines skipped because they were still pinned */
    uint64_t failed;   /* write-backs that failed                      */
} bam_flush_result;

#ifdef __cplusplus
#define BAM_CACHE_ABI_ASSERT(c, m) static_assert(c, m)
#else
#define BAM_CACHE_ABI_ASSERT(c, m) _Static_assert(c, m)
#endif
BAM_CACHE_ABI_ASSERT(sizeof(bam_cache_arr) == 64, "bam_cache_arr");
BAM_CACHE_ABI_ASSERT(sizeof(bam_cache_stats) == 128, "bam_cache_stats");
BAM_CACHE_ABI_ASSERT(sizeof(bam_cache_dev) == 112 + 112, "bam_cache_dev");
BAM_CACHE_ABI_ASSERT(sizeof(bam_cache_dev) <= BAM_CACHE_VIEWS_OFFSET, "views after the descriptor");
/* The miss path's descriptors in one 32-byte sector (the descriptor starts its allocation). */
BAM_CACHE_ABI_ASSERT(offsetof(bam_cache_dev, timeout_ns) % 32 == 0 &&
                         offsetof(bam_cache_dev, ring_shift) + 4 <= offsetof(bam_cache_dev, timeout_ns) + 32,
                     "timeout_ns, ring, fill_ctl, ring_shift in one sector");
BAM_CACHE_ABI_ASSERT(sizeof(bam_array_view) == 112, "bam_array_view");
BAM_CACHE_ABI_ASSERT(sizeof(bam_flush_result) == 32, "bam_flush_result");
BAM_CACHE_ABI_ASSERT(sizeof(bam_fill_ctl) == 384, "bam_fill_ctl");

#endif /* BAM_CACHE_ABI_H */
