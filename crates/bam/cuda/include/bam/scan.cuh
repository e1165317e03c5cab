// bam/scan.cuh — sequential scans of large byte ranges ("spans") of the array, chunk by
// chunk, without the cache: the reads are whole chunks (large commands, up to MDTS each)
// into the scan's own I/O buffer slots, issued ahead of the block that consumes them.
//
//   extern "C" __global__ void sum(const __grid_constant__ bam_scan_view v, unsigned long long* out) {
//       bam::scan_reader r(v);        // every thread of the block
//       unsigned long long s = 0;
//       while (r.next()) {            // every thread: the next chunk of each span is in GPU memory
//           const uint32_t* x = reinterpret_cast<const uint32_t*>(r.data(0));
//           for (uint32_t i = threadIdx.x; i < r.bytes(0) / 4; i += blockDim.x) s += x[i];
//       }
//       atomicAdd(out, s);            // r.status() != bam::OK: a read failed (the host's
//   }                                 // check_errors() says which)
//
// Which chunks: block b reads chunks b, b + G, b + 2G, ... (G = the grid's blocks) of every
// span in lockstep (chunk k of each span together: the columns of one row range), keeping
// up to `depth` chunks in flight, so that the SSDs work on the next chunks while the block
// computes on this one. Chunk k of a span is its bytes [k C, (k + 1) C) followed by up to
// `halo` bytes of what comes after (records that cross the chunk's end: a text row).
//
// Who issues: the lanes of warp 0, one lane per piece (a chunk plus its halo, cut at
// stripe-unit boundaries: each piece lies on one SSD), on the SSD's queue pair numbered
// by the block's ring position (spread_qp: every queue pair in use, whatever the block size).
//
// Rules: blocks of at least 32 threads and a 1-D grid of at most ScanView's max blocks
// (the host's Scan::blocks()); one reader per block at a time; every thread of the block
// calls the constructor and next() (both contain __syncthreads()); a kernel that leaves
// the loop before next() returned false calls close() first (chunks read ahead are still
// on their way into the block's slots). The parameter is `const __grid_constant__` so
// that the reader can keep a pointer to it instead of a copy.
//
// Memory ordering: a piece is complete when its lane's wait() returned OK, which is
// after an acquire of the completion entry and a fence (bam/detail/queue.cuh); the
// __syncthreads() after the waits orders every thread's reads of the chunk after them.
// A slot is refilled only after the __syncthreads() that begins the next call to next(),
// that is after every thread's reads of the chunk it held.
// Every wait is bounded by the I/O view's timeout; a failed read ends the scan for the
// block (next() returns false, status() says why) and is in the host's error log.
#pragma once

#include <stdint.h>

#include "abi.h"
#include "error.cuh"
#include "io.cuh"
#include "nvme.cuh"
#include "util.cuh"

