// bench.cu — the benchmark kernels of bam-bench (not shipped in the runtime's fatbin):
//   bam_bench_rw       fio-like random/sequential read/write through the GPU I/O stack
//   bam_baseline_read  raw GPU random reads of memories (zero-copy host memory or HBM)
//   bam_cb_*           the cache study: bam_cb_{linear,random,cla,latency,miss_phases,
//                      miss_anatomy} through the cache and bam_cb_raw_* over a plain array
//                      with the same pattern (the same process, the same data);
//                      bam_cache_fill_u64 writes that data
#include "bench_abi.h"
#include <bam/array.cuh>
#include <bam/cache.cuh>
#include <bam/io.cuh>
#include <bam/pattern.cuh>
#include <bam/util.cuh>

using namespace bam;
// The benchmarks time the queue protocol's and the cache's internals step by step.
using namespace bam::detail;

namespace {

__device__ __forceinline__ uint32_t hist_bucket(uint64_t v) {
    if (v < 16) return static_cast<uint32_t>(v);
    const uint32_t e = 63 - __clzll(v);  // >= 4
    const uint32_t b = (e - 3) * 16 + static_cast<uint32_t>((v >> (e - 4)) & 15u);
    return b < BAM_BENCH_HIST_BUCKETS ? b : BAM_BENCH_HIST_BUCKETS - 1;
}

/// A block's totals of bam_bench_rw, in shared memory, added to the result by thread 0.
struct rw_totals {
    unsigned long long ios, bytes, errors, verify_failures, cycles, ns, lat, t0, t1;
};

/// One thread's counts of bam_bench_rw (with p.warp_io, one lane per warp counts).
struct rw_counts {
    uint64_t ios = 0, bytes = 0, errors = 0, verify_failures = 0, lat_sum = 0;
};

/// Zeroes the block's latency histogram and totals (the block's threads together; the
/// caller's __syncthreads publishes them).
__device__ __forceinline__ void zero_block_totals(uint32_t* hist, rw_totals& totals) {
    for (uint32_t i = threadIdx.x; i < BAM_BENCH_HIST_BUCKETS; i += blockDim.x) hist[i] = 0;
    if (threadIdx.x == 0) {
        totals.ios = totals.bytes = totals.errors = totals.verify_failures = totals.cycles = totals.ns = totals.lat = 0;
        totals.t0 = ~0ull;
        totals.t1 = 0;
    }
}

/// The run's deadline (globaltimer ns; 0: none): p.deadline_ns is a run time, counted
/// from the first thread's start (`t0`), which the first block to get here records in
/// res->reserved[0] (atomicCAS; read back with an atomic). Every thread of the block
/// calls (__syncthreads inside).
__device__ __forceinline__ uint64_t run_deadline(const bam_bench_params& p, bam_bench_result* res, uint64_t t0) {
    __shared__ unsigned long long s_deadline;
    if (threadIdx.x == 0) {
        unsigned long long* start = reinterpret_cast<unsigned long long*>(&res->reserved[0]);
        atomicCAS(start, 0ull, static_cast<unsigned long long>(t0));
        s_deadline = p.deadline_ns ? atomicAdd(start, 0ull) + p.deadline_ns : 0;
    }
    __syncthreads();
    return s_deadline;
}

/// Whether the run's `deadline` has passed (with `warp_io`, as the warp's leader sees
/// it, so that the warp stops together).
__device__ __forceinline__ bool past_deadline(uint64_t deadline, bool warp_io) {
    int stop = globaltimer() > deadline;
    if (warp_io) stop = __shfl_sync(__activemask(), stop, __ffs(__activemask()) - 1);
    return stop != 0;
}

/// The next I/O of iteration `it` for the thread's buffer `slot` (`stride`: the buffers
/// in use): its block (random, or sequential by slot) and whether it reads (p.read_pct);
/// with `warp_io`, the warp's leader's choice for the whole warp.
__device__ __forceinline__ void pick_io(const bam_bench_params& p, uint64_t& rng, uint64_t slot, uint64_t it,
                                        uint64_t stride, uint64_t nblocks, bool warp_io, uint64_t& blk,
                                        bool& is_read) {
    uint64_t r = rng_next(rng);
    blk = p.random ? (r >> 16) % nblocks : (slot + it * stride) % nblocks;
    is_read = (rng_next(rng) >> 33) % 100 < p.read_pct;
    if (warp_io) {
        const uint32_t g = __activemask();
        const int leader = __ffs(g) - 1;
        blk = shfl_u64(g, blk, leader);
        is_read = __shfl_sync(g, is_read ? 1 : 0, leader) != 0;
    }
}

/// This lane's share [lo, hi) of `words` words when the lanes of `g` (the active ones)
/// split them (multiples of 4 words each).
__device__ __forceinline__ void warp_share(uint32_t g, uint64_t words, uint64_t& lo, uint64_t& hi) {
    const uint32_t rank = __popc(g & lanemask_lt()), np = __popc(g);
    const uint64_t per = ((words + np - 1) / np + 3) & ~3ull;
    lo = rank * per < words ? rank * per : words;
    hi = lo + per < words ? lo + per : words;
}

/// Fills the I/O buffer with the pattern of the `words` words from `word0` for a write
/// (with `warp_io`, the warp's lanes share the buffer; a __syncwarp orders their stores
/// before the warp's submission).
__device__ __forceinline__ void fill_write_data(char* buf, uint64_t word0, uint64_t words, uint32_t ssd, uint32_t gen,
                                                bool warp_io) {
    if (warp_io) {
        const uint32_t g = __activemask();
        uint64_t lo, hi;
        warp_share(g, words, lo, hi);
        fill_words(reinterpret_cast<uint32_t*>(buf) + lo, word0 + lo, hi - lo, ssd, gen);
        __syncwarp(g);
    } else {
        fill_words(reinterpret_cast<uint32_t*>(buf), word0, words, ssd, gen);
    }
}

/// One I/O of the benchmark: with `warp_io` the warp's (warp_rw), else the thread's on
/// queue pair `qp` (submit_on, then wait).
__device__ __forceinline__ status_t bench_io(const bam_io_view& io, uint32_t qp, bool warp_io, uint8_t opcode,
                                             uint32_t ssd, uint64_t lba, uint32_t nlb, char* buf) {
    status_t rc;
    if (warp_io) {
        rc = warp_rw(io, opcode, ssd, lba, nlb, buf);
    } else {
        io_handle h;
        rc = submit_on(io, qp, opcode, ssd, lba, nlb, buf, h);
        if (rc == OK) rc = wait(io, h);
    }
    return rc;
}

/// Wrong words in the buffer against the pattern of generation `gen` (or `alt`) from
/// `word0` (with `warp_io`, summed over the warp's lanes, which share the buffer).
__device__ __forceinline__ uint64_t check_data(const char* buf, uint64_t word0, uint64_t words, uint32_t ssd,
                                               uint32_t gen, uint32_t alt, bool warp_io) {
    uint64_t bad;
    if (warp_io) {
        const uint32_t g = __activemask();
        uint64_t lo, hi;
        warp_share(g, words, lo, hi);
        bad = check_words(reinterpret_cast<const uint32_t*>(buf) + lo, word0 + lo, hi - lo, ssd, gen, alt);
        bad = __reduce_add_sync(g, static_cast<uint32_t>(bad));
    } else {
        bad = check_words(reinterpret_cast<const uint32_t*>(buf), word0, words, ssd, gen, alt);
    }
    return bad;
}

/// An I/O error ends the thread's run (timeout, abort) or only that I/O.
__device__ __forceinline__ bool io_fatal(status_t rc) { return rc == BAM_ERR_TIMEOUT || rc == BAM_ERR_ABORTED; }

/// Adds the thread's counts and times to the block's totals (shared-memory atomics),
/// then, after the block's __syncthreads, thread 0 adds the block's histogram and totals
/// to the result (global atomics). Every thread of the block calls.
__device__ __forceinline__ void publish_totals(bam_bench_result* res, uint32_t* hist, rw_totals& totals, bool active,
                                               const rw_counts& tally, uint64_t cycles, uint64_t t0, uint64_t t1) {
    if (active) {
        atomicAdd(&totals.ios, tally.ios);
        atomicAdd(&totals.bytes, tally.bytes);
        atomicAdd(&totals.errors, tally.errors);
        atomicAdd(&totals.verify_failures, tally.verify_failures);
        atomicAdd(&totals.cycles, cycles);
        atomicAdd(&totals.ns, t1 - t0);
        atomicAdd(&totals.lat, tally.lat_sum);
        atomicMin(&totals.t0, t0);
        atomicMax(&totals.t1, t1);
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < BAM_BENCH_HIST_BUCKETS; i += blockDim.x)
        if (hist[i]) atomicAdd(reinterpret_cast<unsigned long long*>(&res->hist[i]), hist[i]);
    if (threadIdx.x == 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->ios), totals.ios);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->bytes), totals.bytes);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->errors), totals.errors);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->verify_failures), totals.verify_failures);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->cycles), totals.cycles);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->thread_ns), totals.ns);
        atomicAdd(reinterpret_cast<unsigned long long*>(&res->lat_cycles_sum), totals.lat);
        if (totals.t1 != 0) {
            atomicMin(reinterpret_cast<unsigned long long*>(&res->t_start_ns), totals.t0);
            atomicMax(reinterpret_cast<unsigned long long*>(&res->t_end_ns), totals.t1);
        }
    }
}

}  // namespace

