// bam/error.cuh — the device-side error log.
//
// Every failed I/O is recorded (kind, ssd, queue, cid, opcode, LBA, status) and sets a
// sticky flag. The host reads the log after a kernel and turns entries into typed Rust
// errors (crates/bam/src/error.rs). Recording never blocks: past `capacity` entries
// only the count grows.
#pragma once

#include <stdint.h>

#include "abi.h"
#include "util.cuh"

namespace bam {

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
    atomic_dev<uint32_t>(log->flag).store(1u, cuda::memory_order_relaxed);
    const uint32_t i = atomic_dev<uint32_t>(log->count).fetch_add(1u, cuda::memory_order_relaxed);
    if (i < log->capacity) {
        bam_error_entry* e = reinterpret_cast<bam_error_entry*>(log->entries) + i;
        e->lba = lba;
        e->time_ns = globaltimer();
        e->status = status;
        e->ssd = ssd;
        e->qid = qid;
        e->cid = static_cast<uint16_t>(cid);
        e->opcode = opcode;
        e->kind = static_cast<uint8_t>(kind);
        e->nlb = nlb;
    }
}
}  // namespace detail

/// Records an error. Out of line (`inline` only for the one-definition rule of a header):
/// it is on error paths only, and inlined at every call site it made the cache's miss
/// path about 10 % more code (measured when that path did its own I/O). The paths that
/// bam::array inlines into user kernels use detail::record_error instead (above: why).
__device__ inline __noinline__ void log_error(const bam_io_view& io, uint32_t kind, uint16_t ssd,
                                          uint16_t qid, uint32_t cid, uint8_t opcode, uint64_t lba,
                                          uint32_t nlb, uint32_t status) {
    detail::record_error(io, kind, ssd, qid, cid, opcode, lba, nlb, status);
}

/// True once any error has been recorded (cheap: one relaxed load).
__device__ __forceinline__ bool error_flag(const bam_io_view& io) {
    bam_error_log* log = reinterpret_cast<bam_error_log*>(io.errlog);
    return log != nullptr && atomic_dev<uint32_t>(log->flag).load(cuda::memory_order_relaxed) != 0;
}

}  // namespace bam
