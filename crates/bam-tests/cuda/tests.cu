// tests.cu — kernels of the GPU test suites (bam-tests; not shipped in the runtime):
//   bam_raw_cmds       raw commands on one queue pair (tests of a controller's validation)
//   bam_cache_torture, bam_cache_types_{write,check}_{1,4,8,16,24}, bam_cache_pin_hog,
//   bam_cache_check_u32: the cache's torture, type matrix, bounded-wait and error tests
//   bam_cache_read_at_u32: reads of listed elements (the read-ahead and range tests)
//   bam_cache_store_at_u32: stores to listed elements, read back (the range test)
//   bam_scan_check     every chunk of a scan delivered once, with the right bytes and halo
//   bam_log_burst      errors logged while the host drains the log (error-log test)
//   bam_push_mixed_group  a doorbell pushed by a warp group whose tickets came from two
//                      reservations, with a hole (the queue protocol's combined doorbell)
//   bam_cache_atomics_{u32,u64,i32,i64,f32,f64}: atomics from many lanes against a host model
//   bam_fill_ring_give_up, bam_cache_unpinned_wrap, bam_resident_bursts: races in the
//                      cache (cache_races.rs)
#include "../../bam-bench/cuda/bench_abi.h"  // the benchmarks' ABI (bam-bench, beside this crate)
#include <bam/array.cuh>
#include <bam/cache.cuh>
#include <bam/io.cuh>
#include <bam/pattern.cuh>
#include <bam/scan.cuh>
#include <bam/util.cuh>

using namespace bam;
// The raw-command tests drive the queue protocol's internals directly.
using namespace bam::detail;

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

// ---------------------------------------------------------------------------------------
// tests

/// Element value written by the torture test: the top 16 bits identify the element, the
/// low 16 bits the operation (0xffff: the initial value).
__device__ __forceinline__ uint32_t torture_value(uint64_t e, uint32_t op) {
    return (mix32(static_cast<uint32_t>(e) ^ 0x5bd1e995u) & 0xffff0000u) | (op & 0xffffu);
}

/// Torture: every thread does `ops` operations; op = r % 4: 0, 1 write one of the
/// thread's own elements (e = tid + j * T; one writer per element), 2, 3 read a random
/// element (through array_ref when use_ref, four consecutive elements) and check that
/// it belongs to that element. res[0] = bad reads, res[1] = failed operations.
extern "C" __global__ void bam_cache_torture(bam_array_view av, uint64_t ops, uint64_t seed, uint32_t use_ref,
                                             unsigned long long* res) {
    array<uint32_t> a{av};
    const uint64_t tid = gtid(), T = gthreads(), n = av.n;
    uint64_t rng = rng_seed(seed, tid);
    const uint64_t owned = tid < n ? (n - tid + T - 1) / T : 0;
    array_ref<uint32_t> ref(a);
    uint64_t bad = 0, failed = 0;
    for (uint64_t k = 0; k < ops; ++k) {
        const uint64_t r = rng_next(rng);
        if ((r & 3u) < 2u) {
            if (owned == 0) continue;
            const uint64_t e = tid + ((r >> 8) % owned) * T;
            ref.release();  // hold nothing while waiting for another line
            if (!a.store(e, torture_value(e, static_cast<uint32_t>(k)))) ++failed;
        } else {
            const uint64_t e0 = (r >> 8) % n;
            const uint32_t cnt = use_ref ? 4u : 1u;
            for (uint32_t d = 0; d < cnt; ++d) {
                const uint64_t e = (e0 + d) % n;
                uint32_t x = 0;
                const bool ok = use_ref ? ref.try_read(e, x) : a.try_read(e, x);
                if (!ok) {
                    ++failed;
                } else if ((x & 0xffff0000u) != (torture_value(e, 0) & 0xffff0000u)) {
                    ++bad;
                }
            }
        }
    }
    ref.release();
    if (bad) atomicAdd(&res[0], static_cast<unsigned long long>(bad));
    if (failed) atomicAdd(&res[1], static_cast<unsigned long long>(failed));
}