namespace bam {

namespace detail {

/// The block's scan status (one reader per block): shared by all its threads.
__device__ __forceinline__ int& scan_block_status() {
    __shared__ int status;
    return status;
}

/// Flat index of the calling thread in its block, and the block's size.
__device__ __forceinline__ uint32_t block_tid() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ uint32_t block_threads() { return blockDim.x * blockDim.y * blockDim.z; }

/// One read of a chunk: a range of one span within one stripe unit (one SSD).
struct scan_piece {
    uint64_t glba;     // global (striped) LBA
    uint32_t nlb;      // LBAs
    uint32_t span;     // which span
    uint64_t buf_off;  // offset of the piece in the chunk's slot
};

/// Piece `j` (counting over the spans in order) of chunk `k`; false if there is none.
/// A span's chunk plus its halo, rounded up to whole LBAs (the span owns whole LBAs),
/// cut at the stripe units of the striped address space.
__device__ inline bool scan_piece_of(const bam_scan_view& v, uint64_t k, uint32_t j, scan_piece& p) {
    const uint32_t sh = v.lba_shift;
    const uint64_t lba_bytes = 1ull << sh;
    const uint64_t unit = static_cast<uint64_t>(v.io.stripe_lbas) << sh;
    uint32_t idx = 0;
    for (uint32_t s = 0; s < v.nspans && s < BAM_SCAN_MAX_SPANS; ++s) {
        const bam_span_view& sp = v.spans[s];
        const uint64_t start = k * sp.chunk_bytes;
        if (start >= sp.bytes) continue;
        uint64_t end = start + sp.chunk_bytes + sp.halo_bytes;
        if (end > sp.bytes) end = sp.bytes;
        end = (end + lba_bytes - 1) & ~(lba_bytes - 1);
        const uint64_t g0 = (sp.first_lba << sh) + start;  // global byte address
        const uint64_t g1 = g0 + (end - start);
        const uint64_t u0 = g0 / unit;
        const uint32_t n = static_cast<uint32_t>((g1 - 1) / unit - u0 + 1);
        if (j < idx + n) {
            const uint64_t u = u0 + (j - idx);
            const uint64_t a = u == u0 ? g0 : u * unit;
            const uint64_t b = (u + 1) * unit < g1 ? (u + 1) * unit : g1;
            p.glba = a >> sh;
            p.nlb = static_cast<uint32_t>((b - a) >> sh);
            p.span = s;
            p.buf_off = a - g0;
            return true;
        }
        idx += n;
    }
    return false;
}

}  // namespace detail

/// A block's sequential reader over a scan (see the top of this file).
class scan_reader {
  public:
    /// Block-collective: checks the launch against the scan and starts the first
    /// `depth` chunks of this block.
    __device__ explicit scan_reader(const bam_scan_view& v)
        : v_(&v), block_(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)),
          grid_(gridDim.x * gridDim.y * gridDim.z), i_(-1) {
        bool ok = detail::block_threads() >= 32 && v.depth >= 1 && v.depth <= BAM_SCAN_MAX_DEPTH &&
                        v.nspans >= 1 && v.nspans <= BAM_SCAN_MAX_SPANS &&
                        static_cast<uint64_t>(grid_) * v.depth * v.nspans <= v.nslots;
        const uint32_t tid = detail::block_tid();
        // A failed queue pair (any: the slots' earlier reads may have used any of them)
        // may still deliver a late read into this scan's slots: read nothing until the
        // host recovered it (IoArray::recover). Warp 0 looks, one load per queue pair.
        bool failed = false;
        if (ok && tid < 32) {
            const bam_qp_view* qps = reinterpret_cast<const bam_qp_view*>(v.io.qps);
            for (uint32_t i = tid; i < v.io.nqp && !failed; i += 32) {
                const bam_qp_state* st = reinterpret_cast<const bam_qp_state*>(__ldg(&qps[i].state));
                failed = atomic_dev<uint64_t>(const_cast<uint64_t&>(st->failed)).load(cuda::memory_order_relaxed) != 0;
            }
            failed = __any_sync(0xffffffffu, failed);
        }
        if (tid == 0) {
            detail::scan_block_status() = !ok ? BAM_ERR_INVALID : failed ? BAM_ERR_ABORTED : OK;
            if (!ok && block_ == 0) log_error(v.io, BAM_ERR_INVALID, 0, 0, 0xffff, nvme::OP_READ, 0, 0, 0x5ca0);
            if (ok && failed && block_ == 0)
                log_error(v.io, BAM_ERR_ABORTED, 0, 0, 0xffff, nvme::OP_READ, 0, 0, BAM_SCAN_ERR_QUEUE_FAILED);
        }
        ok = ok && !failed;
        for (uint32_t d = 0; d < BAM_SCAN_MAX_DEPTH; ++d) h_[d].submitted = 0;
        err_ = OK;
        if (ok && tid < 32) {
            for (uint32_t d = 0; d < v.depth; ++d) issue(block_ + static_cast<uint64_t>(d) * grid_, d);
        }
        __syncthreads();
    }

    /// Block-collective: gives the current chunk's slots back (refilled with the chunk
    /// `depth` ahead), waits for the next chunk of this block and returns true, or
    /// returns false when the block has no more chunks or a read failed (status()).
    __device__ bool next() {
        const bam_scan_view& v = *v_;
        __syncthreads();  // every thread is done with chunk i_: its slots may be refilled
        int& shared_status = detail::scan_block_status();
        const uint32_t tid = detail::block_tid();
        if (tid < 32 && shared_status == OK) {
            status_t st = err_;
            if (i_ >= 0) issue(chunk_of(i_ + v.depth), static_cast<uint32_t>(i_ % v.depth));
            const int64_t i = i_ + 1;
            if (chunk_of(i) < v.chunks) {
                io_handle& h = h_[i % v.depth];
                if (h.submitted != 0) {
                    const status_t w = wait<true>(v.io, h);
                    if (st == OK) st = w;
                }
            }
            if (st == OK) st = err_;
            const uint32_t bad = __ballot_sync(0xffffffffu, st != OK);
            if (bad != 0 && tid == static_cast<uint32_t>(__ffs(bad) - 1)) shared_status = st;
        }
        ++i_;
        __syncthreads();
        if (shared_status != OK) {
            drain();
            return false;
        }
        return chunk_of(i_) < v.chunks;
    }

