// bam/util.cuh — small device helpers: clocks, lane masks, scoped atomics.
#pragma once

#include <cuda/atomic>
#include <stdint.h>

#include "abi.h"

namespace bam {


/// n / d and (in `rem`) n % d for a 32-bit divisor d > 0, without calling a function. A
/// 64-bit `/` on the GPU is a call of the compiler's division helper, and a call anywhere
/// in a kernel's loop makes ptxas keep more of the loop's values in local memory (the
/// cache's paths are inlined into user kernels: one such call site in bam::array's line
/// lookup kept a ported kernel's loop index in local memory). Quotients below 2^32 take the
/// 32-bit division (inlined by the compiler); above, the high half divides the same way
/// and the rest by restoring division, one bit a step (arrays of more than 2^32 elements
/// whose lines hold a number of elements that is not a power of two only).
__host__ __device__ __forceinline__ uint64_t div_u64_u32(uint64_t n, uint32_t d, uint32_t& rem) {
    const uint32_t hi = static_cast<uint32_t>(n >> 32), lo = static_cast<uint32_t>(n);
    if (hi == 0) {
        const uint32_t q = lo / d;
        rem = lo - q * d;
        return q;
    }
    const uint32_t quot_hi = hi / d;
    uint64_t r = hi - quot_hi * d;  // below d
    uint32_t quot_lo = 0;
#pragma unroll 1
    for (int b = 31; b >= 0; --b) {
        r = (r << 1) | ((lo >> b) & 1u);  // below 2d: fits 33 bits
        const bool take = r >= d;
        if (take) r -= d;
        quot_lo = (quot_lo << 1) | (take ? 1u : 0u);
    }
    rem = static_cast<uint32_t>(r);
    return (static_cast<uint64_t>(quot_hi) << 32) | quot_lo;
}

template <typename T>
using atomic_dev = cuda::atomic_ref<T, cuda::thread_scope_device>;
template <typename T>
using atomic_sys = cuda::atomic_ref<T, cuda::thread_scope_system>;

/// Nanoseconds of the GPU's global timer (the same clock on every SM).
__device__ __forceinline__ uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint32_t lane_id() {
    uint32_t l;
    asm("mov.u32 %0, %%laneid;" : "=r"(l));
    return l;
}

__device__ __forceinline__ uint32_t lanemask_lt() {
    uint32_t m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

/// Number of lanes of `group` (a lane mask) that are ready, counted from the group's
/// lowest lane up to (not including) the first lane that is not ready.
__device__ __forceinline__ uint32_t contiguous_ready(uint32_t group, uint32_t ready_ballot) {
    const uint32_t notready = group & ~ready_ballot;
    if (notready == 0) return __popc(group);
    return __popc(group & ((1u << (__ffs(notready) - 1)) - 1u));
}

/// A deadline that reads the global timer only when asked and only every few calls.
struct deadline {
    uint64_t timeout_ns;
    uint64_t end = 0;
    uint32_t calls = 0;

    __device__ explicit deadline(uint64_t t) : timeout_ns(t) {}

    /// now + timeout_ns, saturated: a timeout near 2^64 means "never", not a wrapped end
    /// that every wait passes at once.
    __device__ __forceinline__ static uint64_t end_of(uint64_t now, uint64_t t) {
        return t > ~0ull - now ? ~0ull : now + t;
    }

    /// True once the timeout has passed. Starts the clock on the first call.
    __device__ __forceinline__ bool expired() {
        if ((calls++ & 15u) != 0) return false;
        const uint64_t now = globaltimer();
        if (end == 0) {
            end = end_of(now, timeout_ns);
            return false;
        }
        return now > end;
    }

    /// Like expired(), but reads the clock on every call.
    __device__ __forceinline__ bool expired_now() {
        const uint64_t now = globaltimer();
        if (end == 0) {
            end = end_of(now, timeout_ns);
            return false;
        }
        return now > end;
    }
};

/// Polite spin: a short sleep that grows with the number of failed attempts.
__device__ __forceinline__ void backoff(uint32_t& n) {
    if (n < 8) {
        ++n;
        return;
    }
    __nanosleep(n < 64 ? 32 : 128);
    if (n < 64) ++n;
}

/// 64-bit maximum over the lanes of `group`.
__device__ __forceinline__ uint64_t reduce_max_u64(uint32_t group, uint64_t v) {
    const uint32_t hi = static_cast<uint32_t>(v >> 32);
    const uint32_t hmax = __reduce_max_sync(group, hi);
    const uint32_t lo = __reduce_max_sync(group, hi == hmax ? static_cast<uint32_t>(v) : 0u);
    return (static_cast<uint64_t>(hmax) << 32) | lo;
}

__device__ __forceinline__ uint64_t shfl_u64(uint32_t group, uint64_t v, int src) {
    const uint32_t lo = __shfl_sync(group, static_cast<uint32_t>(v), src);
    const uint32_t hi = __shfl_sync(group, static_cast<uint32_t>(v >> 32), src);
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

/// The 64-bit `v` of lane lane_id() - `delta` (__shfl_up_sync; lanes below `delta` get
/// their own, and a lane whose lane - `delta` is not in `group` an undefined value).
__device__ __forceinline__ uint64_t shfl_up_u64(uint32_t group, uint64_t v, uint32_t delta = 1) {
    const uint32_t lo = __shfl_up_sync(group, static_cast<uint32_t>(v), delta);
    const uint32_t hi = __shfl_up_sync(group, static_cast<uint32_t>(v >> 32), delta);
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

/// Warp-cooperative steps of the queue layer, for lanes that call together (LONE false:
/// the lanes of __activemask() group themselves) or for a lone lane (LONE true: no warp
/// intrinsic at all). A lane whose warp-mates wait for it inside a warp collective must
/// use the lone form: warp collectives are matched by kind and lane mask, not by call
/// site, so a collective of its own could be paired with theirs (a cache leader that
/// fills a line while its group waits in a shuffle; see bam/array.cuh with_line).
template <bool LONE>
__device__ __forceinline__ uint32_t co_active() {
    if constexpr (LONE) return 1u << lane_id();
    else return __activemask();
}
template <bool LONE>
__device__ __forceinline__ uint32_t co_match(uint32_t group, uint32_t v) {
    if constexpr (LONE) return group;
    else return __match_any_sync(group, v);
}
template <bool LONE>
__device__ __forceinline__ bool co_all(uint32_t group, bool p) {
    if constexpr (LONE) return p;
    else return __all_sync(group, p);
}
template <bool LONE>
__device__ __forceinline__ uint32_t co_ballot(uint32_t group, bool p) {
    if constexpr (LONE) return p ? group : 0u;
    else return __ballot_sync(group, p);
}
template <bool LONE, typename V>
__device__ __forceinline__ V co_shfl(uint32_t group, V v, int src) {
    if constexpr (LONE) return v;
    else return __shfl_sync(group, v, src);
}
template <bool LONE>
__device__ __forceinline__ uint64_t co_shfl_u64(uint32_t group, uint64_t v, int src) {
    if constexpr (LONE) return v;
    else return shfl_u64(group, v, src);
}
template <bool LONE>
__device__ __forceinline__ uint64_t co_reduce_max_u64(uint32_t group, uint64_t v) {
    if constexpr (LONE) return v;
    else return reduce_max_u64(group, v);
}
template <bool LONE>
__device__ __forceinline__ uint32_t co_reduce_add(uint32_t group, uint32_t v) {
    if constexpr (LONE) return v;
    else return __reduce_add_sync(group, v);
}
template <bool LONE>
__device__ __forceinline__ void co_syncwarp(uint32_t group) {
    if constexpr (!LONE) __syncwarp(group);
}

/// This thread's index in a 1-D grid, and the grid's thread count (grid-stride loops).
__device__ __forceinline__ uint64_t gtid() { return blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ uint64_t gthreads() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

}  // namespace bam
