// The One Billion Row Challenge on the GPU: parse `name;value\n` rows and aggregate
// min/sum/count/max per station in a hash table in GPU memory.
//
//   brc_scan   the file on the (simulated) SSDs, read chunk by chunk by bam::scan_reader
//   brc_hbm    the same parser over the file resident in GPU memory (the baseline)
//   zc_read    every byte of the file read from pinned host memory (the PCIe limit of
//              any reader of host-resident data)
//
// Which rows a chunk parses: chunk data [0, n) is followed by a halo [n, n + h) of the
// next bytes. A row belongs to the chunk that holds the newline *before* it, so a row
// that starts at the first byte of a chunk was parsed by the previous chunk (from its
// halo); the file's first row belongs to chunk 0. Each thread of the block searches its
// own slice of [0, n) for newlines and parses the rows that follow them.
#include <bam/scan.cuh>

#include "../support/zero_copy.cuh"

#include <stdint.h>

namespace {

constexpr uint32_t TABLE_SLOTS = 16384;  // >= 1.6x the 10,000 stations the rules allow
constexpr uint32_t NAME_STRIDE = 104;    // names are at most 100 bytes
constexpr uint32_t MAX_NAME = 100;

/// The table: one buffer, arrays of TABLE_SLOTS entries (layout mirrored in main.rs).
struct table {
    unsigned long long* keys;  // hash | 1, 0 = empty
    unsigned long long* sum;   // tenths, two's complement
    unsigned long long* count;
    int* mn;
    int* mx;
    unsigned* len;
    unsigned* ready;  // 1 once the name is written
    char* names;

