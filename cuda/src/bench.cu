// bench.cu — benchmark and test kernels shipped with the crate:
//   bam_bench_rw       fio-like random/sequential read/write through the GPU I/O stack
//   bam_baseline_read  raw GPU random reads of memories (zero-copy host memory or HBM)
//   bam_fill_pattern   fill a medium with the deterministic pattern (generation 0)
//   bam_raw_cmds       raw commands on one queue pair (tests of a controller's validation)
#include <bam/abi.h>
#include <bam/io.cuh>
#include <bam/pattern.cuh>
#include <bam/util.cuh>

using namespace bam;

namespace {

__device__ __forceinline__ uint32_t hist_bucket(uint64_t v) {
    if (v < 16) return static_cast<uint32_t>(v);
    const uint32_t e = 63 - __clzll(v);  // >= 4
    const uint32_t b = (e - 3) * 16 + static_cast<uint32_t>((v >> (e - 4)) & 15u);
    return b < BAM_BENCH_HIST_BUCKETS ? b : BAM_BENCH_HIST_BUCKETS - 1;
}

__device__ void fill_words(uint32_t* p, uint64_t first_word, uint64_t nwords, uint32_t ssd, uint32_t gen) {
    for (uint64_t i = 0; i < nwords; i += 4) {
        uint4 v;
        v.x = pattern_word(ssd, first_word + i, gen);
        v.y = pattern_word(ssd, first_word + i + 1, gen);
        v.z = pattern_word(ssd, first_word + i + 2, gen);
        v.w = pattern_word(ssd, first_word + i + 3, gen);
        *reinterpret_cast<uint4*>(p + i) = v;
    }
}

/// Number of words that match neither allowed generation. `alt` = gen when only one
/// generation is allowed.
__device__ uint64_t check_words(const uint32_t* p, uint64_t first_word, uint64_t nwords, uint32_t ssd,
                                uint32_t gen, uint32_t alt) {
    uint64_t bad = 0;
    for (uint64_t i = 0; i < nwords; i += 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(p + i);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const uint32_t a = pattern_word(ssd, first_word + i + k, gen);
            if (w[k] != a && (alt == gen || w[k] != pattern_word(ssd, first_word + i + k, alt))) ++bad;
        }
    }
    return bad;
}

}  // namespace

extern "C" __global__ void bam_fill_pattern(uint64_t medium, uint64_t nwords, uint32_t ssd, uint32_t gen) {
    const uint64_t n4 = nwords / 4;
    for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n4;
         i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
        fill_words(reinterpret_cast<uint32_t*>(medium) + 4 * i, 4 * i, 4, ssd, gen);
    }
}