template <typename T>
__device__ __forceinline__ T make_elem(uint64_t i, uint32_t gen) {
    constexpr uint32_t W = (sizeof(T) + 3) / 4;
    uint32_t w[W];
#pragma unroll
    for (uint32_t k = 0; k < W; ++k) w[k] = mix32(static_cast<uint32_t>(i * 7 + k) ^ (gen * 0x9e3779b9u));
    T x;
    memcpy(&x, w, sizeof(T));
    return x;
}

template <typename T>
__device__ __forceinline__ bool same(const T& a, const T& b) {
    const unsigned char* x = reinterpret_cast<const unsigned char*>(&a);
    const unsigned char* y = reinterpret_cast<const unsigned char*>(&b);
    bool eq = true;
#pragma unroll
    for (uint32_t k = 0; k < sizeof(T); ++k) eq &= x[k] == y[k];
    return eq;
}

/// Writes make_elem(i, gen) to every element: divergent lanes, two write forms, then a
/// cache-line-aware pass (every warp rewrites whole lines it reads: TILE-lane groups).
template <typename T>
__device__ void types_write(bam_array_view av, uint32_t gen, unsigned long long* res) {
    array<T> a{av};
    uint64_t failed = 0;
    const uint32_t lane = lane_id();
    for (uint64_t i = gtid(); i < av.n; i += gthreads()) {
        if (lane % 3 == 0) {
            if (!a.store(i, make_elem<T>(i, gen ^ 1))) ++failed;  // overwritten below
            if (!a.store(i, make_elem<T>(i, gen))) ++failed;
        } else if (lane % 3 == 1) {
            if (!a.store(i, make_elem<T>(i, gen))) ++failed;
        } else {
            T old;
            if (!a.try_read(i, old)) ++failed;
            if (!a.store(i, make_elem<T>(i, gen))) ++failed;
        }
    }
    if (failed) atomicAdd(&res[1], static_cast<unsigned long long>(failed));
}

/// Counts a wrong value of pass `pass` (0: array_ref, 1: a[i]/try_read, 2, 3, 4:
/// for_each_element with groups of 4, 16, 32 lanes) and remembers the first one seen:
/// res[4] = index + 1, res[5] = pass, res[6] = its first 8 bytes as read, res[7] = 1 if
/// that value is the element's earlier (overwritten) value, 2 if it is another element's.
template <typename T>
__device__ __forceinline__ void note_bad(unsigned long long* res, uint64_t i, uint32_t pass, const T& got,
                                         uint32_t gen) {
    if (atomicCAS(&res[4], 0ull, static_cast<unsigned long long>(i + 1)) != 0ull) return;
    res[5] = pass;
    unsigned long long w = 0;
    memcpy(&w, &got, sizeof(T) < 8 ? sizeof(T) : 8);
    res[6] = w;
    uint32_t kind = 0;
    if (same(got, make_elem<T>(i, gen ^ 1))) kind = 1;
    for (int64_t d = -64; d <= 64 && kind == 0; ++d)
        if (d != 0 && static_cast<int64_t>(i) + d >= 0 && same(got, make_elem<T>(i + d, gen))) kind = 2;
    res[7] = kind;
}

/// The cache-line-aware check pass with groups of TILE lanes.
template <int TILE, typename T>
__device__ __forceinline__ void check_lines(const array<T>& a, uint32_t gen, uint32_t pass, uint32_t counter,
                                            unsigned long long* res) {
    unsigned long long bad = 0;
    for_each_element<TILE>(a, [&](uint64_t i, T& x) {
        const T got = x;
        if (!same(got, make_elem<T>(i, gen))) {
            ++bad;
            note_bad(res, i, pass, got, gen);
        }
        return false;
    });
    if (bad) atomicAdd(&res[counter], bad);
}

