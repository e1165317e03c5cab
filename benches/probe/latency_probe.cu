// latency_probe.cu — the memory-system latencies that bound a single cache miss
// (docs/cache.md, "Single-miss latency: where it stands"): one thread's dependent chains of loads,
// atomics and fences at device scope, the visibility hand-off between two SMs with
// different orderings, one warp's copy of a cold 4 KiB block, and the floor of a whole
// miss (miss_floor: a stand-in requester and controller doing only what any design must).
// The chain figures are means over long dependent chains, timed with globaltimer (32 ns
// steps) and clock64; the miss floor's are percentiles over 2000 rounds.
// Build: nvcc -O3 -arch=sm_90 -std=c++17 latency_probe.cu -o latency-probe
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e = (x);                                                                   \
        if (e != cudaSuccess) {                                                                \
            printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__);                 \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

__device__ __forceinline__ uint64_t gtimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint32_t ld_relaxed(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ uint32_t ld_acquire(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ uint32_t ld_plain(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed(uint32_t* p, uint32_t v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release(uint32_t* p, uint32_t v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t atom_add_relaxed(uint32_t* p, uint32_t v) {
    uint32_t r;
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ uint32_t atom_add_acquire(uint32_t* p, uint32_t v) {
    uint32_t r;
    asm volatile("atom.acquire.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ uint32_t atom_add_acqrel(uint32_t* p, uint32_t v) {
    uint32_t r;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ uint32_t atom_cas_acquire(uint32_t* p, uint32_t cmp, uint32_t v) {
    uint32_t r;
    asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(r) : "l"(p), "r"(cmp), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ uint32_t atom_cas_relaxed(uint32_t* p, uint32_t cmp, uint32_t v) {
    uint32_t r;
    asm volatile("atom.relaxed.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(r) : "l"(p), "r"(cmp), "r"(v) : "memory");
    return r;
}
__device__ __forceinline__ void fence_acqrel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ void fence_sc() { asm volatile("fence.sc.gpu;" ::: "memory"); }

// One thread. `ring` is a permutation cycle of 32-bit indices over `n` words spaced
// 128 B apart (one per L2 sector group), warmed into L2 by the first lap.
enum { CHAIN = 4000 };
__global__ void chains(uint32_t* ring, uint32_t* word, uint64_t* out) {
    uint32_t x = 0;
    for (int k = 0; k < CHAIN; ++k) x = ring[x];  // warm
    uint64_t c0, t0;
#define TIMED(slot, body)                                                                      \
    t0 = gtimer();                                                                             \
    c0 = clock64();                                                                            \
    for (int k = 0; k < CHAIN; ++k) { body; }                                                  \
    out[2 * (slot)] = (gtimer() - t0);                                                         \
    out[2 * (slot) + 1] = (clock64() - c0);
    TIMED(0, x = ld_plain(ring + x));             // L1 may hit (ld.ca default on sm_90: L1)
    TIMED(1, x = ld_relaxed(ring + x));           // L2
    TIMED(2, x = ld_acquire(ring + x));           // L2 + L1 invalidate
    TIMED(3, x = atom_add_relaxed(word + (x & 1), 0u));
    TIMED(4, x = atom_add_acqrel(word + (x & 1), 0u));
    TIMED(5, st_relaxed(word + 2, k); fence_acqrel());  // a release fence after a store
    TIMED(6, st_release(word + 2, k));            // back-to-back release stores
    TIMED(7, st_relaxed(word + 2, k));            // fire-and-forget stores
    TIMED(8, st_relaxed(word + 2, k); fence_sc());
    TIMED(9, fence_acqrel());                      // a fence with nothing outstanding
    TIMED(10, x += static_cast<uint32_t>(gtimer())); // reading the timer
    TIMED(11, x = atom_cas_relaxed(word + 4 + (x & 1), x, x + 1));  // a lock word's CAS
    TIMED(12, x = atom_cas_acquire(word + 4 + (x & 1), x, x + 1));
    TIMED(13, x = atom_cas_relaxed(word + 4 + (x & 1), x, x + 1); fence_acqrel());
#undef TIMED
    out[31] = x;
}

// Hand-off between block 0 (ping) and block 1 (pong), one thread each, `rounds` round
// trips through two words. mode 0: release store / acquire poll; 1: relaxed store /
// relaxed poll (lower bound: no fences); 2: relaxed store + fence / relaxed poll + fence
// on success; 3: atomic exchange publish / acquire poll.
__global__ void handoff(uint32_t* a, uint32_t* b, int rounds, int mode, uint64_t* out) {
    if (threadIdx.x != 0) return;
    uint32_t* mine = blockIdx.x == 0 ? a : b;
    uint32_t* theirs = blockIdx.x == 0 ? b : a;
    const uint64_t t0 = gtimer();
    for (int r = 1; r <= rounds; ++r) {
        if (blockIdx.x == 1) {
            if (mode == 1) while (ld_relaxed(theirs) != (uint32_t)r) {}
            else if (mode == 2) { while (ld_relaxed(theirs) != (uint32_t)r) {} fence_acqrel(); }
            else while (ld_acquire(theirs) != (uint32_t)r) {}
        }
        if (mode == 0) st_release(mine, r);
        else if (mode == 1) st_relaxed(mine, r);
        else if (mode == 2) { fence_acqrel(); st_relaxed(mine, r); }
        else atomicExch(mine, r);
        if (blockIdx.x == 0) {
            if (mode == 1) while (ld_relaxed(theirs) != (uint32_t)r) {}
            else if (mode == 2) { while (ld_relaxed(theirs) != (uint32_t)r) {} fence_acqrel(); }
            else while (ld_acquire(theirs) != (uint32_t)r) {}
        }
    }
    if (blockIdx.x == 0) out[0] = (gtimer() - t0) / rounds;
}

// One warp copies the 4 KiB block at `s` to `d` (16 B per lane per step, 8 steps, all loads
// in flight together), then fences: a 4 KiB read's data movement in a controller.
__device__ __forceinline__ void copy4k_fenced(const uint4* s, uint4* d, int lane) {
    uint4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = s[k * 32 + lane];
#pragma unroll
    for (int k = 0; k < 8; ++k) d[k * 32 + lane] = v[k];
    __syncwarp();
    fence_acqrel();
}

// One warp copies `n` cold 4 KiB blocks (16 B per lane per step, 8 steps) from src to
// dst, each followed by a release fence: a 4 KiB read's data movement in the simulated
// controller, plus the fence before its completion entry.
__global__ void copy4k(const uint4* src, uint4* dst, int n, uint64_t* out) {
    const int lane = threadIdx.x;
    const uint64_t t0 = gtimer();
    for (int i = 0; i < n; ++i) {
        const uint4* s = src + (size_t)i * 4096 * 37 % (64u << 20) / 16;  // spread, cold
        copy4k_fenced(s, dst + (size_t)i * 256, lane);
    }
    if (lane == 0) out[0] = (gtimer() - t0) / n;
}

// The floor of a miss, measured: block 0 is the requester (one thread), block 1 a
// stand-in for the simulated controller (one warp, on another SM), with nothing of the
// real protocol but what any design needs. Per round the requester writes a 64 B
// command, fences and stores a doorbell; the controller polls the doorbell (acquire),
// reads the command, copies a cold 4 KiB block to the destination the command names,
// fences and stores a completion word; the requester polls it (acquire) and reads one
// element of the data. mode 1 adds the least a cache needs around that: the pin
// (acquire fetch_add), the claim of a slot (CAS), the publish (relaxed fetch_add after
// the completion's acquire) and the unpin (release fetch_sub). mode 2 adds the least a
// queue shared by many threads needs: a ticket (fetch_add), the tail's CAS before the
// doorbell, the completion lock's CAS + fence and its unlock. Modes 3-5 are mode 0 with
// the destination anywhere in 256 MiB (as a cache's slots are: cold translations): 4 adds
// the controller's CID claim (an atomic whose answer the data waits for), 5 also starts
// the source into L2 (bulk prefetch) and warms the destination's translation before
// that atomic. Modes 6 and 7 are mode 4 with 15 more warps in the controller's block that
// poll words of their own with acquire loads, as the simulated controller's other warps
// poll their doorbells (6: 64 ns sleeps between polls, 7: none). out[r] = ns of round r.
struct fake_sqe {
    uint4 w[4];
};

// The medium block a floor kernel's round `r` reads (a spread over 256 MiB of media), and
// the 4 KiB destination it reads into, anywhere in 256 MiB (as a cache's slots are).
__device__ __forceinline__ uint32_t round_block(int r) { return (uint32_t)(((uint64_t)r * 2654435761u) % 65536u); }
__device__ __forceinline__ uint4* round_dst(uint4* dst, int r) {
    return dst + (size_t)(((uint64_t)r * 40503u) % 65536u) * 256;
}

// The stand-in controller's side of a command (one warp): waits for doorbell value `r`
// (acquire, lane 0), then lane k reads dword k of the command (16 dwords): the source
// block from dword 10 and the destination from dwords 6-7, as an NVMe read's SLBA/PRP1.
__device__ __forceinline__ void take_command(const fake_sqe* sq, const uint32_t* db, int r, int lane, uint32_t& blk,
                                             uint64_t& d) {
    if (lane == 0)
        while (ld_acquire(db) != (uint32_t)r) {}
    __syncwarp();
    const uint32_t* c = reinterpret_cast<const uint32_t*>(sq + (r & 63));
    const uint32_t dw = lane < 16 ? ld_relaxed(c + lane) : 0u;
    blk = __shfl_sync(0xffffffffu, dw, 10);
    d = (uint64_t)__shfl_sync(0xffffffffu, dw, 6) | ((uint64_t)__shfl_sync(0xffffffffu, dw, 7) << 32);
}

// The submitter's side (one thread): the 64 B command of round `r` (read block `blk` into
// `d`, command id `t`) into its SQ slot; the caller fences and rings.
__device__ __forceinline__ void put_command(fake_sqe* sq, int r, const uint4* d, uint32_t blk, uint32_t t) {
    fake_sqe e;
    e.w[0] = make_uint4(2u, 1u, 0u, 0u);
    e.w[1] = make_uint4(0u, 0u, (uint32_t)(uint64_t)d, (uint32_t)((uint64_t)d >> 32));
    e.w[2] = make_uint4(0u, 0u, blk, 0u);
    e.w[3] = make_uint4(7u, 0u, 0u, t);
    fake_sqe* slot = sq + (r & 63);
#pragma unroll
    for (int k = 0; k < 4; ++k) slot->w[k] = e.w[k];
}
__global__ void miss_floor(fake_sqe* sq, uint32_t* db, uint32_t* cq, const uint4* media, uint4* dst,
                           uint32_t* words, int rounds, int mode, uint64_t* out) {
    const int lane = threadIdx.x;
    if (blockIdx.x == 1 && threadIdx.x >= 32) {
        // Modes 6 and 7: the controller's neighbours, 15 warps of its block polling their
        // own words (with acquire, as the simulated controller's warps poll their
        // doorbells) until the requester is done; 6 sleeps 64 ns between polls.
        uint32_t* mine = words + 256 + (threadIdx.x / 32) * 32;
        while (ld_relaxed(words + 200) == 0) {
            for (int k = 0; k < 64; ++k) {
                if (ld_acquire(mine) == 1u) words[201] = 1;
                if (mode == 6) __nanosleep(64);
            }
        }
        return;
    }
    if (blockIdx.x == 1) {  // controller
        for (int r = 1; r <= rounds; ++r) {
            uint32_t blk;
            uint64_t d;
            take_command(sq, db, r, lane, blk, d);
            const uint4* s = media + (size_t)blk * 256;
            uint4* o = reinterpret_cast<uint4*>(d);
            if (mode == 5 && lane == 0) {  // start the data into L2, warm both translations
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], 4096;" ::"l"(s) : "memory");
                asm volatile("prefetch.global.L2 [%0];" ::"l"(o) : "memory");
            }
            if (mode >= 4) {  // a CID claim: the data may move only after its answer
                uint32_t old = 0;
                if (lane == 0) old = atomicAdd(words + 224 + (blk & 7), 1u);  // never all ones here
                if (__shfl_sync(0xffffffffu, old, 0) == 0xffffffffu) continue;
            }
            copy4k_fenced(s, o, lane);
            if (lane == 0) st_relaxed(cq + 3, (uint32_t)r);
        }
        return;
    }
    if (lane != 0) return;
    uint32_t* line = words;        // the line word
    uint32_t* tag = words + 32;    // the slot's tag
    uint32_t* ticket = words + 64; // the queue's ticket
    uint32_t* tail = words + 96;   // the queue's tail word
    uint32_t* lock = words + 128;  // the completion lock
    uint32_t sink = 0;
    for (int r = 1; r <= rounds; ++r) {
        const uint32_t blk = round_block(r);
        // modes 3-5: the destination anywhere in 256 MiB (a cache's slots), else 1 MiB.
        uint4* d = mode >= 3 ? round_dst(dst, r) : dst + (size_t)(r & 255) * 256;
        const uint64_t t0 = gtimer();
        uint32_t t = (uint32_t)r;
        if (mode == 1 || mode == 2) {
            const uint32_t st = atom_add_acquire(line, 1u);  // pin: finds the line invalid
            sink += atom_cas_acquire(tag, st >> 31, 0u);     // claim a slot (after the pin's answer)
        }
        if (mode == 2) t = atom_add_relaxed(ticket, 1u) + 1u;  // ticket
        put_command(sq, r, d, blk, t);
        fence_acqrel();
        if (mode == 2) sink += atom_cas_acquire(tail, t - 1u, t);  // announce (the lone case)
        st_relaxed(db, (uint32_t)r);
        while (ld_acquire(cq + 3) != (uint32_t)r) {}
        if (mode == 2) {
            sink += atom_cas_relaxed(lock, 0u, 1u);  // the completion lock
            fence_acqrel();
            st_relaxed(lock, 0u);
        }
        if (mode == 1 || mode == 2) atomicAdd(line, 0u);  // publish (result unused: a RED)
        const uint32_t x = ld_relaxed(reinterpret_cast<const uint32_t*>(d) + 5);
        if (mode == 1 || mode == 2) {
            fence_acqrel();  // the unpin's release
            atomicSub(line, 1u);
        }
        st_relaxed(words + 160, x);  // waits for the element
        out[r - 1] = gtimer() - t0;
    }
    words[192] = sink;
    st_relaxed(words + 200, 1u);  // the neighbours stop
}

// The floor of a miss *through a fill service*, the cache's design since eec6b26: three
// parties on three SMs, block 0 the requester (one thread), block 1 a stand-in for a
// fill-service warp, block 2 the stand-in controller of miss_floor. Per round the
// requester posts its request into a ring entry (release store) and polls the line word
// (acquire); the service warp polls the entry (acquire; sleeping `sleep_ns` between
// polls when > 0, as the real service's idle poll does), writes the command, fences,
// stores the doorbell, polls the completion (acquire), publishes the line (a relaxed RMW
// after a fence: a release) and the requester reads one element. mode 0: nothing else.
// mode 1: the least a cache needs (the requester's pin and BUSY claim, both RMWs whose
// answers it waits for, and its unpin; the service's slot CAS). mode 2: mode 1 plus the
// least a shared ring and shared queues need (the requester's ring ticket, the service's
// head CAS; the queue's ticket, tail CAS, and the completion lock's CAS, fence and unlock).
// out[r] = ns of round r, from the requester's first step to its element.
__global__ void service_floor(fake_sqe* sq, uint32_t* db, uint32_t* cq, const uint4* media, uint4* dst,
                              uint32_t* words, int rounds, int mode, int sleep_ns, uint64_t* out) {
    const int lane = threadIdx.x;
    uint32_t* line = words;          // the line word (requester <-> service)
    uint32_t* entry = words + 32;    // the ring entry
    uint32_t* ring_tail = words + 64;
    uint32_t* ring_head = words + 96;
    uint32_t* tag = words + 128;     // the slot's tag
    uint32_t* ticket = words + 160;  // the queue's ticket
    uint32_t* tail = words + 192;    // the queue's tail word
    uint32_t* lock = words + 224;    // the completion lock
    if (blockIdx.x == 2) {  // controller, as in miss_floor's mode 0
        for (int r = 1; r <= rounds; ++r) {
            uint32_t blk;
            uint64_t d;
            take_command(sq, db, r, lane, blk, d);
            copy4k_fenced(media + (size_t)blk * 256, reinterpret_cast<uint4*>(d), lane);
            if (lane == 0) st_relaxed(cq + 3, (uint32_t)r);
        }
        return;
    }
    if (blockIdx.x == 1) {  // the service warp; lane 0 does the work, as for a lone miss
        if (lane != 0) return;
        uint32_t sink = 0;
        for (int r = 1; r <= rounds; ++r) {
            while (ld_acquire(entry) != (uint32_t)r) {
                if (sleep_ns > 0) __nanosleep(sleep_ns);
            }
            if (mode == 2) sink += atom_cas_relaxed(ring_head, (uint32_t)r - 1u, (uint32_t)r);  // take it
            if (mode >= 1) sink += atom_cas_acquire(tag, 0u, 0u);  // the slot's CAS
            const uint32_t blk = round_block(r);
            uint4* d = round_dst(dst, r);
            uint32_t t = (uint32_t)r;
            if (mode == 2) t = atom_add_relaxed(ticket, 1u) + 1u;
            put_command(sq, r, d, blk, t);
            fence_acqrel();
            if (mode == 2) sink += atom_cas_acquire(tail, t - 1u, t);
            st_relaxed(db, (uint32_t)r);
            while (ld_acquire(cq + 3) != (uint32_t)r) {}
            if (mode == 2) {
                sink += atom_cas_relaxed(lock, 0u, 1u);
                fence_acqrel();
                st_relaxed(lock, 0u);
            } else {
                fence_acqrel();  // the publish below is a release of the data
            }
            // Publish: the line word's low 16 bits carry the round (the requester's pins
            // are in the high half in modes 1 and 2).
            atom_add_relaxed(line, 1u);
        }
        words[250] = sink;
        return;
    }
    if (lane != 0) return;  // the requester
    uint32_t sink = 0;
    for (int r = 1; r <= rounds; ++r) {
        uint4* d = round_dst(dst, r);
        const uint64_t t0 = gtimer();
        if (mode >= 1) {
            const uint32_t st = atom_add_acquire(line, 1u << 16);  // pin: finds the line invalid
            sink += atomicOr(line + 1, st & 1u);                  // claim the fill (BUSY)
        }
        if (mode == 2) sink += atom_add_relaxed(ring_tail, 1u);   // the ring's ticket
        st_release(entry, (uint32_t)r);                            // post
        while ((ld_acquire(line) & 0xffffu) != ((uint32_t)r & 0xffffu)) {}
        const uint32_t x = ld_relaxed(reinterpret_cast<const uint32_t*>(d) + 5);
        if (mode >= 1) {
            fence_acqrel();  // the unpin's release
            atomicSub(line, 1u << 16);
        }
        st_relaxed(words + 248, x);  // waits for the element
        out[r - 1] = gtimer() - t0;
    }
    words[249] = sink;
}

// The buffers of the floor kernels (miss_floor, service_floor), and one timed launch:
// the control words zeroed, the kernel run, its per-round times sorted and printed.
struct floor_buffers {
    fake_sqe* sq;
    uint32_t *db, *cq, *words;
    uint4 *media, *dst;
    uint64_t* lat;
    cudaError_t alloc(int rounds) {
        cudaError_t e = cudaMalloc(&sq, 64 * sizeof(fake_sqe));
        if (e == cudaSuccess) e = cudaMalloc(&db, 256);
        if (e == cudaSuccess) e = cudaMalloc(&cq, 256);
        if (e == cudaSuccess) e = cudaMalloc(&words, 4096);
        if (e == cudaSuccess) e = cudaMalloc(&media, 256u << 20);
        if (e == cudaSuccess) e = cudaMalloc(&dst, 256u << 20);
        if (e == cudaSuccess) e = cudaMalloc(&lat, rounds * 8);
        if (e == cudaSuccess) e = cudaMemset(media, 3, 256u << 20);
        return e;
    }
    template <typename L>
    cudaError_t run(int rounds, const char* what, L launch) {
        std::vector<uint64_t> hl(rounds);
        cudaError_t e = cudaMemset(db, 0, 256);
        if (e == cudaSuccess) e = cudaMemset(cq, 0, 256);
        if (e == cudaSuccess) e = cudaMemset(words, 0, 4096);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e != cudaSuccess) return e;
        launch();
        e = cudaDeviceSynchronize();
        if (e == cudaSuccess) e = cudaMemcpy(hl.data(), lat, rounds * 8, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) return e;
        std::sort(hl.begin(), hl.end());
        printf("%s p50 %6llu ns  min %6llu ns  p99 %6llu ns\n", what, (unsigned long long)hl[rounds / 2],
               (unsigned long long)hl[0], (unsigned long long)hl[rounds * 99 / 100]);
        return cudaSuccess;
    }
};

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int clk = 0;
    CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
    printf("# latency-probe on %s, %d SMs, max SM clock %d MHz\n", prop.name, prop.multiProcessorCount, clk / 1000);
    uint64_t *out, *out_d;
    CK(cudaHostAlloc(&out, 64 * 8, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&out_d, out, 0));
    // Ring of 512 words 128 B apart (64 KiB: fits L2, not one L1 line set), a random cycle.
    const int n = 512, stride = 32;
    static uint32_t h[n * stride];
    uint32_t perm[n];
    for (int i = 0; i < n; ++i) perm[i] = i;
    uint64_t s = 88172645463325252ull;
    for (int i = n - 1; i > 0; --i) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const int j = s % (i + 1);
        const uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (int i = 0; i < n; ++i) h[perm[i] * stride] = perm[(i + 1) % n] * stride;
    uint32_t *ring, *word;
    CK(cudaMalloc(&ring, sizeof h));
    CK(cudaMalloc(&word, 4096));
    CK(cudaMemcpy(ring, h, sizeof h, cudaMemcpyHostToDevice));
    CK(cudaMemset(word, 0, 4096));
    CK(cudaDeviceSynchronize());
    const char* names[] = {"ld (L1 allowed)", "ld.relaxed.gpu (L2)", "ld.acquire.gpu", "atom.add.relaxed.gpu",
                           "atom.add.acq_rel.gpu", "st.relaxed + fence.acq_rel.gpu", "st.release.gpu (back to back)",
                           "st.relaxed.gpu (no wait)", "st.relaxed + fence.sc.gpu", "fence.acq_rel.gpu alone",
                           "read globaltimer", "atom.cas.relaxed.gpu", "atom.cas.acquire.gpu",
                           "atom.cas.relaxed + fence.acq_rel"};
    for (int rep = 0; rep < 2; ++rep) {
        chains<<<1, 1>>>(ring, word, out_d);
        CK(cudaDeviceSynchronize());
        if (rep == 0) continue;  // first launch: module load, cold TLB
        for (int i = 0; i < 14; ++i)
            printf("%-34s %7.1f ns  %7.1f cycles  (%.0f MHz)\n", names[i], (double)out[2 * i] / CHAIN,
                   (double)out[2 * i + 1] / CHAIN, (double)out[2 * i + 1] / (double)out[2 * i] * 1e3);
    }
    uint32_t *a, *b;
    CK(cudaMalloc(&a, 4096));
    CK(cudaMalloc(&b, 4096));
    const char* modes[] = {"st.release / ld.acquire poll", "st.relaxed / ld.relaxed poll (no fence)",
                           "fence+st.relaxed / ld.relaxed poll+fence", "atomicExch / ld.acquire poll"};
    for (int m = 0; m < 4; ++m) {
        CK(cudaMemset(a, 0, 4096));
        CK(cudaMemset(b, 0, 4096));
        CK(cudaDeviceSynchronize());
        // Blocks large enough to land on two different SMs.
        const int smem = 200 * 1024;
        CK(cudaFuncSetAttribute(handoff, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        handoff<<<2, 32, smem>>>(a, b, 20000, m, out_d);
        CK(cudaDeviceSynchronize());
        printf("SM-to-SM round trip, %-42s %6llu ns\n", modes[m], (unsigned long long)out[0]);
    }
    uint4 *src, *dst;
    CK(cudaMalloc(&src, 64u << 20));
    CK(cudaMalloc(&dst, 4u << 20));
    CK(cudaMemset(src, 1, 64u << 20));
    CK(cudaDeviceSynchronize());
    copy4k<<<1, 32>>>(src, dst, 1000, out_d);
    CK(cudaDeviceSynchronize());
    printf("one warp: copy a cold 4 KiB block + fence             %6llu ns\n", (unsigned long long)out[0]);
    // The floor of a one-lane miss, direct (miss_floor above) and through a stand-in fill
    // service (service_floor): p50, min and p99 over 2000 rounds, two launches each.
    {
        const int rounds = 2000;
        floor_buffers f;
        CK(f.alloc(rounds));
        const int smem = 200 * 1024;
        CK(cudaFuncSetAttribute(miss_floor, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(service_floor, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const char* fm[] = {"command + 4 KiB copy + completion only", "+ the least a cache needs",
                            "+ the least a shared queue needs", "I/O only, destination in 256 MiB",
                            "... + the controller's CID atomic", "... + prefetch before that atomic",
                            "mode 4 + 15 warps polling beside it", "mode 4 + 15 warps polling, no sleep"};
        for (int m = 0; m < 8; ++m)
            for (int rep = 0; rep < 2; ++rep) {
                char what[96];
                snprintf(what, sizeof what, "miss floor %d, one lane, %-40s", m, fm[m]);
                CK(f.run(rounds, what, [&] {
                    miss_floor<<<2, m >= 6 ? 512 : 32, smem>>>(f.sq, f.db, f.cq, f.media, f.dst, f.words, rounds,
                                                                m, f.lat);
                }));
            }
        const char* sm[] = {"service hop + command + copy + completion", "+ the least a cache needs",
                            "+ the least a shared ring and queue need"};
        for (int sleep_ns : {0, 32})
            for (int m = 0; m < 3; ++m)
                for (int rep = 0; rep < 2; ++rep) {
                    char what[112];
                    snprintf(what, sizeof what, "service floor %d, poll sleep %2d ns, %-42s", m, sleep_ns, sm[m]);
                    CK(f.run(rounds, what, [&] {
                        service_floor<<<3, 32, smem>>>(f.sq, f.db, f.cq, f.media, f.dst, f.words, rounds, m,
                                                       sleep_ns, f.lat);
                    }));
                }
    }
    return 0;
}