    /// Block-collective: waits for the reads still in flight (for a kernel that leaves
    /// the loop early). The reader is done afterwards.
    __device__ void close() {
        __syncthreads();
        drain();
        i_ = static_cast<int64_t>(v_->chunks);  // past the end
    }

    /// The chunk's bytes of span `s` (valid until the next call to next()).
    __device__ __forceinline__ const char* data(uint32_t s) const {
        const bam_scan_view& v = *v_;
        const uint64_t slot = v.first_slot + (static_cast<uint64_t>(block_) * v.depth + i_ % v.depth) * v.nspans + s;
        return reinterpret_cast<const char*>(v.io.buf.base + slot * v.io.buf.slot_bytes);
    }
    /// Index of the current chunk (the same in every span).
    __device__ __forceinline__ uint64_t chunk() const { return chunk_of(i_); }
    /// Byte offset of data(s)[0] in span `s`.
    __device__ __forceinline__ uint64_t offset(uint32_t s) const { return chunk() * v_->spans[s].chunk_bytes; }
    /// Bytes of the chunk in span `s` (the last chunk may be shorter; 0 past the span's end).
    __device__ __forceinline__ uint32_t bytes(uint32_t s) const {
        const bam_span_view& sp = v_->spans[s];
        const uint64_t off = offset(s);
        if (off >= sp.bytes) return 0;
        return sp.bytes - off < sp.chunk_bytes ? static_cast<uint32_t>(sp.bytes - off) : sp.chunk_bytes;
    }
    /// Bytes after the chunk that were read with it (data(s)[bytes(s) .. + halo(s))).
    __device__ __forceinline__ uint32_t halo(uint32_t s) const {
        const bam_span_view& sp = v_->spans[s];
        const uint64_t end = offset(s) + bytes(s);
        if (end >= sp.bytes) return 0;
        return sp.bytes - end < sp.halo_bytes ? static_cast<uint32_t>(sp.bytes - end) : sp.halo_bytes;
    }
    /// OK, or why the scan ended early for this block (BAM_ERR_*).
    __device__ __forceinline__ status_t status() const { return detail::scan_block_status(); }

  private:
    __device__ __forceinline__ uint64_t chunk_of(int64_t i) const {
        return block_ + static_cast<uint64_t>(i) * grid_;
    }

    /// Lanes of warp 0: start the reads of chunk `k` into ring position `r`.
    __device__ void issue(uint64_t k, uint32_t r) {
        const bam_scan_view& v = *v_;
        if (k >= v.chunks) return;
        detail::scan_piece p;
        if (!detail::scan_piece_of(v, k, lane_id(), p)) return;
        uint32_t ssd;
        uint64_t lba;
        stripe_map(v.io, p.glba, ssd, lba);
        const uint64_t slot = v.first_slot + (static_cast<uint64_t>(block_) * v.depth + r) * v.nspans + p.span;
        void* buf = reinterpret_cast<void*>(v.io.buf.base + slot * v.io.buf.slot_bytes + p.buf_off);
        // One submitting warp per block: spread by chunk in flight, not by warp (default_qp).
        const uint32_t qp = spread_qp(v.io, ssd, block_ * v.depth + r);
        const status_t st = submit_on<true>(v.io, qp, nvme::OP_READ, ssd, lba, p.nlb, buf, h_[r]);
        if (st != OK && err_ == OK) err_ = st;
    }

    /// Every thread: warp 0's lanes wait for all their reads still in flight; then the
    /// block synchronises (nothing can land in the slots after this returns).
    __device__ void drain() {
        if (detail::block_tid() < 32) {
            for (uint32_t d = 0; d < BAM_SCAN_MAX_DEPTH; ++d)
                if (h_[d].submitted != 0) (void)wait<true>(v_->io, h_[d]);
        }
        __syncthreads();
    }

    const bam_scan_view* v_;
    uint32_t block_;
    uint32_t grid_;
    int64_t i_;  // this block's current chunk number (chunk block_ + i_ * grid_)
    status_t err_;
    io_handle h_[BAM_SCAN_MAX_DEPTH];  // lanes of warp 0: the piece in flight per ring slot
};

}  // namespace bam