    __device__ explicit table(char* base)
        : keys(reinterpret_cast<unsigned long long*>(base)),
          sum(reinterpret_cast<unsigned long long*>(base + 8ull * TABLE_SLOTS)),
          count(reinterpret_cast<unsigned long long*>(base + 16ull * TABLE_SLOTS)),
          mn(reinterpret_cast<int*>(base + 24ull * TABLE_SLOTS)),
          mx(reinterpret_cast<int*>(base + 28ull * TABLE_SLOTS)),
          len(reinterpret_cast<unsigned*>(base + 32ull * TABLE_SLOTS)),
          ready(reinterpret_cast<unsigned*>(base + 36ull * TABLE_SLOTS)),
          names(base + 40ull * TABLE_SLOTS) {}
};

/// Bytes of a buffer read 8 at a time (the buffer is 8-byte aligned and readable up to
/// the next multiple of 8 past its end).
struct byte_reader {
    const uint64_t* words;
    uint64_t cached = ~0ull;
    uint64_t word = 0;
    __device__ explicit byte_reader(const char* p) : words(reinterpret_cast<const uint64_t*>(p)) {}
    __device__ __forceinline__ uint32_t at(uint64_t i) {
        const uint64_t w = i >> 3;
        if (w != cached) {
            word = words[w];
            cached = w;
        }
        return static_cast<uint32_t>(word >> ((i & 7) * 8)) & 0xffu;
    }
};

/// The table slot of a name (inserting it), or -1 when the table is full. Names are
/// compared in full; the name bytes are published with a release (ready = 1) that a
/// reader of another block acquires before comparing. The wait for a name being written
/// is bounded.
__device__ int lookup(table& t, byte_reader& r, uint64_t start, uint32_t n, uint64_t h) {
    const unsigned long long key = h | 1ull;
    uint32_t i = static_cast<uint32_t>(h >> 20) & (TABLE_SLOTS - 1);
    for (uint32_t probe = 0; probe < TABLE_SLOTS; ++probe, i = (i + 1) & (TABLE_SLOTS - 1)) {
        unsigned long long k = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(t.keys[i])
                                   .load(cuda::memory_order_relaxed);
        if (k == 0) {
            k = atomicCAS(&t.keys[i], 0ull, key);
            if (k == 0) {
                for (uint32_t j = 0; j < n; ++j) t.names[i * NAME_STRIDE + j] = static_cast<char>(r.at(start + j));
                t.len[i] = n;
                cuda::atomic_ref<unsigned, cuda::thread_scope_device>(t.ready[i]).store(1u, cuda::memory_order_release);
                return static_cast<int>(i);
            }
        }
        if (k != key) continue;
        cuda::atomic_ref<unsigned, cuda::thread_scope_device> ready(t.ready[i]);
        for (uint32_t spin = 0; ready.load(cuda::memory_order_acquire) == 0; ++spin) {
            if (spin > (1u << 24)) return -1;  // the writer is a running thread: never expected
            __nanosleep(64);
        }
        if (t.len[i] != n) continue;
        bool same = true;
        for (uint32_t j = 0; j < n && same; ++j) same = static_cast<uint8_t>(t.names[i * NAME_STRIDE + j]) == r.at(start + j);
        if (same) return static_cast<int>(i);
    }
    return -1;
}

/// The block's own table in shared memory: rows are aggregated here (shared atomics)
/// and added to the global table once, at the end of the kernel. A name is found here by
/// its 64-bit hash; the first thread of the block to see a name looks it up in the global
/// table (full name compare) and notes its slot. Two names with the same hash would be
/// merged here: the global table then holds both with the same key, which the host
/// reports as an error (main.rs), never as a result.
constexpr uint32_t LOCAL_SLOTS = 1024;

struct local_table {
    unsigned long long key[LOCAL_SLOTS];
    unsigned long long sum[LOCAL_SLOTS];
    int mn[LOCAL_SLOTS];
    int mx[LOCAL_SLOTS];
    unsigned count[LOCAL_SLOTS];
    unsigned global[LOCAL_SLOTS];  // slot in the global table, ~0u: lookup failed
};

__device__ void local_init(local_table& l) {
    for (uint32_t i = threadIdx.x; i < LOCAL_SLOTS; i += blockDim.x) {
        l.key[i] = 0;
        l.sum[i] = 0;
        l.mn[i] = 0x7fffffff;
        l.mx[i] = -0x7fffffff - 1;
        l.count[i] = 0;
        l.global[i] = ~0u;
    }
    __syncthreads();
}

/// Adds the block's aggregates to the global table (every thread; after the last row).
__device__ void local_flush(local_table& l, table& t, unsigned long long* bad) {
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < LOCAL_SLOTS; i += blockDim.x) {
        if (l.count[i] == 0) continue;
        const unsigned g = l.global[i];
        if (g == ~0u) {
            atomicAdd(bad, static_cast<unsigned long long>(l.count[i]));
            continue;
        }
        atomicMin(&t.mn[g], l.mn[i]);
        atomicMax(&t.mx[g], l.mx[i]);
        atomicAdd(&t.sum[g], l.sum[i]);
        atomicAdd(&t.count[g], static_cast<unsigned long long>(l.count[i]));
    }
}

/// Adds value `v` of the name [s, s + n) with hash `h`: to the block's table, or (when
/// it is full) straight to the global one. False if the global table is full.
__device__ bool add_row(local_table& l, table& t, byte_reader& r, uint64_t s, uint32_t n, uint64_t h, int v) {
    const unsigned long long key = h | 1ull;
    uint32_t i = static_cast<uint32_t>(h) & (LOCAL_SLOTS - 1);
    for (uint32_t probe = 0; probe < LOCAL_SLOTS; ++probe, i = (i + 1) & (LOCAL_SLOTS - 1)) {
        unsigned long long k = l.key[i];
        if (k == 0) {
            k = atomicCAS(&l.key[i], 0ull, key);
            if (k == 0) {
                const int g = lookup(t, r, s, n, h);
                l.global[i] = g < 0 ? ~0u : static_cast<unsigned>(g);
                k = key;
            }
        }
        if (k == key) {
            atomicMin(&l.mn[i], v);
            atomicMax(&l.mx[i], v);
            atomicAdd(&l.sum[i], static_cast<unsigned long long>(static_cast<long long>(v)));
            atomicAdd(&l.count[i], 1u);
            return true;
        }
    }
    const int g = lookup(t, r, s, n, h);
    if (g < 0) return false;
    atomicMin(&t.mn[g], v);
    atomicMax(&t.mx[g], v);
    atomicAdd(&t.sum[g], static_cast<unsigned long long>(static_cast<long long>(v)));
    atomicAdd(&t.count[g], 1ull);
    return true;
}

