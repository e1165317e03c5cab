// bam/io.cuh — the I/O API for kernels.
//
//   bam::io_handle h;
//   bam::submit(io, bam::nvme::OP_READ, ssd, lba, nlb, buf, h);   // non-blocking
//   ...                                                          // (more submits)
//   bam::status_t st = bam::wait(io, h);                         // bounded wait
//
//   bam::read(io, ssd, lba, nlb, buf);     // synchronous (thread)
//   bam::warp_read(io, ssd, lba, nlb, buf); // synchronous, the calling lanes split the work
//
// `buf` must lie in the registered buffer region (io.buf); transfers larger than two
// controller pages must stay inside one buffer slot (its prebuilt PRP list is used).
// Requests larger than the SSD's MDTS are split into several commands on one queue.
// A cache (bam/cache.cuh) calls submit/wait with one line's LBA range and its slot.
#pragma once

#include <stdint.h>

#include "abi.h"
#include "error.cuh"
#include "nvme.cuh"
#include "detail/queue.cuh"
#include "util.cuh"

namespace bam {

/// An I/O in flight: `ncmds` commands with consecutive tickets on queue pair `qp`.
struct io_handle {
    uint64_t ticket = 0;
    uint64_t lba = 0;
    void* buf = nullptr;
    uint32_t qp = 0;
    uint32_t ncmds = 0;
    uint32_t nlb = 0;
    uint16_t ssd = 0;
    uint8_t opcode = 0;
    uint8_t submitted = 0;
};

__device__ __forceinline__ const bam_ssd_view& ssd_view(const bam_io_view& io, uint32_t ssd) {
    return reinterpret_cast<const bam_ssd_view*>(io.ssds)[ssd];
}

/// Bus address (IOVA) of an offset into the buffer region.
__device__ __forceinline__ uint64_t buf_iova(const bam_buf_view& b, uint64_t off) {
    if (b.iova_table == 0) return b.base + off;  // identity mapping (simulated array)
    const uint64_t* t = reinterpret_cast<const uint64_t*>(b.iova_table);
    return __ldg(t + (off >> b.iova_shift)) + (off & ((1ull << b.iova_shift) - 1));
}

/// PRP1/PRP2 for `bytes` at device address `addr` (NVMe base spec 2.0, 4.1.1).
__device__ __forceinline__ bool build_prps(const bam_buf_view& b, uint64_t addr, uint64_t bytes,
                                           uint64_t& prp1, uint64_t& prp2) {
    // Written so that nothing wraps: addr and bytes come from the caller.
    if (addr < b.base || bytes == 0 || bytes > b.len || addr - b.base > b.len - bytes || (addr & 3u) != 0) return false;
    const uint64_t off = addr - b.base;
    const uint64_t page = 1ull << b.page_shift;
    prp1 = buf_iova(b, off);
    const uint64_t first = page - (off & (page - 1));
    if (bytes <= first) {
        prp2 = 0;
        return true;
    }
    const uint64_t next = off + first;  // page aligned
    if (bytes - first <= page) {
        prp2 = buf_iova(b, next);
        return true;
    }
    // More than two pages: point PRP2 into this slot's prebuilt PRP list.
    if (b.prp_stride == 0 || b.slot_bytes == 0) return false;
    const uint64_t slot = off / b.slot_bytes;
    const uint64_t slot_start = slot * b.slot_bytes;
    if (slot >= b.nslots || off + bytes > slot_start + b.slot_bytes) return false;
    const uint64_t idx = (next - slot_start) >> b.page_shift;
    prp2 = buf_iova(b, b.prp_off + slot * b.prp_stride + idx * 8);
    return true;
}

/// Queue pair number `key` (mod the SSD's shared queue pairs) of `ssd`: the one rule that
/// spreads submitters over an SSD's shared queue pairs (not a cache's fill queues:
/// BAM_IO_SHARED_QPS_MASK). With a uniform layout (io.flags, BAM_IO_QPS_PER_SSD_SHIFT) it
/// reads no SSD view, so that the queue pair's view and the SSD's can be read in the same
/// round trip.
__device__ __forceinline__ uint32_t spread_qp(const bam_io_view& io, uint32_t ssd, uint32_t key) {
    const uint32_t k = io.flags >> BAM_IO_QPS_PER_SSD_SHIFT;
    const uint32_t shared = io.flags & BAM_IO_SHARED_QPS_MASK;
    if (k != 0) return ssd * k + key % (shared != 0 ? shared : k);
    const bam_ssd_view& s = ssd_view(io, ssd);
    return s.first_qp + key % s.nqueues;
}

/// The queue pair a thread uses by default for `ssd`: round-robin by warp (spread_qp),
/// so that the warps of a kernel where every warp submits use all of them. A kernel where
/// one warp of each block submits (a scan) spreads by its own key instead: warp numbers
/// of those warps are multiples of the warps per block, and would meet on a few.
__device__ __forceinline__ uint32_t default_qp(const bam_io_view& io, uint32_t ssd) {
    const uint32_t warp =
        (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) * ((blockDim.x * blockDim.y * blockDim.z + 31) / 32) +
        (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / 32;
    return spread_qp(io, ssd, warp / io.nssd);
}

/// Map an address in the striped space over all SSDs (unit: io.stripe_lbas LBAs) to an
/// SSD and its LBA. A request must not cross a stripe unit.
__device__ __forceinline__ void stripe_map(const bam_io_view& io, uint64_t glba, uint32_t& ssd,
                                           uint64_t& lba) {
    const uint64_t unit = io.stripe_lbas;
    const uint64_t stripe = glba / unit;
    ssd = static_cast<uint32_t>(stripe % io.nssd);
    lba = (stripe / io.nssd) * unit + glba % unit;
}

/// One SSD and one of its queue pairs, as a command needs them, read in one go. An
/// acquire or a fence empties the SM's L1 (CCTL.IVALL), after which every descriptor read
/// is an L2 round trip: the single-command path reads all of them before its first
/// acquire, in two dependent rounds (the I/O view, then the SSD's view and the queue
/// pair's view together; three when the queue pairs are not laid out uniformly, see
/// default_qp), and none after.
struct io_target {
    detail::qp_ref q;
    bam_buf_view buf;
    uint64_t nlb;  // namespace size
    uint32_t nsid;
    uint32_t lba_shift;
    uint32_t mdts_bytes;
    uint32_t ssd;
    uint32_t qpi;
    uint32_t nssd;  // SSDs of the I/O view (for validation)
};

/// The target for `ssd` on queue pair `qpi`.
__device__ __forceinline__ io_target load_target(const bam_io_view& io, uint32_t ssd, uint32_t qpi) {
    io_target t;
    t.nssd = io.nssd;
    t.buf = io.buf;
    t.ssd = ssd;
    t.qpi = qpi;
    const bam_ssd_view& s = ssd_view(io, ssd < t.nssd ? ssd : 0);
    t.nlb = s.nlb;
    t.nsid = s.nsid;
    t.lba_shift = s.lba_shift;
    t.mdts_bytes = s.mdts_bytes;
    t.q = detail::load_qp(io, qpi);
    return t;
}

/// The target for `ssd` on this thread's default queue pair (default_qp).
__device__ __forceinline__ io_target load_target(const bam_io_view& io, uint32_t ssd) {
    return load_target(io, ssd, default_qp(io, ssd < io.nssd ? ssd : 0));
}

/// Submit a read or write of `nlb` blocks at `lba` of the target's SSD into/from `buf`
/// on its queue pair, or (opcode nvme::OP_FLUSH; `lba`, `nlb` and `buf` ignored) an NVMe
/// Flush of the SSD's volatile write cache. Non-blocking apart from waiting for free queue slots. Lanes of a
/// warp that submit together share the ticket atomic and the doorbell; LONE: no warp
/// intrinsic (see co_active in util.cuh).
template <bool LONE = false>
__device__ inline status_t submit_to(const bam_io_view& io, const io_target& target, uint8_t opcode, uint64_t lba,
                                     uint32_t nlb, void* buf, io_handle& h) {
    const detail::qp_ref& q = target.q;
    const uint32_t ssd = target.ssd;
    h.submitted = 0;
    h.qp = target.qpi;
    h.ssd = static_cast<uint16_t>(ssd);
    h.lba = lba;
    h.nlb = nlb;
    h.buf = buf;
    h.opcode = opcode;
    // A Flush moves no data: one command without PRPs.
    const bool flush = opcode == nvme::OP_FLUSH;
    if (flush) nlb = 0;
    const uint64_t bytes = static_cast<uint64_t>(nlb) << target.lba_shift;
    uint64_t per_cmd = target.mdts_bytes ? target.mdts_bytes : bytes;
    if (per_cmd > (65536ull << target.lba_shift)) per_cmd = 65536ull << target.lba_shift;  // NLB is 16 bits
    // One command (the common case) without a 64-bit division (a ~100-instruction call).
    const uint32_t ncmds = flush            ? 1u
                           : nlb == 0         ? 0u
                           : bytes <= per_cmd ? 1u
                                              : static_cast<uint32_t>((bytes + per_cmd - 1) / per_cmd);
    // Nothing wraps: `lba` comes from the caller. An MDTS below one block (refused at
    // attach) would make every command 0 blocks long.
    bool bad = ssd >= target.nssd || (!flush && (nlb == 0 || nlb > target.nlb || lba > target.nlb - nlb)) ||
               ncmds > q.mask || static_cast<uint64_t>(q.ssd) != ssd ||
               (target.mdts_bytes != 0 && target.mdts_bytes >> target.lba_shift == 0);
    // Every lane that reaches this point takes part in reserve_tickets; a lane with a bad
    // request reserves nothing (k = 0).
    const uint64_t t0 = detail::reserve_tickets<LONE>(q, target.qpi, bad ? 0u : ncmds);
    if (bad) {
        log_error(io, BAM_ERR_INVALID, ssd, q.qid, 0xffff, opcode, lba, nlb, 0);
        return BAM_ERR_INVALID;
    }
    h.ticket = t0;
    h.ncmds = ncmds;
    status_t rc = OK;
    for (uint32_t i = 0; i < ncmds; ++i) {
        const uint64_t t = t0 + i;
        const uint64_t off = static_cast<uint64_t>(i) * per_cmd;
        const uint64_t len = bytes - off < per_cmd ? bytes - off : per_cmd;
        uint64_t prp1 = 0, prp2 = 0;
        const bool prp_ok = flush || build_prps(target.buf, reinterpret_cast<uint64_t>(buf) + off, len, prp1, prp2);
        if (rc == OK) rc = detail::wait_slot(io, q, t, opcode, lba);
        bam_sqe e;
        // A ticket cannot be given back: a command that is invalid on our side is still
        // submitted, as a Flush (harmless), so that the tail can move past it; the caller
        // gets BAM_ERR_INVALID from wait().
        if (flush) {
            nvme::make_rw(e, nvme::OP_FLUSH, detail::cid_of(t), target.nsid, 0, 1, 0, 0);
            e.cdw10 = e.cdw11 = e.cdw12 = 0;
        } else if (prp_ok) {
            nvme::make_rw(e, opcode, detail::cid_of(t), target.nsid, lba + (off >> target.lba_shift),
                          static_cast<uint32_t>(len >> target.lba_shift), prp1, prp2);
        } else {
            nvme::make_rw(e, nvme::OP_FLUSH, detail::cid_of(t), target.nsid, 0, 1, 0, 0);
            e.cdw10 = e.cdw11 = e.cdw12 = 0;
            bad = true;
        }
        if (rc == OK) detail::write_sqe(q, t, e);
    }
    if (rc != OK) return rc;  // timeouts were logged by wait_slot
    detail::publish_marks(q, t0, ncmds);
    rc = detail::push_tail<LONE>(io, q, target.qpi, t0, ncmds);
    h.submitted = bad ? 2 : 1;
    if (bad) log_error(io, BAM_ERR_INVALID, ssd, q.qid, t0 & q.mask, opcode, lba, nlb, 1);
    return rc;
}

/// submit_to on queue pair `qp` (use default_qp) of `ssd`.
template <bool LONE = false>
__device__ inline status_t submit_on(const bam_io_view& io, uint32_t qp, uint8_t opcode, uint32_t ssd,
                                     uint64_t lba, uint32_t nlb, void* buf, io_handle& h) {
    h.submitted = 0;
    if (qp >= io.nqp) {  // a queue pair the I/O layer does not have: its view would be out of bounds
        log_error(io, BAM_ERR_INVALID, static_cast<uint16_t>(ssd), 0, 0xffff, opcode, lba, nlb, 3);
        return BAM_ERR_INVALID;
    }
    return submit_to<LONE>(io, load_target(io, ssd, qp), opcode, lba, nlb, buf, h);
}

__device__ inline status_t submit(const bam_io_view& io, uint8_t opcode, uint32_t ssd, uint64_t lba,
                                  uint32_t nlb, void* buf, io_handle& h) {
    return submit_on(io, default_qp(io, ssd < io.nssd ? ssd : 0), opcode, ssd, lba, nlb, buf, h);
}

/// wait() with the handle's queue pair already loaded (`q` = detail::load_qp(io, h.qp): bam/detail/queue.cuh).
/// `log_status` false: a completion with an error status is returned, not logged (the
/// cache's read-aheads, which nobody asked for); timeouts and broken queues are logged.
template <bool LONE = false>
__device__ inline status_t wait_on(const bam_io_view& io, const detail::qp_ref& q, io_handle& h,
                                   bool log_status = true) {
    if (h.submitted == 0) return BAM_ERR_INVALID;
    status_t rc = h.submitted == 2 ? BAM_ERR_INVALID : OK;
    for (uint32_t i = 0; i < h.ncmds; ++i) {
        const uint64_t t = h.ticket + i;
        uint32_t status_field = 0;
        const status_t w = detail::wait_ticket<LONE>(io, q, h.qp, t, status_field);
        if (w != OK) {
            log_error(io, static_cast<uint32_t>(w), h.ssd, q.qid, t & q.mask, h.opcode, h.lba, h.nlb, 0);
            // Later tickets of this handle stay unreleased: the queue is marked failed.
            h.submitted = 0;
            return w;
        }
        if (status_field != 0 && h.submitted == 1) {
            if (log_status) log_error(io, BAM_ERR_NVME, h.ssd, q.qid, t & q.mask, h.opcode, h.lba, h.nlb, status_field);
            if (rc == OK) rc = BAM_ERR_NVME;
        }
    }
    h.submitted = 0;
    return rc;
}

/// Wait for every command of `h`; returns OK, BAM_ERR_NVME (first failing status
/// logged), BAM_ERR_TIMEOUT or BAM_ERR_ABORTED. Each wait is bounded by io.timeout_ns.
/// Returns after a fence that follows the acquire of the completions (bam/detail/queue.cuh).
template <bool LONE = false>
__device__ inline status_t wait(const bam_io_view& io, io_handle& h) {
    if (h.submitted == 0) return BAM_ERR_INVALID;
    if (h.qp >= io.nqp) {  // not a handle submit() filled in
        log_error(io, BAM_ERR_INVALID, h.ssd, 0, 0xffff, h.opcode, h.lba, h.nlb, 3);
        h.submitted = 0;
        return BAM_ERR_INVALID;
    }
    return wait_on<LONE>(io, detail::load_qp(io, h.qp), h);
}

/// Synchronous read/write by one thread on a loaded target. Requests needing more
/// commands than the queue can hold in flight are issued in rounds. LONE: for a lane
/// whose warp-mates wait for it in a warp collective (the cache's fills and write-backs).
/// On OK it returns after a fence that follows the acquire of the completions: a strong
/// store or RMW the caller makes afterwards releases the data read (bam/detail/queue.cuh).
template <bool LONE = false>
__device__ inline status_t rw_sync_to(const bam_io_view& io, const io_target& target, uint8_t opcode, uint64_t lba,
                                      uint32_t nlb, void* buf) {
    uint64_t per_cmd_lbas = target.mdts_bytes ? (target.mdts_bytes >> target.lba_shift) : nlb;
    if (per_cmd_lbas > 65536) per_cmd_lbas = 65536;
    const uint64_t round_lbas = per_cmd_lbas * target.q.mask;  // depth - 1 commands
    status_t rc = OK;
    for (uint64_t done = 0; done < nlb && rc == OK;) {
        const uint32_t n = static_cast<uint32_t>(nlb - done < round_lbas ? nlb - done : round_lbas);
        char* const at = static_cast<char*>(buf) + (done << target.lba_shift);
        io_handle h;
        rc = submit_to<LONE>(io, target, opcode, lba + done, n, at, h);
        if (rc == OK) rc = wait_on<LONE>(io, target.q, h);
        done += n;
    }
    return rc;
}

/// Synchronous read/write by one thread on its default queue pair of `ssd`.
template <bool LONE = false>
__device__ inline status_t rw_sync(const bam_io_view& io, uint8_t opcode, uint32_t ssd, uint64_t lba,
                                   uint32_t nlb, void* buf) {
    if (ssd >= io.nssd) {
        log_error(io, BAM_ERR_INVALID, ssd, 0, 0xffff, opcode, lba, nlb, 2);
        return BAM_ERR_INVALID;
    }
    return rw_sync_to<LONE>(io, load_target(io, ssd), opcode, lba, nlb, buf);
}

__device__ inline status_t read(const bam_io_view& io, uint32_t ssd, uint64_t lba, uint32_t nlb, void* buf) {
    return rw_sync(io, nvme::OP_READ, ssd, lba, nlb, buf);
}

__device__ inline status_t write(const bam_io_view& io, uint32_t ssd, uint64_t lba, uint32_t nlb, void* buf) {
    return rw_sync(io, nvme::OP_WRITE, ssd, lba, nlb, buf);
}

/// Warp-cooperative synchronous I/O: every active lane calls with the same arguments;
/// the request is cut into per-command chunks that the lanes submit together (one
/// ticket atomic for the warp), then all wait. Correct for partial warps.
__device__ inline status_t warp_rw(const bam_io_view& io, uint8_t opcode, uint32_t ssd, uint64_t lba,
                                   uint32_t nlb, void* buf) {
    const uint32_t group = __activemask();
    const uint32_t rank = __popc(group & lanemask_lt());
    const uint32_t p = __popc(group);
    if (ssd >= io.nssd) return BAM_ERR_INVALID;
    const bam_ssd_view& s = ssd_view(io, ssd);
    uint64_t chunk = s.mdts_bytes ? (s.mdts_bytes >> s.lba_shift) : nlb;
    if (chunk > 65536) chunk = 65536;
    if (chunk == 0) return BAM_ERR_INVALID;  // nlb 0, or MDTS below one block (refused at attach)
    const uint64_t nchunks = (nlb + chunk - 1) / chunk;
    status_t rc = OK;
    for (uint64_t base = 0; base < nchunks; base += p) {
        const uint64_t c = base + rank;
        io_handle h;
        status_t chunk_rc = OK;
        if (c < nchunks) {
            const uint64_t first = c * chunk;
            const uint32_t n = static_cast<uint32_t>(nlb - first < chunk ? nlb - first : chunk);
            chunk_rc = submit(io, opcode, ssd, lba + first, n, static_cast<char*>(buf) + (first << s.lba_shift), h);
            if (chunk_rc == OK) chunk_rc = wait(io, h);
        }
        __syncwarp(group);
        const uint32_t bad = __ballot_sync(group, chunk_rc != OK);
        if (bad) {
            // A chunk the device may still be working on outranks one that failed for
            // good: the caller must know whether the buffer may still be in use.
            const uint32_t open = __ballot_sync(group, io_unsettled(chunk_rc));
            const int src = __ffs(open != 0 ? open : bad) - 1;
            rc = __shfl_sync(group, chunk_rc, src);
            break;
        }
    }
    return rc;
}

__device__ inline status_t warp_read(const bam_io_view& io, uint32_t ssd, uint64_t lba, uint32_t nlb, void* buf) {
    return warp_rw(io, nvme::OP_READ, ssd, lba, nlb, buf);
}

__device__ inline status_t warp_write(const bam_io_view& io, uint32_t ssd, uint64_t lba, uint32_t nlb, void* buf) {
    return warp_rw(io, nvme::OP_WRITE, ssd, lba, nlb, buf);
}

}  // namespace bam
