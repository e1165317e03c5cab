// file.cu — the GPU part of the file backend: a persistent forwarder kernel between the
// GPU's NVMe queues (GPU memory, as on every backend) and the CPU service threads that
// execute the commands on files and block devices with io_uring (file_abi.h).
//
// Each warp serves a fixed set of queues (queue q -> warp q mod W), at most 32: lane j
// polls the j-th queue's SQ tail doorbell (GPU memory) and, while it has requests in
// flight, its completion counter in pinned host memory (one PCIe read). Only queues with
// work are visited. A visit:
//   1. consumes the CPU's completions in order, while the CQ has room: a read's data is
//      copied from its staging slot (host memory) to the command's PRP targets (GPU
//      memory) by the whole warp, then the NVMe CQE is posted; the staging slot is freed;
//   2. fetches up to 32 new SQEs, validates them like a strict controller (opcode, FUSE
//      and PSDT, namespace, LBA range, size, PRPs inside the I/O buffer region), takes a
//      staging slot for each (no free slot: the commands wait in the SQ), copies a write's
//      data into its slot, and posts the requests. A refused command becomes an ECHO
//      request, which the CPU completes with its status, so that every completion takes
//      the same path.
// Ordering: the SQ doorbell is loaded with acquire (pairing with the submitters' release)
// and a __syncwarp orders the polling lane's acquire before every lane's SQE loads. The
// completion counter is loaded with acquire at system scope (pairing with the CPU's
// release after its completions, and after the io_uring completion that put a read's
// data in staging). A write's staged data and the requests are stored, then each lane's
// __threadfence_system and a __syncwarp, then lane 0 stores the request counter with
// release at system scope. Copied data and CQE DW0-2 are written, then __syncwarp, then
// each CQE's DW3 (CID, status, phase) is stored with release, as the simulated
// controller does. Every wait is bounded by the host: it sets `stop`, which each warp
// reads every 64 loops.
#include "file_abi.h"
#include <bam/nvme.cuh>
#include <bam/util.cuh>

using namespace bam;

namespace {

constexpr uint32_t FWD_THREADS = 256;
constexpr uint32_t ALL = 0xffffffffu;
constexpr uint64_t PAGE = 4096;
// 16-byte units each lane keeps in flight in a copy: 32 lanes x 16 x 16 B = 8 KiB a round
// (a PCIe round trip each: large commands need many bytes in flight per warp).
constexpr uint32_t UNROLL = 16;

/// Copies `len` bytes (a multiple of 16, both ends 16-byte aligned) with the whole warp.
/// `kFresh`: the source is a staging slot that the CPU rewrote since this SM last read
/// it; its loads bypass L1 (`ld.global.cv`) so that no stale line is read.
template <bool kFresh>
__device__ __forceinline__ void warp_copy(char* dst, const char* src, uint32_t len, uint32_t lane) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    const uint32_t n = len / 16u;
    for (uint32_t base = 0; base < n; base += 32u * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (uint32_t k = 0; k < UNROLL; ++k) {
            const uint32_t i = base + k * 32u + lane;
            if (i < n) v[k] = kFresh ? __ldcv(s + i) : s[i];
        }
#pragma unroll
        for (uint32_t k = 0; k < UNROLL; ++k) {
            const uint32_t i = base + k * 32u + lane;
            if (i < n) d[i] = v[k];
        }
    }
}

__device__ __forceinline__ uint64_t umin64(uint64_t a, uint64_t b) { return a < b ? a : b; }

__device__ __forceinline__ bool in_buffer(const bam_file_view& v, uint64_t a, uint64_t len) {
    return a >= v.buf && len <= v.buf_len && a - v.buf <= v.buf_len - len;
}