/// Checks every element up to five ways: array_ref over a contiguous chunk per warp
/// (lanes interleaved, so a warp pins at most two lines at once; skipped unless
/// `use_ref`), a[i] / try_read in divergent code, and (full warps only)
/// for_each_element with groups of 4, 16 and 32 lanes. Wrong values per pass: res[0]
/// array_ref, res[2] a[i]/try_read, res[3] / res[8] / res[9] lines with 4 / 16 / 32 lanes; res[1]:
/// failed accesses; res[4..7]: the first wrong value (note_bad).
template <typename T>
__device__ void types_check(bam_array_view av, uint32_t gen, uint32_t use_ref, unsigned long long* res) {
    array<T> a{av};
    uint64_t bad_ref = 0, bad_coal = 0, failed = 0;
    const uint64_t T_ = gthreads(), n = av.n;
    if (use_ref) {
        const uint32_t warps_per_block = (blockDim.x + 31) / 32;
        const uint64_t nwarps = static_cast<uint64_t>(gridDim.x) * warps_per_block;
        const uint64_t warp = blockIdx.x * static_cast<uint64_t>(warps_per_block) + threadIdx.x / 32;
        const uint32_t warp_lanes = min(32u, blockDim.x - (threadIdx.x / 32) * 32);  // partial last warp
        const uint64_t per = (n + nwarps - 1) / nwarps;
        const uint64_t end = (warp + 1) * per < n ? (warp + 1) * per : n;
        array_ref<T> ref(a);
        for (uint64_t i = warp * per + lane_id(); i < end; i += warp_lanes) {
            T x;
            if (!ref.try_read(i, x)) {
                ++failed;
            } else if (!same(x, make_elem<T>(i, gen))) {
                ++bad_ref;
                note_bad(res, i, 0, x, gen);
            }
        }
    }
    atomicAdd(&res[10], 1ull);  // progress: threads past each pass, res[10..14]
    for (uint64_t i = gtid(); i < n; i += T_) {
        T x{};
        bool ok = true;
        if (lane_id() & 1) {
            if (!a.try_read(i, x)) {
                ++failed;
                continue;
            }
        } else {
            x = a[i];
        }
        ok = same(x, make_elem<T>(i, gen));
        if (!ok) {
            ++bad_coal;
            note_bad(res, i, 1, x, gen);
        }
    }
    atomicAdd(&res[11], 1ull);
    if (blockDim.x % 32 == 0) {
        check_lines<4>(a, gen, 2, 3, res);
        atomicAdd(&res[12], 1ull);
        check_lines<16>(a, gen, 3, 8, res);
        atomicAdd(&res[13], 1ull);
        check_lines<32>(a, gen, 4, 9, res);
        atomicAdd(&res[14], 1ull);
    }
    if (bad_ref) atomicAdd(&res[0], static_cast<unsigned long long>(bad_ref));
    if (bad_coal) atomicAdd(&res[2], static_cast<unsigned long long>(bad_coal));
    if (failed) atomicAdd(&res[1], static_cast<unsigned long long>(failed));
}

template <int N>
struct bytes_t {
    uint8_t b[N];
};
struct alignas(8) elem24 {
    uint64_t a, b, c;
};

#define BAM_TYPES_KERNELS(SUFFIX, TYPE)                                                                     \
    extern "C" __global__ void bam_cache_types_write_##SUFFIX(bam_array_view av, uint32_t gen,              \
                                                              unsigned long long* res) {                    \
        types_write<TYPE>(av, gen, res);                                                                    \
    }                                                                                                       \
    extern "C" __global__ void bam_cache_types_check_##SUFFIX(bam_array_view av, uint32_t gen,              \
                                                              uint32_t use_ref, unsigned long long* res) {  \
        types_check<TYPE>(av, gen, use_ref, res);                                                           \
    }
BAM_TYPES_KERNELS(1, uint8_t)
BAM_TYPES_KERNELS(4, uint32_t)
BAM_TYPES_KERNELS(8, uint64_t)
BAM_TYPES_KERNELS(16, uint4)
BAM_TYPES_KERNELS(24, elem24)