/// Each thread (or each warp with p.warp_io) keeps one I/O in flight; latency is taken
/// per request from the SM clock (clock64) and converted with the cycles/ns ratio of the
/// run (res->cycles / res->thread_ns).
extern "C" __global__ void bam_bench_rw(bam_io_view io, bam_bench_params p, bam_bench_result* res) {
    __shared__ uint32_t hist[BAM_BENCH_HIST_BUCKETS];
    __shared__ unsigned long long s_ios, s_bytes, s_err, s_vfail, s_cycles, s_ns, s_lat, s_t0, s_t1;
    for (uint32_t i = threadIdx.x; i < BAM_BENCH_HIST_BUCKETS; i += blockDim.x) hist[i] = 0;
    if (threadIdx.x == 0) {
        s_ios = s_bytes = s_err = s_vfail = s_cycles = s_ns = s_lat = 0;
        s_t0 = ~0ull;
        s_t1 = 0;
    }
    __syncthreads();

    const uint64_t tid = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
    const uint64_t nthreads = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    const uint32_t lane = lane_id();
    const uint64_t warp = tid / 32;
    const bool warp_io = p.warp_io != 0;
    const uint32_t ssd = static_cast<uint32_t>(warp % p.ssds_used);
    const bam_ssd_view& sv = reinterpret_cast<const bam_ssd_view*>(io.ssds)[ssd];
    const uint32_t qp = sv.first_qp + static_cast<uint32_t>((warp / p.ssds_used) % p.queues_used);
    const uint64_t slot = warp_io ? warp : tid;
    char* buf = reinterpret_cast<char*>(io.buf.base + slot * io.buf.slot_bytes);
    const uint64_t bytes = static_cast<uint64_t>(p.nlb) << sv.lba_shift;
    const uint64_t words = bytes / 4;
    const uint64_t nblocks = p.span_lbas / p.nlb;
    const uint32_t mixed_alt = (p.read_pct > 0 && p.read_pct < 100) ? 0u : p.gen;
    uint64_t rng = (p.seed ^ (tid * 0x9e3779b97f4a7c15ull)) | 1ull;
    rng_next(rng);

    uint64_t ios = 0, nbytes = 0, errs = 0, vfail = 0, lat_sum = 0;
    const uint64_t t0 = globaltimer();
    // p.deadline_ns is a run time: the deadline counts from the first thread's start.
    __shared__ unsigned long long s_deadline;
    if (threadIdx.x == 0) {
        unsigned long long* start = reinterpret_cast<unsigned long long*>(&res->reserved[0]);
        atomicCAS(start, 0ull, static_cast<unsigned long long>(t0));
        s_deadline = p.deadline_ns ? atomicAdd(start, 0ull) + p.deadline_ns : 0;
    }
    __syncthreads();
    const uint64_t deadline = s_deadline;
    const uint64_t c0 = clock64();
    const bool active = slot < io.buf.nslots && (!warp_io || true);
    for (uint64_t it = 0; active; ++it) {
        if (p.ios_per_thread != 0 && it >= p.ios_per_thread) break;
        if (deadline != 0) {
            int stop = globaltimer() > deadline;
            if (warp_io) stop = __shfl_sync(__activemask(), stop, __ffs(__activemask()) - 1);
            if (stop) break;
        }
        uint64_t r = rng_next(rng);
        uint64_t blk = p.random ? (r >> 16) % nblocks : (slot + it * (warp_io ? (nthreads + 31) / 32 : nthreads)) % nblocks;
        bool is_read = (rng_next(rng) >> 33) % 100 < p.read_pct;
        if (warp_io) {
            const uint32_t g = __activemask();
            const int leader = __ffs(g) - 1;
            blk = shfl_u64(g, blk, leader);
            is_read = __shfl_sync(g, is_read ? 1 : 0, leader) != 0;
        }
        const uint64_t lba = blk * p.nlb;
        const uint64_t word0 = (lba << sv.lba_shift) / 4;
        if (!is_read) {
            if (warp_io) {
                const uint32_t g = __activemask();
                const uint32_t rank = __popc(g & lanemask_lt()), np = __popc(g);
                const uint64_t per = ((words + np - 1) / np + 3) & ~3ull;
                const uint64_t lo = rank * per < words ? rank * per : words;
                const uint64_t hi = lo + per < words ? lo + per : words;
                fill_words(reinterpret_cast<uint32_t*>(buf) + lo, word0 + lo, hi - lo, ssd, p.gen);
                __syncwarp(g);
            } else {
                fill_words(reinterpret_cast<uint32_t*>(buf), word0, words, ssd, p.gen);
            }
        }
        const uint64_t c = clock64();
        status_t rc;
        if (warp_io) {
            rc = warp_rw(io, is_read ? nvme::OP_READ : nvme::OP_WRITE, ssd, lba, p.nlb, buf);
        } else {
            io_handle h;
            rc = submit_on(io, qp, is_read ? nvme::OP_READ : nvme::OP_WRITE, ssd, lba, p.nlb, buf, h);
            if (rc == OK) rc = wait(io, h);
        }
        const uint64_t lat = clock64() - c;
        const bool counts = !warp_io || lane == static_cast<uint32_t>(__ffs(__activemask()) - 1);
        if (rc != OK) {
            if (counts) ++errs;
            if (rc == BAM_ERR_TIMEOUT || rc == BAM_ERR_ABORTED) break;
            continue;
        }
        if (counts) {
            atomicAdd(&hist[hist_bucket(lat)], 1u);
            lat_sum += lat;
            ++ios;
            nbytes += bytes;
        }
        if (p.verify) {
            if (!is_read) {
                // Read back what we wrote.
                if (warp_io) {
                    rc = warp_rw(io, nvme::OP_READ, ssd, lba, p.nlb, buf);
                } else {
                    io_handle h;
                    rc = submit_on(io, qp, nvme::OP_READ, ssd, lba, p.nlb, buf, h);
                    if (rc == OK) rc = wait(io, h);
                }
                if (rc != OK) {
                    if (counts) ++errs;
                    if (rc == BAM_ERR_TIMEOUT || rc == BAM_ERR_ABORTED) break;
                    continue;
                }
            }
            const uint32_t gen = p.gen;
            const uint32_t alt = is_read ? mixed_alt : gen;
            uint64_t bad;
            if (warp_io) {
                const uint32_t g = __activemask();
                const uint32_t rank = __popc(g & lanemask_lt()), np = __popc(g);
                const uint64_t per = ((words + np - 1) / np + 3) & ~3ull;
                const uint64_t lo = rank * per < words ? rank * per : words;
                const uint64_t hi = lo + per < words ? lo + per : words;
                bad = check_words(reinterpret_cast<const uint32_t*>(buf) + lo, word0 + lo, hi - lo, ssd, gen, alt);
                bad = __reduce_add_sync(g, static_cast<uint32_t>(bad));
            } else {
                bad = check_words(reinterpret_cast<const uint32_t*>(buf), word0, words, ssd, gen, alt);
            }
            if (bad != 0 && counts) {
                ++vfail;
                log_error(io, BAM_ERR_VERIFY, ssd, 0, 0xffff, is_read ? nvme::OP_READ : nvme::OP_WRITE, lba, p.nlb,
                          static_cast<uint32_t>(bad));
            }
        }
    }
    const uint64_t c1 = clock64();
    const uint64_t t1 = globaltimer();
    if (active) {
        atomicAdd(&s_ios, ios);
        atomicAdd(&s_bytes, nbytes);
        atomicAdd(&s_err, errs);
        atomicAdd(&s_vfail, vfail);
        atomicAdd(&s_cycles, c1 - c0);
        atomicAdd(&s_ns, t1 - t0);
        atomicAdd(&s_lat, lat_sum);
        atomicMin(&s_t0, t0);
        atomicMax(&s_t1, t1);
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < BAM_BENCH_HIST_BUCKETS; i += blockDim.x)
        if (hist[i]) atomicAdd(reinterpret_cast<unsigned long long*>(&res->hist[i]), hist[i]);
    if (threadIdx.x == 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->ios), s_ios);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->bytes), s_bytes);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->errors), s_err);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->verify_failures), s_vfail);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->cycles), s_cycles);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->thread_ns), s_ns);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->lat_cycles_sum), s_lat);
        if (s_t1 != 0) {
            atomicMin(reinterpret_cast<unsigned long long*>(&res->t_start_ns), s_t0);
            atomicMax(reinterpret_cast<unsigned long long*>(&res->t_end_ns), s_t1);
        }
    }
}