/// Moves `bytes` between staging (`host`) and the command's PRP targets, warp-wide
/// (every lane calls with the same arguments). `to_gpu`: staging -> PRPs. Returns false
/// (the command fails; what was moved does not matter) at a PRP list entry outside the
/// buffer region or not page aligned; the first two PRPs were checked at fetch.
/// A PRP list is read 32 entries at a time, one per lane, and pages that lie back to back
/// in GPU memory (a buffer slot's always do) are copied as one run: a copy keeps
/// UNROLL x 512 B in flight per PCIe round trip, where a page at a time would keep 4 KiB.
__device__ bool move_prps(const bam_file_view& v, char* host, uint64_t prp1, uint64_t prp2, uint32_t bytes,
                          bool to_gpu, uint32_t lane) {
    auto seg = [&](uint64_t dev, uint32_t off, uint32_t len) {
        char* g = reinterpret_cast<char*>(dev);
        if (to_gpu)
            warp_copy<true>(g, host + off, len, lane);
        else
            warp_copy<false>(host + off, g, len, lane);
    };
    const uint32_t first = static_cast<uint32_t>(umin64(bytes, PAGE - (prp1 & (PAGE - 1))));
    seg(prp1, 0, first);
    uint32_t done = first;
    if (done == bytes) return true;
    if (bytes - done <= PAGE) {
        seg(prp2, done, bytes - done);
        return true;
    }
    // A PRP list: entries to the end of its page, the last one chaining to the next list
    // page while more than one page of data is left.
    uint64_t list = prp2;
    while (done < bytes) {
        const uint32_t left = bytes - done;
        const uint32_t pages = (left + static_cast<uint32_t>(PAGE) - 1u) / static_cast<uint32_t>(PAGE);
        const uint32_t room = static_cast<uint32_t>((PAGE - (list & (PAGE - 1))) / 8u);  // entries to the page end
        const bool chains = pages > room;
        const uint32_t data = chains ? room - 1u : pages;  // data entries left in this list page
        if (data == 0) {
            const uint64_t next = *reinterpret_cast<const volatile uint64_t*>(list);
            if ((next & 7u) != 0 || !in_buffer(v, next, 8)) return false;
            list = next;
            continue;
        }
        const uint32_t n = min(data, 32u);
        uint64_t e = 0;
        uint32_t len = 0;
        if (lane < n) {
            e = reinterpret_cast<const volatile uint64_t*>(list)[lane];
            len = left - lane * static_cast<uint32_t>(PAGE) < PAGE ? left - lane * static_cast<uint32_t>(PAGE)
                                                                  : static_cast<uint32_t>(PAGE);
        }
        if (__ballot_sync(ALL, lane < n && ((e & (PAGE - 1)) != 0 || !in_buffer(v, e, len))) != 0) return false;
        // Runs of pages back to back: a run starts where a page does not follow its left
        // neighbour's.
        const uint64_t prev = shfl_u64(ALL, e, lane == 0 ? 0 : lane - 1);
        uint32_t starts = __ballot_sync(ALL, lane < n && (lane == 0 || e != prev + PAGE));
        while (starts) {
            const uint32_t a = __ffs(starts) - 1;
            starts &= starts - 1u;
            const uint32_t b = starts ? static_cast<uint32_t>(__ffs(starts) - 1) : n;  // the run: pages [a, b)
            const uint32_t off = a * static_cast<uint32_t>(PAGE);
            const uint32_t run = min(left - off, (b - a) * static_cast<uint32_t>(PAGE));
            seg(shfl_u64(ALL, e, a), done + off, run);
        }
        done += min(left, n * static_cast<uint32_t>(PAGE));
        list += 8u * n;
    }
    return true;
}

/// Moves the data of the commands of the lanes in `todo`, one command at a time with the
/// whole warp (every lane calls; each lane's `slot`, PRPs and `bytes` are its command's):
/// `to_gpu` staging -> PRPs, else PRPs -> staging. Returns the lanes whose command's PRP
/// list was refused (move_prps).
__device__ uint32_t move_each(const bam_file_view& v, const bam_file_queue& q, uint32_t todo, uint32_t slot,
                              uint64_t prp1, uint64_t prp2, uint32_t bytes, bool to_gpu, uint32_t lane) {
    char* staging = reinterpret_cast<char*>(q.staging);
    uint32_t failed = 0;
    while (todo) {
        const int i = __ffs(todo) - 1;
        todo &= todo - 1u;
        const uint32_t sl = __shfl_sync(ALL, slot, i);
        const bool ok = move_prps(v, staging + static_cast<uint64_t>(sl) * q.slot_bytes, shfl_u64(ALL, prp1, i),
                                  shfl_u64(ALL, prp2, i), __shfl_sync(ALL, bytes, i), to_gpu, lane);
        if (!ok) failed |= 1u << i;
    }
    return failed;
}