/// Every warp pins line 2w with one array_ref and, still holding it, reads line 2w + 1
/// with another: with fewer slots than twice the warps the second acquisitions must
/// time out (bounded) and fail. res[0] = warps that got both, res[1] = warps that failed.
extern "C" __global__ void bam_cache_pin_hog(bam_array_view av, unsigned long long* res) {
    array<uint32_t> a{av};
    const uint64_t w = gtid() / 32;
    bool ok = false;
    {
        array_ref<uint32_t> r1(a), r2(a);
        uint32_t x;
        const bool ok1 = r1.try_read((2 * w) * av.epl % av.n, x);
        const bool ok2 = r2.try_read((2 * w + 1) * av.epl % av.n, x);
        ok = ok1 && ok2;
    }
    if (lane_id() == 0) atomicAdd(&res[ok ? 0 : 1], 1ull);
}

/// Reads every element with try_read; res[0] += failed reads, res[1] += wrong values
/// (element e of a medium filled with the pattern of SSD `ssd`, single-SSD layout).
extern "C" __global__ void bam_cache_check_u32(bam_array_view av, uint32_t ssd, uint64_t word0,
                                               unsigned long long* res) {
    array<uint32_t> a{av};
    uint64_t failed = 0, bad = 0;
    for (uint64_t i = gtid(); i < av.n; i += gthreads()) {
        uint32_t x;
        if (!a.try_read(i, x)) ++failed;
        else if (x != pattern_word(ssd, word0 + i, 0)) ++bad;
    }
    if (failed) atomicAdd(&res[0], static_cast<unsigned long long>(failed));
    if (bad) atomicAdd(&res[1], static_cast<unsigned long long>(bad));
}

/// Thread t < count reads element idx[t] with try_read; res[0] += failed reads, res[1] +=
/// wrong values (pattern of SSD `ssd` from word `word0`, single-SSD layout). Lanes of a
/// warp whose elements lie in different lines never read ahead; a full warp whose
/// elements lie in one line may (bam/cache.cuh, read_ahead).
extern "C" __global__ void bam_cache_read_at_u32(bam_array_view av, const uint64_t* idx, uint32_t count, uint32_t ssd,
                                                 uint64_t word0, unsigned long long* res) {
    array<uint32_t> a{av};
    const uint64_t t = gtid();
    if (t >= count) return;
    uint32_t x;
    if (!a.try_read(idx[t], x)) atomicAdd(&res[0], 1ull);
    else if (x != pattern_word(ssd, word0 + idx[t], 0)) atomicAdd(&res[1], 1ull);
}

/// Thread t < count stores idx[t] ^ x to element idx[t] with store; res[0] += failed
/// stores. The threads whose store succeeded then read their element back with try_read
/// (a call of those lanes only): res[1] += read-backs that failed or differ.
extern "C" __global__ void bam_cache_store_at_u32(bam_array_view av, const uint64_t* idx, uint32_t count, uint32_t x,
                                                  unsigned long long* res) {
    array<uint32_t> a{av};
    const uint64_t t = gtid();
    if (t >= count) return;
    const uint64_t i = idx[t];
    const uint32_t v = static_cast<uint32_t>(i) ^ x;
    if (!a.store(i, v)) {
        atomicAdd(&res[0], 1ull);
        return;
    }
    uint32_t y;
    if (!a.try_read(i, y) || y != v) atomicAdd(&res[1], 1ull);
}

/// Byte `off` of span `span` in the scan tests (scan_suite.rs writes the same bytes).
__device__ __forceinline__ uint8_t scan_test_byte(uint32_t span, uint64_t off) {
    return static_cast<uint8_t>((off * 0x9E3779B97F4A7C15ull) >> 32) ^ static_cast<uint8_t>(span * 31u);
}

/// Reads a scan and checks it: seen[k] counts the deliveries of chunk k; res[0] = wrong
/// bytes (chunk and halo), res[1] = bytes checked, res[2] = blocks whose scan failed.
extern "C" __global__ void bam_scan_check(const __grid_constant__ bam_scan_view v, unsigned* seen,
                                          unsigned long long* res) {
    bam::scan_reader r(v);
    unsigned long long wrong = 0, checked = 0;
    while (r.next()) {
        if (threadIdx.x == 0) atomicAdd(&seen[r.chunk()], 1u);
        for (uint32_t s = 0; s < v.nspans; ++s) {
            const uint8_t* d = reinterpret_cast<const uint8_t*>(r.data(s));
            const uint32_t n = r.bytes(s) + r.halo(s);
            const uint64_t off = r.offset(s);
            for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
                wrong += d[i] != scan_test_byte(s, off + i);
                ++checked;
            }
        }
    }
    atomicAdd(&res[0], wrong);
    atomicAdd(&res[1], checked);
    if (threadIdx.x == 0 && r.status() != bam::OK) atomicAdd(&res[2], 1ull);
}