/// Each thread (or each warp with p.warp_io) keeps one I/O in flight; latency is taken
/// per request from the SM clock (clock64) and converted with the cycles/ns ratio of the
/// run (res->cycles / res->thread_ns).
extern "C" __global__ void bam_bench_rw(bam_io_view io, bam_bench_params p, bam_bench_result* res) {
    __shared__ uint32_t hist[BAM_BENCH_HIST_BUCKETS];
    __shared__ rw_totals totals;
    zero_block_totals(hist, totals);
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

    rw_counts tally;
    const uint64_t t0 = globaltimer();
    const uint64_t deadline = run_deadline(p, res, t0);
    const uint64_t c0 = clock64();
    const bool active = slot < io.buf.nslots && (!warp_io || true);
    for (uint64_t it = 0; active; ++it) {
        if (p.ios_per_thread != 0 && it >= p.ios_per_thread) break;
        if (deadline != 0 && past_deadline(deadline, warp_io)) break;
        uint64_t blk;
        bool is_read;
        pick_io(p, rng, slot, it, warp_io ? (nthreads + 31) / 32 : nthreads, nblocks, warp_io, blk, is_read);
        const uint64_t lba = blk * p.nlb;
        const uint64_t word0 = (lba << sv.lba_shift) / 4;
        if (!is_read) fill_write_data(buf, word0, words, ssd, p.gen, warp_io);
        const uint64_t c = clock64();
        status_t rc = bench_io(io, qp, warp_io, is_read ? nvme::OP_READ : nvme::OP_WRITE, ssd, lba, p.nlb, buf);
        const uint64_t lat = clock64() - c;
        const bool counts = !warp_io || lane == static_cast<uint32_t>(__ffs(__activemask()) - 1);
        if (rc != OK) {
            if (counts) ++tally.errors;
            if (io_fatal(rc)) break;
            continue;
        }
        if (counts) {
            atomicAdd(&hist[hist_bucket(lat)], 1u);
            tally.lat_sum += lat;
            ++tally.ios;
            tally.bytes += bytes;
        }
        if (p.verify) {
            if (!is_read) {
                // Read back what we wrote.
                rc = bench_io(io, qp, warp_io, nvme::OP_READ, ssd, lba, p.nlb, buf);
                if (rc != OK) {
                    if (counts) ++tally.errors;
                    if (io_fatal(rc)) break;
                    continue;
                }
            }
            const uint64_t bad = check_data(buf, word0, words, ssd, p.gen, is_read ? mixed_alt : p.gen, warp_io);
            if (bad != 0 && counts) {
                ++tally.verify_failures;
                log_error(io, BAM_ERR_VERIFY, ssd, 0, 0xffff, is_read ? nvme::OP_READ : nvme::OP_WRITE, lba, p.nlb,
                          static_cast<uint32_t>(bad));
            }
        }
    }
    const uint64_t c1 = clock64();
    const uint64_t t1 = globaltimer();
    publish_totals(res, hist, totals, active, tally, c1 - c0, t0, t1);
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

// ---------------------------------------------------------------------------------------
// benchmark (element i holds mix64(i ^ seed); every read is checked)
//
// res: [0] elements read, [1] wrong values, [2] min start (globaltimer), [3] max end.

__device__ __forceinline__ void bench_done(unsigned long long* res, uint64_t elems, uint64_t bad, uint64_t t0) {
    const uint64_t t1 = globaltimer();
    __shared__ unsigned long long s_e, s_b, s_t0, s_t1;
    if (threadIdx.x == 0) {
        s_e = s_b = s_t1 = 0;
        s_t0 = ~0ull;
    }
    __syncthreads();
    atomicAdd(&s_e, static_cast<unsigned long long>(elems));
    if (bad) atomicAdd(&s_b, static_cast<unsigned long long>(bad));
    atomicMin(&s_t0, static_cast<unsigned long long>(t0));
    atomicMax(&s_t1, static_cast<unsigned long long>(t1));
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(&res[0], s_e);
        if (s_b) atomicAdd(&res[1], s_b);
        atomicMin(&res[2], s_t0);
        atomicMax(&res[3], s_t1);
    }
}