/// A fetched command's checks, in a strict controller's order: its NVMe status field
/// (0: valid) and its size in bytes.
__device__ __forceinline__ uint32_t check_command(const bam_file_view& v, const bam_file_queue& q,
                                                  const bam_file_ssd& ssd, const bam_sqe& e, uint32_t& bytes) {
    const uint32_t opc = e.cdw0 & 0xffu;
    bytes = 0;
    if (opc != nvme::OP_READ && opc != nvme::OP_WRITE && opc != nvme::OP_FLUSH) return nvme::SC_INVALID_OPCODE;
    if ((e.cdw0 & 0xff00u) != 0) return nvme::SC_INVALID_FIELD;  // FUSE, PSDT: PRPs only
    if (opc == nvme::OP_FLUSH) return (e.nsid == ssd.nsid || e.nsid == 0xffffffffu) ? 0u : nvme::SC_INVALID_NAMESPACE;
    if (e.nsid != ssd.nsid) return nvme::SC_INVALID_NAMESPACE;
    const uint64_t slba = static_cast<uint64_t>(e.cdw10) | (static_cast<uint64_t>(e.cdw11) << 32);
    const uint64_t nlb = static_cast<uint64_t>(e.cdw12 & 0xffffu) + 1u;
    if (slba >= ssd.nlb || nlb > ssd.nlb - slba) return nvme::SC_LBA_OUT_OF_RANGE;
    const uint64_t b = nlb << ssd.lba_shift;
    if (b > q.slot_bytes || (ssd.mdts_bytes != 0 && b > ssd.mdts_bytes)) return nvme::SC_INVALID_FIELD;
    bytes = static_cast<uint32_t>(b);
    if ((e.prp1 & 3u) != 0) return nvme::SC_INVALID_PRP_OFFSET;  // dword aligned (NVMe)
    if ((e.prp1 & 15u) != 0) return nvme::SC_INVALID_FIELD;        // the copies' 16-byte units
    const uint64_t first = umin64(b, PAGE - (e.prp1 & (PAGE - 1)));
    if (!in_buffer(v, e.prp1, first)) return nvme::SC_DATA_TRANSFER_ERROR;
    const uint64_t rest = b - first;
    if (rest == 0) return 0;
    if (rest <= PAGE) {
        if ((e.prp2 & (PAGE - 1)) != 0) return nvme::SC_INVALID_PRP_OFFSET;
        return in_buffer(v, e.prp2, rest) ? 0u : nvme::SC_DATA_TRANSFER_ERROR;
    }
    if ((e.prp2 & 7u) != 0) return nvme::SC_INVALID_PRP_OFFSET;
    return in_buffer(v, e.prp2, 8) ? 0u : nvme::SC_DATA_TRANSFER_ERROR;
}

/// The warp's local copy of a queue's state during a visit.
struct visit_state {
    uint32_t sq_head, cq_tail, cq_head, req_prod, cpl_cons, free_top;
};