/// Raw random reads of `chunk` bytes from `nsrc` memories (addresses in `srcs`, nchunks
/// chunks each; e.g. every SSD's medium, so that the span matches the benchmark's) into a
/// per-warp area of `dst`, eight chunks in flight per warp: the limit the I/O stack is
/// compared with.
extern "C" __global__ void bam_baseline_read(const uint64_t* srcs, uint32_t nsrc, uint64_t nchunks, uint32_t chunk,
                                             uint64_t dst, uint64_t deadline_ns /* run time */, uint64_t seed,
                                             bam_bench_result* res) {
    const uint64_t tid = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
    const uint64_t warp = tid / 32;
    const uint32_t lane = lane_id();
    uint64_t rng = (seed ^ (warp * 0x9e3779b97f4a7c15ull)) | 1ull;
    char* out = reinterpret_cast<char*>(dst) + warp * 8ull * chunk;
    const uint64_t t0 = globaltimer();
    unsigned long long* start = reinterpret_cast<unsigned long long*>(&res->reserved[0]);
    if (lane == 0) atomicCAS(start, 0ull, static_cast<unsigned long long>(t0));
    // The memories' addresses in shared memory (up to 256; more are read from global
    // memory), the first in a register: no global load ahead of each chunk's.
    constexpr uint32_t SMEM_SRCS = 256;
    __shared__ uint64_t s_srcs[SMEM_SRCS];
    for (uint32_t i = threadIdx.x; i < nsrc && i < SMEM_SRCS; i += blockDim.x) s_srcs[i] = srcs[i];
    __syncthreads();
    const uint64_t src0 = s_srcs[0];
    const uint64_t deadline = shfl_u64(0xffffffffu, lane == 0 ? atomicAdd(start, 0ull) : 0, 0) + deadline_ns;
    uint64_t n = 0;
    while (deadline_ns != 0 && globaltimer() < deadline) {
        uint64_t addr[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const uint64_t k = (rng_next(rng) >> 16) % (nchunks * nsrc);
            if (nsrc == 1) {
                addr[u] = src0 + k * chunk;
            } else {
                const uint64_t m = k / nchunks;
                addr[u] = (m < SMEM_SRCS ? s_srcs[m] : srcs[m]) + (k % nchunks) * chunk;
            }
        }
        for (uint32_t b = 0; b < chunk; b += 512) {
            uint4 x[8];
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (b + lane * 16 < chunk) x[u] = *reinterpret_cast<const uint4*>(addr[u] + b + lane * 16);
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (b + lane * 16 < chunk) *reinterpret_cast<uint4*>(out + u * chunk + b + lane * 16) = x[u];
        }
        n += 8;
    }
    const uint64_t t1 = globaltimer();
    if (lane == 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->ios), n);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->bytes), n * chunk);
        atomicMin(reinterpret_cast<unsigned long long*>(&res->t_start_ns), t0);
        atomicMax(reinterpret_cast<unsigned long long*>(&res->t_end_ns), t1);
    }
}