/// Element i of array `seed`'s data in the users' loads (bulk.rs, `value`: the same mix).
__device__ __forceinline__ uint32_t bulk_value(uint64_t seed, uint64_t i) {
    uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return static_cast<uint32_t>(x);
}

/// Every element of the array stored through bam::array (grid-stride, one element per
/// thread per step); failed[0] counts the stores that failed.
extern "C" __global__ void bam_bulk_store_u32(bam_array_view av, uint64_t seed, unsigned long long* failed) {
    array<uint32_t> a{av};
    uint64_t bad = 0;
    for (uint64_t i = gtid(); i < av.n; i += gthreads())
        if (!a.store(i, bulk_value(seed, i))) ++bad;
    if (bad) atomicAdd(failed, static_cast<unsigned long long>(bad));
}

/// Bad arguments the device library must refuse, one thread:
/// out[0] submit_on a queue pair the I/O layer does not have; out[1] a read whose LBA
/// range wraps past 2^64; out[2] a read into a buffer range that wraps past 2^64; out[3]
/// wait on a handle that names no queue pair. Each must be BAM_ERR_INVALID.
extern "C" __global__ void bam_bad_args(bam_io_view io, int* out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    void* buf = reinterpret_cast<void*>(io.buf.base);
    io_handle h;
    out[0] = submit_on(io, io.nqp, nvme::OP_READ, 0, 0, 1, buf, h);
    out[1] = bam::read(io, 0, ~0ull - 3, 8, buf);
    out[2] = bam::read(io, 0, 0, 1, reinterpret_cast<void*>(~0ull - 255));
    io_handle w;
    w.submitted = 1;
    w.ncmds = 1;
    w.qp = io.nqp;
    out[3] = wait(io, w);
}

/// acquire_line of a line whose first element index wraps past 2^64 (line * epl): the
/// span must be empty and nothing acquired. out[0] = the span's count, out[1] = 1 if it
/// holds data.
extern "C" __global__ void bam_cache_acquire_far_line(bam_array_view av, unsigned long long* out) {
    array<uint32_t> a{av};
    const uint64_t line = ~0ull / av.epl + 2;
    line_span<uint32_t> s = acquire_line(a, line);
    if (lane_id() == 0) {
        out[0] = s.count;
        out[1] = s.ok() ? 1 : 0;
    }
    if (s.ok()) release_line(a, s);
}

/// Errors logged while the host drains the log (the error-log test): thread t records
/// `per_thread` errors with LBAs t * per_thread + i, `spacing_ns` apart.
extern "C" __global__ void bam_log_burst(bam_io_view io, uint32_t per_thread, uint32_t spacing_ns) {
    const uint64_t t = gtid();
    for (uint32_t i = 0; i < per_thread; ++i) {
        log_error(io, BAM_ERR_INVALID, 0, 0, 0xffff, 0, t * per_thread + i, 1, 0x7e57);
        const uint64_t until = globaltimer() + spacing_ns;
        while (globaltimer() < until) __nanosleep(1000);
    }
}

/// One read of LBA `i` into buffer page `i` as ticket `t` of queue pair 0: wait for the
/// slot, write the SQE (not published).
__device__ void mixed_group_sqe(const bam_io_view& io, const qp_ref& q, uint64_t t, uint32_t i) {
    const bam_ssd_view& s = ssd_view(io, q.ssd);
    uint64_t prp1 = 0, prp2 = 0;
    build_prps(io.buf, io.buf.base + 4096ull * i, 1ull << s.lba_shift, prp1, prp2);
    if (wait_slot(io, q, t, nvme::OP_READ, i) != OK) return;
    bam_sqe e;
    nvme::make_rw(e, nvme::OP_READ, cid_of(t), s.nsid, i, 1, prp1, prp2);
    write_sqe(q, t, e);
}