/// Step 1 of a visit: consumes up to `avail` completions while the CQ has room.
__device__ void take_completions(const bam_file_view& v, bam_file_queue& q, visit_state& s, uint32_t avail,
                                 uint32_t lane) {
    const uint32_t mask = q.depth - 1u, kmask = q.nslots - 1u;
    const uint32_t shift = __ffs(q.depth) - 1;
    bam_file_slot* info = reinterpret_cast<bam_file_slot*>(q.slots);
    uint16_t* freel = reinterpret_cast<uint16_t*>(info + q.nslots);
    const bam_file_cpl* cpls = reinterpret_cast<const bam_file_cpl*>(q.cpls);
    bam_cqe* cq = reinterpret_cast<bam_cqe*>(q.cq);
    uint64_t reads = 0, writes = 0, others = 0, rbytes = 0, wbytes = 0, errors = 0, refused = 0;
    while (avail > 0) {
        uint32_t room = (s.cq_head - (s.cq_tail & mask) - 1u) & mask;
        if (room == 0) {
            const uint32_t h = atomic_dev<uint32_t>(*reinterpret_cast<uint32_t*>(q.cq_db)).load(cuda::memory_order_acquire);
            s.cq_head = h & mask;
            room = (s.cq_head - (s.cq_tail & mask) - 1u) & mask;
            if (room == 0) break;
        }
        const uint32_t n = min(min(avail, 32u), room);
        uint32_t slot = 0, status = 0, op = 0, cid = 0, bytes = 0;
        uint64_t prp1 = 0, prp2 = 0;
        bool valid = false;
        if (lane < n) {
            const bam_file_cpl c = cpls[(s.cpl_cons + lane) & kmask];
            slot = c.slot;
            if (slot < q.nslots) {
                const bam_file_slot in = info[slot];
                valid = in.busy != 0 && in.seq == c.seq;
                status = c.status;
                op = in.op;
                cid = in.cid;
                bytes = in.bytes;
                prp1 = in.prp1;
                prp2 = in.prp2;
            }
        }
        // Reads: staging -> PRP targets.
        const uint32_t copies = __ballot_sync(ALL, valid && op == BAM_FILE_OP_READ && status == 0);
        if (move_each(v, q, copies, slot, prp1, prp2, bytes, true, lane) & (1u << lane))
            status = nvme::SC_DATA_TRANSFER_ERROR;
        __syncwarp();
        const uint32_t vb = __ballot_sync(ALL, valid);
        if (valid) {
            const uint32_t pos = s.cq_tail + __popc(vb & lanemask_lt());
            uint32_t* cw = reinterpret_cast<uint32_t*>(cq + (pos & mask));
            cw[0] = 0;
            cw[1] = 0;
            cw[2] = s.sq_head | (static_cast<uint32_t>(q.qid) << 16);
            const uint32_t phase = ((pos >> shift) & 1u) ^ 1u;
            atomic_dev<uint32_t>(cw[3]).store(cid | (status << 17) | (phase << 16), cuda::memory_order_release);
            info[slot].busy = 0;
            freel[s.free_top + __popc(vb & lanemask_lt())] = static_cast<uint16_t>(slot);
            reads += op == BAM_FILE_OP_READ && status == 0;
            rbytes += (op == BAM_FILE_OP_READ && status == 0) ? bytes : 0u;
            writes += op == BAM_FILE_OP_WRITE && status == 0;
            wbytes += (op == BAM_FILE_OP_WRITE && status == 0) ? bytes : 0u;
            others += op == BAM_FILE_OP_FLUSH && status == 0;
            errors += status != 0;
        } else if (lane < n) {
            refused += 1;
        }
        s.cq_tail += __popc(vb);
        s.free_top += __popc(vb);
        s.cpl_cons += n;
        avail -= n;
    }
    // Counters: only this warp writes them (the host reads them while it runs).
    reads = __reduce_add_sync(ALL, static_cast<uint32_t>(reads));
    writes = __reduce_add_sync(ALL, static_cast<uint32_t>(writes));
    others = __reduce_add_sync(ALL, static_cast<uint32_t>(others));
    errors = __reduce_add_sync(ALL, static_cast<uint32_t>(errors));
    refused = __reduce_add_sync(ALL, static_cast<uint32_t>(refused));
    for (int o = 16; o > 0; o >>= 1) {
        rbytes += __shfl_xor_sync(ALL, rbytes, o);
        wbytes += __shfl_xor_sync(ALL, wbytes, o);
    }
    if (lane == 0) {
        q.reads += reads;
        q.writes += writes;
        q.others += others;
        q.read_bytes += rbytes;
        q.write_bytes += wbytes;
        q.errors += errors;
        q.refused += refused;
    }
}