/// Tests of a controller's validation: one thread writes the `n` commands `cmds` into
/// queue pair `qpi`'s SQ at positions first .. first + n - 1 (no wrap), rings the SQ tail
/// doorbell once, and waits (bounded by io.timeout_ns) for the CQEs at the same CQ
/// positions (the simulated controller posts in fetch order). out[i] = DW3 of command i's
/// CQE; out[n] = 0, 1 on timeout, or 2 (nothing submitted) when a command asks for more
/// than the buffer region holds. It bypasses the queue protocol (tickets, marks,
/// reaping, CQ head doorbell), so the queue pair must be fresh and used by nothing else.
extern "C" __global__ void bam_raw_cmds(bam_io_view io, uint32_t qpi, uint32_t first, const bam_raw_cmd* cmds,
                                        uint32_t n, uint32_t* out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const qp_ref q = load_qp(io, qpi);
    const bam_ssd_view& s = ssd_view(io, q.ssd);
    for (uint32_t i = 0; i < n; ++i) {
        const bam_raw_cmd c = cmds[i];
        uint64_t prp1 = 0, prp2 = 0;
        if (!build_prps(io.buf, io.buf.base, static_cast<uint64_t>(c.nlb) << s.lba_shift, prp1, prp2)) {
            out[n] = 2;  // the test asked for more than the buffer region holds
            return;
        }
        if (c.prp == 1) {
            prp1 = 0x1000;  // below every device allocation: in no registered region
            prp2 = 0;
        } else if (c.prp == 2) {
            prp1 += 2;
        }
        bam_sqe e;
        nvme::make_rw(e, static_cast<uint8_t>(c.cdw0), static_cast<uint16_t>(c.cdw0 >> 16),
                      c.nsid != 0 ? c.nsid : s.nsid, c.slba, c.nlb, prp1, prp2);
        e.cdw0 = c.cdw0;
        write_sqe(q, first + i, e);
    }
    fence_gpu();  // the SQEs before the doorbell (fence + relaxed RMW: a release)
    ring_doorbell(q.sq_db, (first + n) & q.mask, q.mmio(), true);
    deadline dl(io.timeout_ns);
    for (uint32_t i = 0; i < n; ++i) {
        uint32_t dw3;
        while (!cqe_posted(q, first + i, dw3 = load_cqe_dw3(q, (first + i) & q.mask))) {
            if (dl.expired_now()) {
                out[n] = 1;
                return;
            }
        }
        out[i] = dw3;
    }
    out[n] = 0;
}