/// Linear: thread t reads elements t, t + T, ... (consecutive threads, consecutive
/// elements), `reps` passes.
extern "C" __global__ void __launch_bounds__(256, 6) bam_cb_linear(bam_array_view av, uint32_t reps, uint64_t seed, unsigned long long* res) {
    array<uint64_t> a{av};
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0, cnt = 0;
    for (uint32_t r = 0; r < reps; ++r)
        for (uint64_t i = gtid(); i < av.n; i += gthreads()) {
            bad += a[i] != mix64(i ^ seed);
            ++cnt;
        }
    bench_done(res, cnt, bad, t0);
}

extern "C" __global__ void bam_cb_raw_linear(const uint64_t* p, uint64_t n, uint32_t reps, uint64_t seed,
                                             unsigned long long* res) {
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0, cnt = 0;
    for (uint32_t r = 0; r < reps; ++r)
        for (uint64_t i = gtid(); i < n; i += gthreads()) {
            bad += p[i] != mix64(i ^ seed);
            ++cnt;
        }
    bench_done(res, cnt, bad, t0);
}

/// Random: every thread reads `per_thread` uniformly random elements.
extern "C" __global__ void __launch_bounds__(256, 6) bam_cb_random(bam_array_view av, uint64_t per_thread, uint64_t seed, uint64_t rseed,
                                         unsigned long long* res) {
    array<uint64_t> a{av};
    uint64_t rng = rng_seed(rseed, gtid());
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0;
    for (uint64_t k = 0; k < per_thread; ++k) {
        const uint64_t i = (rng_next(rng) >> 11) % av.n;
        bad += a[i] != mix64(i ^ seed);
    }
    bench_done(res, per_thread, bad, t0);
}