/// Step 2 of a visit: fetches up to `avail` SQEs while staging slots are free.
__device__ void post_requests(const bam_file_view& v, bam_file_queue& q, visit_state& s, uint32_t avail,
                              uint32_t lane) {
    const uint32_t mask = q.depth - 1u, kmask = q.nslots - 1u;
    const bam_file_ssd& ssd = reinterpret_cast<const bam_file_ssd*>(v.ssds)[q.ssd];
    bam_file_slot* info = reinterpret_cast<bam_file_slot*>(q.slots);
    const uint16_t* freel = reinterpret_cast<const uint16_t*>(info + q.nslots);
    bam_file_req* reqs = reinterpret_cast<bam_file_req*>(q.reqs);
    const bam_sqe* sq = reinterpret_cast<const bam_sqe*>(q.sq);
    bam_file_ring* ring = reinterpret_cast<bam_file_ring*>(q.ring);
    while (avail > 0 && s.free_top > 0) {
        const uint32_t n = min(min(avail, 32u), s.free_top);
        uint32_t slot = 0, status = 0, bytes = 0, op = 0;
        uint64_t prp1 = 0, prp2 = 0, offset = 0;
        if (lane < n) {
            const bam_sqe e = sq[(s.sq_head + lane) & mask];
            status = check_command(v, q, ssd, e, bytes);
            const uint32_t opc = e.cdw0 & 0xffu;
            op = status != 0 ? BAM_FILE_OP_ECHO
                 : opc == nvme::OP_READ ? BAM_FILE_OP_READ
                 : opc == nvme::OP_WRITE ? BAM_FILE_OP_WRITE
                                         : BAM_FILE_OP_FLUSH;
            if (op == BAM_FILE_OP_ECHO || op == BAM_FILE_OP_FLUSH) bytes = 0;
            slot = freel[s.free_top - 1u - lane];
            prp1 = e.prp1;
            prp2 = e.prp2;
            offset = (static_cast<uint64_t>(e.cdw10) | (static_cast<uint64_t>(e.cdw11) << 32)) << ssd.lba_shift;
            bam_file_slot in;
            in.prp1 = prp1;
            in.prp2 = prp2;
            in.bytes = bytes;
            in.cid = static_cast<uint16_t>(e.cdw0 >> 16);
            in.op = static_cast<uint8_t>(op);
            in.busy = 1;
            in.seq = s.req_prod + lane;
            in.pad = 0;
            info[slot] = in;
        }
        // Writes: PRP sources -> staging, before the request is posted.
        const uint32_t copies = __ballot_sync(ALL, op == BAM_FILE_OP_WRITE);
        if (move_each(v, q, copies, slot, prp1, prp2, bytes, false, lane) & (1u << lane)) {
            status = nvme::SC_DATA_TRANSFER_ERROR;
            op = BAM_FILE_OP_ECHO;
            bytes = 0;
            info[slot].op = BAM_FILE_OP_ECHO;
        }
        if (lane < n) {
            bam_file_req r;
            r.offset = offset;
            r.bytes = bytes;
            r.slot = static_cast<uint16_t>(slot);
            r.op = static_cast<uint8_t>(op);
            r.pad = 0;
            r.ssd = q.ssd;
            r.status = static_cast<uint16_t>(status);
            r.seq = s.req_prod + lane;
            reqs[(s.req_prod + lane) & kmask] = r;
        }
        __threadfence_system();
        __syncwarp();
        s.req_prod += n;
        if (lane == 0) atomic_sys<uint32_t>(ring->req_prod).store(s.req_prod, cuda::memory_order_release);
        s.sq_head = (s.sq_head + n) & mask;
        s.free_top -= n;
        avail -= n;
    }
}