/// The combined SQ doorbell (push_tail) with a warp group whose lanes took their tickets
/// in two reservations, as lanes of one warp that diverged and met again do. Lane 2 takes
/// ticket T alone and sees it rung; lanes 0, 1 and 3 then take T+1, T+2, T+3 together;
/// lanes 0 and 3 publish theirs and lane 1 does not yet (a hole); lanes 0, 2 and 3
/// announce together. The leader's ticket (T+1) is the tail and the group's count (3)
/// equals the span T+1 .. T+3, but the group holds T (already rung) and not T+2: the
/// doorbell must stop at the hole. Then lane 1 publishes (after `delay_ns`, so that a
/// controller that was told about the hole fetches its stale SQE first) and every lane
/// waits for its completion.
/// out[0] = the SQ tail doorbell after the group's push (0xffffffff for an MMIO
/// doorbell, which cannot be read back), out[1] = T mod depth, out[2 + l] = lane l's
/// (rc << 16) | NVMe status for l < 4, out[6 + l] = lane l's ticket - T, out[10] = the
/// lanes active at the group's push.
extern "C" __global__ void bam_push_mixed_group(bam_io_view io, uint64_t delay_ns, uint32_t* out) {
    if (blockIdx.x != 0 || threadIdx.x >= 32) return;
    const uint32_t lane = lane_id();
    const qp_ref q = load_qp(io, 0);
    __shared__ unsigned long long first;
    uint64_t t = 0;
    if (lane == 2) {
        t = reserve_tickets<true>(q, 0, 1);
        first = t;
        mixed_group_sqe(io, q, t, 0);
        publish_marks(q, t, 1);
        push_tail<true>(io, q, 0, t, 1);
    }
    __syncwarp();
    if (lane == 0 || lane == 1 || lane == 3) {
        t = reserve_tickets<false>(q, 0, 1);
        if (lane != 1) {
            mixed_group_sqe(io, q, t, static_cast<uint32_t>(t - first));
            publish_marks(q, t, 1);
        }
    }
    __syncwarp();
    // The three lanes meet before the push (so that push_tail's group, the lanes active
    // there, is all three), and say which lanes were active with them.
    __shared__ uint32_t met;
    if (lane == 0 || lane == 2 || lane == 3) {
        __syncwarp(0xdu);
        const uint32_t active = __activemask();
        push_tail<false>(io, q, 0, t, 1);
        if (lane == 0) met = active;
    }
    __syncwarp();
    if (lane == 0) {
        out[0] = q.mmio() ? 0xffffffffu
                          : atomic_dev<uint32_t>(*reinterpret_cast<uint32_t*>(q.sq_db)).load(cuda::memory_order_relaxed);
        out[1] = static_cast<uint32_t>(first & q.mask);
        out[10] = met;
    }
    if (lane == 1) {
        const uint64_t until = globaltimer() + delay_ns;
        while (globaltimer() < until) __nanosleep(1000);
        mixed_group_sqe(io, q, t, static_cast<uint32_t>(t - first));
        publish_marks(q, t, 1);
        push_tail<true>(io, q, 0, t, 1);
    }
    __syncwarp();
    if (lane < 4) {
        uint32_t status_field = 0;
        const status_t rc = wait_ticket<true>(io, q, 0, t, status_field);
        out[2 + lane] = (static_cast<uint32_t>(rc) << 16) | status_field;
        out[6 + lane] = static_cast<uint32_t>(t - first);
    }
}

// ---------------------------------------------------------------------------------------
// Races in the cache (cache_races.rs)