extern "C" __global__ void bam_cb_raw_random(const uint64_t* p, uint64_t n, uint64_t per_thread, uint64_t seed,
                                             uint64_t rseed, unsigned long long* res) {
    uint64_t rng = rng_seed(rseed, gtid());
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0;
    for (uint64_t k = 0; k < per_thread; ++k) {
        const uint64_t i = (rng_next(rng) >> 11) % n;
        bad += p[i] != mix64(i ^ seed);
    }
    bench_done(res, per_thread, bad, t0);
}

/// Reads a whole line (`count` u64 from element `first`) with the lanes of a warp,
/// unrolled by 8.
__device__ __forceinline__ uint64_t read_line_u64(const uint64_t* d, uint64_t first, uint32_t count, uint64_t seed) {
    const uint32_t lane = lane_id();
    uint64_t bad = 0;
    uint32_t j = lane;
    for (; j + 7 * 32 < count; j += 8 * 32) {
        uint64_t x[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) x[u] = d[j + u * 32];
#pragma unroll
        for (int u = 0; u < 8; ++u) bad += x[u] != mix64((first + j + u * 32) ^ seed);
    }
    for (; j < count; j += 32) bad += d[j] != mix64((first + j) ^ seed);
    return bad;
}

/// Cache-line-aware: warp w reads lines w, w + W, ... whole (one acquisition per line
/// per warp), `reps` passes. Launch with blocks of a multiple of 32 threads.
extern "C" __global__ void __launch_bounds__(256, 6) bam_cb_cla(bam_array_view av, uint32_t reps, uint64_t seed, unsigned long long* res) {
    array<uint64_t> a{av};
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0, cnt = 0;
    const uint64_t warps = gthreads() / 32, lines = a.lines();
    for (uint32_t r = 0; r < reps; ++r)
        for (uint64_t line = gtid() / 32; line < lines; line += warps) {
            line_span<uint64_t> s = acquire_line(a, line, 0xffffffffu);
            if (!s.ok()) {
                bad += s.count;
                continue;
            }
            bad += read_line_u64(s.data, s.first, s.count, seed);
            release_line(a, s);
            cnt += (s.count + 31 - lane_id()) / 32;
        }
    bench_done(res, cnt, bad, t0);
}