/// Parses the row that starts at `s` (it must end with a newline before `end`) and adds
/// it. Returns the position after its newline, and sets `ok` false for a malformed row
/// (then the position after the next newline, or `end`).
__device__ uint64_t parse_row(local_table& l, table& t, byte_reader& r, uint64_t s, uint64_t end, bool& ok) {
    uint64_t p = s;
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    uint32_t c = 0;
    ok = false;
    while (p < end && (c = r.at(p)) != ';' && c != '\n') {
        h = (h ^ c) * 0x100000001b3ull;
        ++p;
    }
    const uint32_t n = static_cast<uint32_t>(p - s);
    if (p < end && c == ';' && n > 0 && n <= MAX_NAME) {
        ++p;
        const bool neg = p < end && r.at(p) == '-';
        p += neg;
        int v = 0;
        uint32_t digits = 0, frac = 0;
        bool dot = false, good = true;
        while (p < end && (c = r.at(p)) != '\n') {
            if (c == '.' && !dot) {
                dot = true;
            } else if (c >= '0' && c <= '9' && digits < 3) {
                v = v * 10 + static_cast<int>(c - '0');
                ++digits;
                frac += dot;
            } else {
                good = false;
            }
            ++p;
        }
        if (p < end && good && dot && frac == 1 && digits >= 2) ok = add_row(l, t, r, s, n, h, neg ? -v : v);
    }
    while (p < end && r.at(p) != '\n') ++p;  // a malformed row: skip to its end
    return p < end ? p + 1 : end;
}

/// The block's share of one chunk: data [0, n) then halo bytes [n, n + h). Thread i
/// takes the rows whose preceding newline lies in its slice [a, b) of [0, n), parsing
/// them one after the other; `first`: the chunk starts the file (its row at 0 has no
/// newline before it and is the first thread's).
__device__ void parse_chunk(local_table& l, table& t, const char* data, uint32_t n, uint32_t h, bool first,
                            unsigned long long* bad) {
    byte_reader r(data);
    const uint32_t nt = blockDim.x;
    const uint32_t seg = (n + nt - 1) / nt;
    const uint64_t a = static_cast<uint64_t>(threadIdx.x) * seg;
    const uint64_t b = a + seg < n ? a + seg : n;
    const uint64_t end = static_cast<uint64_t>(n) + h;
    uint32_t nbad = 0;
    uint64_t s;
    if (first && threadIdx.x == 0) {
        s = 0;
    } else {
        uint64_t q = a;
        while (q < b && r.at(q) != '\n') ++q;
        s = q + 1;  // the row after the first newline of the slice (none if q == b)
    }
    // Row s is ours while its preceding newline (s - 1) lies in [a, b).
    while (s <= b && s < end && a < b) {
        bool ok;
        s = parse_row(l, t, r, s, end, ok);
        nbad += !ok;
    }
    if (nbad) atomicAdd(bad, static_cast<unsigned long long>(nbad));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(512) brc_scan(const __grid_constant__ bam_scan_view v, char* table_mem,
                                    unsigned long long* bad, unsigned long long* failed) {
    __shared__ local_table l;
    table t(table_mem);
    local_init(l);
    bam::scan_reader r(v);
    while (r.next()) parse_chunk(l, t, r.data(0), r.bytes(0), r.halo(0), r.chunk() == 0, bad);
    local_flush(l, t, bad);
    if (threadIdx.x == 0 && r.status() != bam::OK) atomicAdd(failed, 1ull);
}

extern "C" __global__ void __launch_bounds__(512) brc_hbm(const char* data, uint64_t len, uint32_t chunk, uint32_t halo, char* table_mem,
                                   unsigned long long* bad) {
    __shared__ local_table l;
    table t(table_mem);
    local_init(l);
    const uint64_t chunks = (len + chunk - 1) / chunk;
    for (uint64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
        const uint64_t off = k * chunk;
        const uint32_t n = len - off < chunk ? static_cast<uint32_t>(len - off) : chunk;
        const uint64_t rest = len - off - n;
        const uint32_t h = rest < halo ? static_cast<uint32_t>(rest) : halo;
        parse_chunk(l, t, data + off, n, h, k == 0, bad);
    }
    local_flush(l, t, bad);
}
