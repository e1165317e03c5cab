// bam/error.cuh — the device-side error log.
//
// Every failed I/O is recorded (kind, ssd, queue, cid, opcode, LBA, status) in the log of
// whoever owns the work (the io view's `errlog`: the I/O layer's, a cache's or a scan's).
// The host drains a log after a kernel and turns entries into typed Rust errors
// (crates/bam/src/error.rs). Recording never blocks: the log is a ring (abi.h,
// bam_error_log) and the host never writes it, so entries recorded while the host reads
// are kept for its next drain.
#pragma once

#include <stdint.h>

#include "abi.h"
#include "util.cuh"

namespace bam {

/// Result codes of device-side I/O calls (0 = success). `BAM_ERR_*` from abi.h.
using status_t = int;
constexpr status_t OK = 0;

/// Whether a command that ended with `rc` may still be in the device's hands: it timed
/// out, or its queue broke (a protocol violation, or a queue that had failed around it).
/// Its buffer may still be read or written by a late DMA, so the caller must not reuse
/// it. OK, an NVMe error status and a request refused as invalid are settled.
__host__ __device__ constexpr bool io_unsettled(status_t rc) {
    return rc == BAM_ERR_TIMEOUT || rc == BAM_ERR_PROTOCOL || rc == BAM_ERR_ABORTED;
}

namespace detail {
/// log_error's work, inlined. For the paths that bam::array inlines into user kernels
/// (range errors, cache timeouts): there a call costs registers in the kernel's loop even
/// when it never runs (values live across a call site must survive the callee, so ptxas
/// keeps more of them in local memory), and a ported kernel that reloads its loop index
/// from local memory after each acquire waits for L2 once more per access.
__device__ __forceinline__ void record_error(const bam_io_view& io, uint32_t kind, uint16_t ssd, uint16_t qid,
                                             uint32_t cid, uint8_t opcode, uint64_t lba, uint32_t nlb,
                                             uint32_t status) {
    bam_error_log* log = reinterpret_cast<bam_error_log*>(io.errlog);
    if (log == nullptr) return;
    if (kind == BAM_ERR_ABORTED) {
        // A consequence (abi.h): at most capacity / 2 of them a drain get an entry. The
        // host's base may be older than its last drain: then fewer get one.
        const uint32_t a = atomic_dev<uint32_t>(log->aborts).fetch_add(1u, cuda::memory_order_relaxed);
        const uint32_t base = atomic_dev<uint32_t>(log->abort_base).load(cuda::memory_order_relaxed);
        if (a - base >= log->capacity / 2u) {
            atomic_dev<uint32_t>(log->suppressed).fetch_add(1u, cuda::memory_order_relaxed);
            return;
        }
    }
    const uint32_t i = atomic_dev<uint32_t>(log->count).fetch_add(1u, cuda::memory_order_relaxed);
    bam_error_entry* e = reinterpret_cast<bam_error_entry*>(log->entries) + (i & (log->capacity - 1u));
    e->lba = lba;
    e->time_ns = globaltimer();
    e->status = status;
    e->ssd = ssd;
    e->qid = qid;
    e->cid = static_cast<uint16_t>(cid);
    e->opcode = opcode;
    e->kind = static_cast<uint8_t>(kind);
    e->nlb = nlb;
    // Release: the host that reads seq == i + 1 (after its copy's completion) reads the
    // fields above. Two errors that share an entry (the ring overrun) may mix fields;
    // the later seq says which one the entry holds, and the host counts the other lost.
    atomic_dev<uint32_t>(e->seq).store(i + 1u, cuda::memory_order_release);
}
}  // namespace detail

/// Records an error. Out of line (`inline` only for the one-definition rule of a header):
/// it is on error paths only, and inlined at every call site it made the cache's miss
/// path markedly larger (when that path did its own I/O). The paths that bam::array
/// inlines into user kernels use detail::record_error instead (above: why).
__device__ inline __noinline__ void log_error(const bam_io_view& io, uint32_t kind, uint16_t ssd,
                                          uint16_t qid, uint32_t cid, uint8_t opcode, uint64_t lba,
                                          uint32_t nlb, uint32_t status) {
    detail::record_error(io, kind, ssd, qid, cid, opcode, lba, nlb, status);
}

}  // namespace bam