extern "C" __global__ void bam_cb_raw_cla(const uint64_t* p, uint64_t n, uint32_t elems_per_line, uint32_t reps,
                                          uint64_t seed, unsigned long long* res) {
    const uint64_t t0 = globaltimer();
    uint64_t bad = 0, cnt = 0;
    const uint64_t warps = gthreads() / 32, lines = detail::lines_for(n, elems_per_line);
    for (uint32_t r = 0; r < reps; ++r)
        for (uint64_t line = gtid() / 32; line < lines; line += warps) {
            const uint64_t first = line * elems_per_line;
            const uint32_t count = static_cast<uint32_t>(n - first < elems_per_line ? n - first : elems_per_line);
            bad += read_line_u64(p + first, first, count, seed);
            cnt += (count + 31 - lane_id()) / 32;
        }
    bench_done(res, cnt, bad, t0);
}

/// One warp: for k < nlines, every lane reads element `lane` of line first + k * stride
/// (a miss on a cold cache); out[k] = ns from before the access to after the warp has
/// its data. out[nlines] = wrong values.
extern "C" __global__ void bam_cb_latency(bam_array_view av, uint64_t first, uint64_t stride, uint32_t nlines,
                                          uint64_t seed, uint64_t* out) {
    array<uint64_t> a{av};
    uint64_t bad = 0;
    for (uint32_t k = 0; k < nlines; ++k) {
        const uint64_t i = (first + k * stride) * av.epl + lane_id();
        __syncwarp();
        const uint64_t t0 = globaltimer();
        const uint64_t x = a[i];
        __syncwarp();
        const uint64_t t1 = globaltimer();
        bad += x != mix64(i ^ seed);
        if (lane_id() == 0) out[k] = t1 - t0;
    }
    bad = __reduce_add_sync(0xffffffffu, static_cast<uint32_t>(bad));
    if (lane_id() == 0) out[nlines] = bad;
}

/// Where a miss's time goes (bench diagnostics), one thread, lines first, first + stride,
/// ... (`nlines` of them): the steps of a lone read (the cache's fill path:
/// bam::rw_sync_to<true>) taken one by one, with the global timer read between them.
/// out[8k + i], ns:
///   0 load_target (descriptor reads: I/O view, SSD view, queue pair view)
///   1 reserve_tickets (the ticket atomic)
///   2 wait_slot (the slot-release loads)
///   3 write_sqe + publish_marks (SQE stores, fence, mark)
///   4 push_tail (announce, doorbell, closing RMW)
///   5 from the start of push_tail until the CQE is visible here (polled, not consumed)
///   6 wait_on after that (reap: lock, fence, hand-over, slot release)
///   7 one pin of a line word (the hit path's atomic; the unpin is not waited for)
/// Reads go to the cache's slot 0, which the caller guarantees is unused (empty cache).
extern "C" __global__ void bam_cb_miss_phases(bam_array_view av, uint64_t first, uint64_t stride, uint32_t nlines,
                                               uint64_t* out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const bam_cache_dev* c = reinterpret_cast<const bam_cache_dev*>(av.cache);
    const uint32_t nlb = av.line_lbas;
    char* buf = reinterpret_cast<char*>(av.data);
    for (uint32_t k = 0; k < nlines; ++k) {
        uint64_t* o = out + 8 * k;
        const uint64_t line = first + k * stride;
        const uint64_t lba = line * nlb;
        const uint64_t t0 = globaltimer();
        const io_target target = load_target(c->io, 0);
        const qp_ref& q = target.q;
        // A store of loaded values (ordered before the timer read: both are volatile asm)
        // cannot issue before the loads have returned.
        atomic_dev<uint64_t>(o[7]).store(q.mask + target.nsid + target.buf.len + q.flags, cuda::memory_order_relaxed);
        const uint64_t t1 = globaltimer();
        const uint64_t t = reserve_tickets<true>(q, target.qpi, 1);
        atomic_dev<uint64_t>(o[7]).store(t, cuda::memory_order_relaxed);
        const uint64_t t2 = globaltimer();
        status_t rc = wait_slot(c->io, q, t, nvme::OP_READ, lba);
        const uint64_t t3 = globaltimer();
        uint64_t prp1 = 0, prp2 = 0;
        const bool prp_ok =
            build_prps(target.buf, reinterpret_cast<uint64_t>(buf), uint64_t(nlb) << target.lba_shift, prp1, prp2);
        bam_sqe e;
        nvme::make_rw(e, nvme::OP_READ, cid_of(t), target.nsid, lba, nlb, prp1, prp2);
        write_sqe(q, t, e);
        publish_marks(q, t, 1);
        const uint64_t t4 = globaltimer();
        if (rc == OK) rc = push_tail<true>(c->io, q, target.qpi, t, 1);
        const uint64_t t5 = globaltimer();
        // Poll the CQ head entry until a CQE is posted there (ours: nothing else runs).
        const uint64_t head = atomic_dev<unsigned long long>(*reinterpret_cast<unsigned long long*>(&q.st->cq_head))
                                  .load(cuda::memory_order_relaxed) >> 1;
        deadline dl(c->io.timeout_ns);
        while (!cqe_posted(q, head, load_cqe_dw3(q, head & q.mask, cuda::memory_order_relaxed)) && !dl.expired()) {
        }
        const uint64_t t6 = globaltimer();
        io_handle h;
        h.ticket = t;
        h.qp = target.qpi;
        h.ncmds = 1;
        h.ssd = 0;
        h.lba = lba;
        h.nlb = nlb;
        h.buf = buf;
        h.opcode = nvme::OP_READ;
        h.submitted = 1;
        if (rc == OK && prp_ok) rc = wait_on<true>(c->io, q, h);
        const uint64_t t7 = globaltimer();
        detail::word_ref w = detail::line_word(av, line);
        const unsigned long long old = w.fetch_add(1ull, cuda::memory_order_acquire);
        w.fetch_sub(1ull, cuda::memory_order_release);
        const uint64_t t8 = globaltimer();
        const bool good = rc == OK && prp_ok;
        o[0] = good ? t1 - t0 : ~0ull;
        o[1] = t2 - t1;
        o[2] = t3 - t2;
        o[3] = t4 - t3;
        o[4] = t5 - t4;
        o[5] = t6 - t4;
        o[6] = t7 - t6;
        o[7] = (t8 - t7) + (old & 0);  // `old` keeps the fetch_add's result used
    }
}