/// One visit of queue `q` by the whole warp; `tail`: its SQ tail doorbell as polled,
/// `cpl_prod`: its completion counter as polled (acquire, system scope).
__device__ void visit(const bam_file_view& v, bam_file_queue& q, uint32_t tail, uint32_t cpl_prod, uint32_t lane) {
    visit_state s{q.sq_head, q.cq_tail, q.cq_head, q.req_prod, q.cpl_cons, q.free_top};
    const uint32_t in_flight = s.req_prod - s.cpl_cons;
    uint32_t avail = cpl_prod - s.cpl_cons;
    if (avail > in_flight) avail = in_flight;  // more completions than requests: the rest wait
    if (avail > 0) take_completions(v, q, s, avail, lane);
    if (tail < q.depth) {
        const uint32_t sq_avail = (tail - s.sq_head) & (q.depth - 1u);
        if (sq_avail > 0) post_requests(v, q, s, sq_avail, lane);
    } else if (lane == 0) {
        q.bad_doorbells += 1;
    }
    __syncwarp();
    if (lane == 0) {
        q.sq_head = s.sq_head;
        q.cq_tail = s.cq_tail;
        q.cq_head = s.cq_head;
        q.req_prod = s.req_prod;
        q.cpl_cons = s.cpl_cons;
        q.free_top = s.free_top;
    }
    __syncwarp();
}

__device__ void forwarder(bam_file_view v) {
    const uint32_t lane = lane_id();
    const uint32_t warps = blockDim.x / 32u;
    const uint32_t gw = blockIdx.x * warps + threadIdx.x / 32u;
    const uint32_t nw = gridDim.x * warps;
    bam_file_queue* qs = reinterpret_cast<bam_file_queue*>(v.queues);
    bam_file_control* ctl = reinterpret_cast<bam_file_control*>(v.control);
    const uint32_t mine = gw + lane * nw;  // the queue this lane polls
    const bool have = mine < v.nqueues;
    uint32_t* sq_db = have ? reinterpret_cast<uint32_t*>(qs[mine].sq_db) : nullptr;
    bam_file_ring* ring = have ? reinterpret_cast<bam_file_ring*>(qs[mine].ring) : nullptr;
    __syncthreads();
    if (threadIdx.x == 0) atomic_dev<uint32_t>(ctl->started).fetch_add(1u, cuda::memory_order_release);
    uint32_t idle = 0;
    for (uint64_t loop = 0;; ++loop) {
        if ((loop & 63u) == 0) {
            uint32_t stop = 0;
            if (lane == 0) stop = atomic_dev<uint32_t>(ctl->stop).load(cuda::memory_order_acquire);
            if (__shfl_sync(ALL, stop, 0)) break;
            if (gw == 0 && lane == 0) atomic_dev<uint64_t>(ctl->loops).store(loop, cuda::memory_order_relaxed);
        }
        uint32_t tail = 0, cpl = 0;
        bool work = false;
        if (have) {
            const bam_file_queue& q = qs[mine];
            const uint32_t head = *reinterpret_cast<const volatile uint32_t*>(&q.sq_head);
            const uint32_t req = *reinterpret_cast<const volatile uint32_t*>(&q.req_prod);
            const uint32_t cons = *reinterpret_cast<const volatile uint32_t*>(&q.cpl_cons);
            tail = atomic_dev<uint32_t>(*sq_db).load(cuda::memory_order_acquire);
            cpl = cons;
            if (req != cons) cpl = atomic_sys<uint32_t>(ring->cpl_prod).load(cuda::memory_order_acquire);
            work = tail != head || cpl != cons;
        }
        uint32_t ballot = __ballot_sync(ALL, work);
        if (ballot == 0) {
            backoff(idle);
            continue;
        }
        idle = 0;
        __syncwarp();
        while (ballot) {
            const int j = __ffs(ballot) - 1;
            ballot &= ballot - 1u;
            visit(v, qs[gw + static_cast<uint32_t>(j) * nw], __shfl_sync(ALL, tail, j), __shfl_sync(ALL, cpl, j),
                  lane);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) atomic_dev<uint32_t>(ctl->exited).fetch_add(1u, cuda::memory_order_release);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(FWD_THREADS, 1) bam_file_forwarder(bam_file_view v) { forwarder(v); }
