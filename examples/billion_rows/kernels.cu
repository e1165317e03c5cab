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

/// Parses the row starting at `s` (it must end with a newline before `end`) and adds
/// it to the table. Returns false for a malformed row (counted by the caller).
__device__ bool parse_row(table& t, byte_reader& r, uint64_t s, uint64_t end) {
    uint64_t p = s;
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    uint32_t c;
    while (p < end && (c = r.at(p)) != ';') {
        if (c == '\n' || p - s >= MAX_NAME) return false;
        h = (h ^ c) * 0x100000001b3ull;
        ++p;
    }
    const uint32_t n = static_cast<uint32_t>(p - s);
    if (p >= end || n == 0) return false;
    ++p;
    bool neg = false;
    if (p < end && r.at(p) == '-') {
        neg = true;
        ++p;
    }
    int v = 0;
    uint32_t digits = 0, frac = 0;
    bool dot = false;
    while (p < end && (c = r.at(p)) != '\n') {
        if (c == '.' && !dot) {
            dot = true;
        } else if (c >= '0' && c <= '9' && digits < 3) {
            v = v * 10 + static_cast<int>(c - '0');
            ++digits;
            if (dot) ++frac;
        } else {
            return false;
        }
        ++p;
    }
    if (p >= end || !dot || frac != 1 || digits < 2) return false;
    if (neg) v = -v;
    const int i = lookup(t, r, s, n, h);
    if (i < 0) return false;
    atomicMin(&t.mn[i], v);
    atomicMax(&t.mx[i], v);
    atomicAdd(&t.sum[i], static_cast<unsigned long long>(static_cast<long long>(v)));
    atomicAdd(&t.count[i], 1ull);
    return true;
}

/// The block's share of one chunk: data [0, n) then halo bytes [n, n + h).
/// `first`: the chunk starts the file (its row at 0 has no newline before it).
__device__ void parse_chunk(table& t, const char* data, uint32_t n, uint32_t h, bool first,
                            unsigned long long* bad) {
    byte_reader r(data);
    const uint32_t nt = blockDim.x;
    const uint32_t seg = (n + nt - 1) / nt;
    const uint64_t a = static_cast<uint64_t>(threadIdx.x) * seg;
    const uint64_t b = a + seg < n ? a + seg : n;
    const uint64_t end = static_cast<uint64_t>(n) + h;
    uint32_t nbad = 0;
    if (first && threadIdx.x == 0 && n > 0) nbad += !parse_row(t, r, 0, end);
    for (uint64_t q = a; q < b; ++q) {
        if (r.at(q) != '\n') continue;
        if (q + 1 < end) nbad += !parse_row(t, r, q + 1, end);
    }
    if (nbad) atomicAdd(bad, static_cast<unsigned long long>(nbad));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(512) brc_scan(const __grid_constant__ bam_scan_view v, char* table_mem,
                                    unsigned long long* bad, unsigned long long* failed) {
    table t(table_mem);
    bam::scan_reader r(v);
    while (r.next()) parse_chunk(t, r.data(0), r.bytes(0), r.halo(0), r.chunk() == 0, bad);
    if (threadIdx.x == 0 && r.status() != bam::OK) atomicAdd(failed, 1ull);
}

extern "C" __global__ void __launch_bounds__(512) brc_hbm(const char* data, uint64_t len, uint32_t chunk, uint32_t halo, char* table_mem,
                                   unsigned long long* bad) {
    table t(table_mem);
    const uint64_t chunks = (len + chunk - 1) / chunk;
    for (uint64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
        const uint64_t off = k * chunk;
        const uint32_t n = len - off < chunk ? static_cast<uint32_t>(len - off) : chunk;
        const uint64_t rest = len - off - n;
        const uint32_t h = rest < halo ? static_cast<uint32_t>(rest) : halo;
        parse_chunk(t, data + off, n, h, k == 0, bad);
    }
}