/// The cache layer's share of a miss (bench diagnostics), one thread, `nlines` cold lines
/// first, first + stride, ... (and, for step 4, first + stride / 4, ...): out[5k + i], ns:
///   0 cache_try_hit (the pin that finds the line invalid)
///   1 cache_acquire_slow (claim, slot, fill through the I/O layer, publish)
///   2 reading the element from the line
///   3 cache_release (a release: one fence)
///   4 one lane's whole bam::array read of an element of another cold line (the
///     latency kernel's access with one lane instead of 32)
extern "C" __global__ void bam_cb_miss_anatomy(bam_array_view av, uint64_t first, uint64_t stride, uint32_t nlines,
                                               uint64_t* out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const array<uint64_t> a{av};
    for (uint32_t k = 0; k < nlines; ++k) {
        uint64_t* o = out + 5 * k;
        const uint64_t line = first + k * stride;
        const uint64_t t0 = globaltimer();
        unsigned long long old = 0;
        char* p = cache_try_hit(av, line, 1, old);
        const uint64_t t1 = globaltimer() + (p != nullptr ? 0 : 0);
        if (p == nullptr) {
            deadline dl(0);
            p = cache_acquire_slow(av, line, 1, old, dl, false, true);
        }
        const uint64_t t2 = globaltimer();
        if (p == nullptr) {
            o[0] = ~0ull;
            continue;
        }
        const uint64_t x = atomic_dev<uint64_t>(*reinterpret_cast<uint64_t*>(p)).load(cuda::memory_order_relaxed);
        atomic_dev<uint64_t>(o[3]).store(x, cuda::memory_order_relaxed);  // waits for the load
        const uint64_t t3 = globaltimer();
        cache_release(av, line, 1, false);
        const uint64_t t4 = globaltimer();
        const uint64_t x1 = a[(line + stride / 4) * av.epl];
        atomic_dev<uint64_t>(o[4]).store(x1, cuda::memory_order_relaxed);  // waits for the read
        const uint64_t t5 = globaltimer();
        o[0] = t1 - t0;
        o[1] = t2 - t1;
        o[2] = t3 - t2;
        o[3] = t4 - t3;
        o[4] = t5 - t4;
    }
}

/// p[i] = mix64((first + i) ^ seed) for i < n.
extern "C" __global__ void bam_cache_fill_u64(uint64_t* p, uint64_t n, uint64_t first, uint64_t seed) {
    for (uint64_t i = gtid(); i < n; i += gthreads()) p[i] = mix64((first + i) ^ seed);
}