/// A fill ring ticket given up: thread 0 takes the ring's next ticket t through
/// detail::post_fill while t's entry still holds a request of the lap before (written
/// here: the ring of a service that stopped taking requests), with a 1 ms deadline, so
/// post_fill gives the ticket up. Then t's entry is freed for t's lap, as the service does
/// when it takes that older request. out[0] = 1 if post_fill posted (it must not).
extern "C" __global__ void bam_fill_ring_give_up(bam_array_view v, uint32_t* out) {
    if (gtid() != 0) return;
    const bam_cache_dev* c = detail::cache_of(v);
    bam_fill_ctl* ctl = reinterpret_cast<bam_fill_ctl*>(c->fill_ctl);
    unsigned long long* ring = reinterpret_cast<unsigned long long*>(c->ring);
    const uint32_t shift = c->ring_shift;
    const uint64_t t =
        atomic_dev<unsigned long long>(*reinterpret_cast<unsigned long long*>(&ctl->tail)).load(cuda::memory_order_relaxed);
    const uint64_t lap = t >> shift;
    atomic_dev<unsigned long long> e(ring[t & ((1ull << shift) - 1)]);
    e.store((((lap - 1) & 7ull) << BAM_FILL_LAP_SHIFT) | BAM_FILL_POSTED | detail::line_key(v.id, 0),
            cuda::memory_order_relaxed);
    deadline dl(1000000);
    out[0] = detail::post_fill(c, detail::line_key(v.id, 0), dl) ? 1u : 0u;
    e.store((lap & 7ull) << BAM_FILL_LAP_SHIFT, cuda::memory_order_relaxed);
}

/// A warp descheduled in an unpinned read while its line is refilled into the same slot
/// 512 times, played by the read's test hook: after the first load of the line
/// word the slot's element holds another line's value for `pause_ns` (the slot lent to
/// other lines meanwhile), and is put back before the second load (the line back in its
/// slot, its word as 512 refills leave it: unchanged).
struct play_refills {
    uint32_t* elem;
    uint64_t pause_ns;
    uint32_t saved = 0;
    __device__ void operator()(int at) {
        if (at == 0) {
            saved = *elem;
            *elem = 0xdeadbeefu;
            const uint64_t until = globaltimer() + pause_ns;
            while (globaltimer() < until) __nanosleep(1000);
        } else {
            *elem = saved;
        }
    }
};

/// out[0] = 1 if the played read succeeded, out[1] = the value it returned, out[2] = the
/// element's value (read first, which fills the line).
extern "C" __global__ void bam_cache_unpinned_wrap(bam_array_view v, uint64_t pause_ns, uint32_t* out) {
    if (gtid() != 0) return;
    array<uint32_t> a{v};
    out[2] = a[0];
    const unsigned long long w = detail::line_word(v, 0).load(cuda::memory_order_acquire);
    play_refills p{reinterpret_cast<uint32_t*>(detail::slot_ptr(v, w >> 32)), pause_ns};
    uint32_t x = 0;
    out[0] = cache_read_unpinned(v, 0, 0, x, p) ? 1u : 0u;
    out[1] = x;
}

/// Stores through a resident view in bursts: one block; line after line, `k` stores
/// of the values 1 .. k into every element of the line, `gap_ns` apart, so that a flush
/// the host runs meanwhile writes lines back while their stores go on. Each element ends
/// holding k.
extern "C" __global__ void bam_resident_bursts(bam_array_view v, uint32_t k, uint64_t gap_ns) {
    array<uint32_t> a{v};
    const uint64_t lines = (v.n + v.epl - 1) / v.epl;
    for (uint64_t l = 0; l < lines; ++l) {
        const uint64_t end = (l + 1) * v.epl < v.n ? (l + 1) * v.epl : v.n;
        for (uint32_t j = 1; j <= k; ++j) {
            for (uint64_t i = l * v.epl + threadIdx.x; i < end; i += blockDim.x) a.store(i, j);
            if (threadIdx.x == 0) {
                const uint64_t until = globaltimer() + gap_ns;
                while (globaltimer() < until) {
                }
            }
            __syncthreads();
        }
    }
}

/// The atomics test's operation k of thread t (atomics.rs replays it): one mix64 hash
/// that picks the element (a quarter of the operations go to the 8 hot elements 0..7, so
/// many lanes and warps work on one element at once; the rest anywhere in [0, n - 1)),
/// whether the lane skips the operation (divergent lanes) and the operand.
__device__ __forceinline__ uint64_t atomics_hash(uint64_t seed, uint64_t t, uint32_t k) {
    return mix64(seed ^ (t << 20) ^ k);
}

/// The operand of operation `op` (BAM_ATOMIC_*, atomics.rs) for hash h, as a T.
template <typename T>
__device__ __forceinline__ T atomics_operand(uint32_t op, uint64_t h) {
    constexpr uint32_t bits = 8 * sizeof(T);
    if constexpr (std::is_integral<T>::value) {
        switch (op) {
            case 2: case 3: case 6: return static_cast<T>(h);  // min, max, xor: any value
            case 4: return static_cast<T>(~(1ull << (h % bits)));  // and: clears one bit
            case 5: return static_cast<T>(1ull << (h % bits));  // or: sets one bit
            default: break;
        }
    }
    return static_cast<T>((h >> 48) & 0xff);  // add, sub, compare-exchange adds: small
}

/// Every thread takes a ticket first (fetch_add(n - 1, 1), whose old value minus
/// `ticket0` must be unique: tickets[old - ticket0] counts it), then does `ops`
/// operations `op` (0 add, 1 sub, 2 min, 3 max, 4 and, 5 or, 6 xor, 7 add by a
/// compare_exchange loop) on the elements atomics_hash picks. res[0] += operations that
/// failed, res[1] += tickets out of range.
template <typename T>
__device__ void atomics_run(bam_array_view av, uint32_t op, uint32_t ops, uint64_t seed, T ticket0,
                            uint32_t* tickets, unsigned long long* res) {
    array<T> a{av};
    const uint64_t t = gtid();
    const uint64_t threads = gthreads();
    uint64_t failed = 0;
    bool ok = true;
    const T old = a.fetch_add(av.n - 1, T(1), &ok);
    if (!ok) {
        ++failed;
    } else {
        const uint64_t ticket = static_cast<uint64_t>(old - ticket0);
        if (ticket < threads) atomicAdd(&tickets[ticket], 1u);
        else atomicAdd(&res[1], 1ull);
    }
    for (uint32_t k = 0; k < ops; ++k) {
        const uint64_t h = atomics_hash(seed, t, k);
        if ((h & 0xff) % 7 == 3) continue;  // this lane sits this one out
        const uint64_t i = ((h >> 32) & 3) == 0 ? (h >> 40) & 7 : (h >> 8) % (av.n - 1);
        const T x = atomics_operand<T>(op, h);
        ok = true;
        if constexpr (std::is_integral<T>::value) {
            switch (op) {
                case 2: a.fetch_min(i, x, &ok); break;
                case 3: a.fetch_max(i, x, &ok); break;
                case 4: a.fetch_and(i, x, &ok); break;
                case 5: a.fetch_or(i, x, &ok); break;
                case 6: a.fetch_xor(i, x, &ok); break;
                default: break;
            }
        }
        if (op == 0) a.fetch_add(i, x, &ok);
        if (op == 1) a.fetch_sub(i, x, &ok);
        if (op == 7) {
            T e = a[i];
            while (!a.compare_exchange(i, e, static_cast<T>(e + x), &ok) && ok) {
            }
        }
        failed += !ok;
    }
    if (failed) atomicAdd(&res[0], static_cast<unsigned long long>(failed));
}

#define BAM_ATOMICS_KERNEL(T, SUFFIX)                                                                        \
    extern "C" __global__ void bam_cache_atomics_##SUFFIX(bam_array_view av, uint32_t op, uint32_t ops,       \
                                                          uint64_t seed, T ticket0, uint32_t* tickets,       \
                                                          unsigned long long* res) {                         \
        atomics_run<T>(av, op, ops, seed, ticket0, tickets, res);                                            \
    }
BAM_ATOMICS_KERNEL(uint32_t, u32)
BAM_ATOMICS_KERNEL(uint64_t, u64)
BAM_ATOMICS_KERNEL(int32_t, i32)
BAM_ATOMICS_KERNEL(int64_t, i64)
BAM_ATOMICS_KERNEL(float, f32)
BAM_ATOMICS_KERNEL(double, f64)
