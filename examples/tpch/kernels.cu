// TPC-H Q1 and Q6 over lineitem stored column by column (compact encoding, see
// src/lib.rs: dates i32 days since 1970, prices i32 cents, quantity/discount/tax u8,
// flags u8 ASCII).
//
//   q1_scan, q6_scan   the columns on the (simulated) SSDs, read row range by row range
//                      by bam::scan_reader (one span per column, chunk k of every column
//                      holds the same rows)
//   q1_hbm, q6_hbm     the same row loops over the columns resident in GPU memory
//   zc_read            the raw zero-copy read of the columns from pinned host memory
//
// Every thread sums in registers (exact integers), the warp reduces, and each block
// writes its partial sums to its own row of `out`; the host adds the blocks in 128-bit
// arithmetic (a whole-table sum of extended price x (1 - discount) x (1 + tax) in
// cents x 10^-4 overflows 64 bits near scale factor 100).
#include <bam/scan.cuh>

#include <stdint.h>

#include "../support/zero_copy.cuh"

namespace {

/// Q1 groups: returnflag A, N, R x linestatus F, O.
constexpr int Q1_GROUPS = 6;
/// Per group: sum_qty, sum_base_price, sum_disc_price, sum_charge, sum_disc, count.
constexpr int Q1_FIELDS = 6;

struct q1_cols {
    const int32_t* shipdate;
    const uint8_t* quantity;
    const int32_t* price;
    const uint8_t* discount;
    const uint8_t* tax;
    const uint8_t* returnflag;
    const uint8_t* linestatus;
};

/// A thread's sums: the 64-bit ones (base price, discounted price, charge) and the
/// 32-bit ones (quantity, discount, count: a thread sees far fewer than 2^32 / 100 rows).
struct q1_acc {
    unsigned long long big[Q1_GROUPS][3];
    uint32_t small[Q1_GROUPS][3];
    __device__ q1_acc() {
#pragma unroll
        for (int g = 0; g < Q1_GROUPS; ++g)
#pragma unroll
            for (int f = 0; f < 3; ++f) big[g][f] = small[g][f] = 0;
    }
    /// Field f of group g in the order sum_qty, sum_base_price, sum_disc_price,
    /// sum_charge, sum_disc, count.
    __device__ __forceinline__ unsigned long long field(int g, int f) const {
        return f == 0 ? small[g][0] : f <= 3 ? big[g][f - 1] : small[g][f - 3];
    }
};

__device__ __forceinline__ int q1_group(uint8_t rf, uint8_t ls) {
    const int r = rf == 'A' ? 0 : rf == 'N' ? 1 : rf == 'R' ? 2 : -1;
    const int l = ls == 'F' ? 0 : ls == 'O' ? 1 : -1;
    return (r < 0 || l < 0) ? -1 : r * 2 + l;
}

/// Rows [i0, n) with stride `step` of one row range. Unknown flags are counted in
/// `bad` (the group table has no row for them).
__device__ __forceinline__ void q1_rows(const q1_cols& c, uint32_t i0, uint32_t n, uint32_t step, int32_t cutoff,
                                        q1_acc& a, uint32_t& bad) {
    for (uint32_t i = i0; i < n; i += step) {
        if (c.shipdate[i] > cutoff) continue;
        const int g = q1_group(c.returnflag[i], c.linestatus[i]);
        if (g < 0) {
            ++bad;
            continue;
        }
        const unsigned long long qty = c.quantity[i];
        const unsigned long long price = static_cast<uint32_t>(c.price[i]);
        const unsigned long long disc = c.discount[i];
        const unsigned long long dp = price * (100 - disc);
        const unsigned long long ch = dp * (100 + c.tax[i]);
        // Predicated adds into registers (a dynamic index would put `a` in local memory).
#pragma unroll
        for (int k = 0; k < Q1_GROUPS; ++k) {
            if (k == g) {
                a.small[k][0] += static_cast<uint32_t>(qty);
                a.big[k][0] += price;
                a.big[k][1] += dp;
                a.big[k][2] += ch;
                a.small[k][1] += static_cast<uint32_t>(disc);
                a.small[k][2] += 1;
            }
        }
    }
}

/// Warp-reduces `a` and adds it to the block's row of `out` (shared atomics are not
/// needed: one add per warp into global memory, the block's row is its own).
__device__ __forceinline__ void q1_flush(const q1_acc& a, unsigned long long* out, uint32_t bad,
                                         unsigned long long* nbad) {
    unsigned long long* row = out + static_cast<uint64_t>(blockIdx.x) * Q1_GROUPS * Q1_FIELDS;
#pragma unroll
    for (int g = 0; g < Q1_GROUPS; ++g)
#pragma unroll
        for (int f = 0; f < Q1_FIELDS; ++f) {
            unsigned long long x = a.field(g, f);
            for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
            if ((threadIdx.x & 31) == 0 && x != 0) atomicAdd(&row[g * Q1_FIELDS + f], x);
        }
    if (bad) atomicAdd(nbad, static_cast<unsigned long long>(bad));
}

struct q6_cols {
    const int32_t* shipdate;
    const uint8_t* quantity;
    const int32_t* price;
    const uint8_t* discount;
};

struct q6_params {
    int32_t date_lo;  // shipdate >= date_lo
    int32_t date_hi;  // shipdate < date_hi
    uint32_t disc_lo; // discount between disc_lo and disc_hi (hundredths)
    uint32_t disc_hi;
    uint32_t qty;     // quantity < qty
    uint32_t pad;
};

__device__ __forceinline__ unsigned long long q6_rows(const q6_cols& c, uint32_t i0, uint32_t n, uint32_t step,
                                                      const q6_params& p) {
    unsigned long long s = 0;
    for (uint32_t i = i0; i < n; i += step) {
        const int32_t d = c.shipdate[i];
        const uint32_t disc = c.discount[i];
        const bool keep = d >= p.date_lo && d < p.date_hi && disc >= p.disc_lo && disc <= p.disc_hi &&
                          c.quantity[i] < p.qty;
        if (keep) s += static_cast<unsigned long long>(static_cast<uint32_t>(c.price[i])) * disc;
    }
    return s;
}

__device__ __forceinline__ void q6_flush(unsigned long long s, unsigned long long* out) {
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0 && s != 0) atomicAdd(&out[blockIdx.x], s);
}

}  // namespace

/// Q1 over the scan of the 7 columns in the order of src/lib.rs's COLUMNS: shipdate,
/// quantity, extendedprice, discount, tax, returnflag, linestatus.
extern "C" __global__ void __launch_bounds__(512) q1_scan(const __grid_constant__ bam_scan_view v, int32_t cutoff, unsigned long long* out,
                                   unsigned long long* nbad, unsigned long long* failed) {
    bam::scan_reader r(v);
    q1_acc a;
    uint32_t bad = 0;
    while (r.next()) {
        const q1_cols c{reinterpret_cast<const int32_t*>(r.data(0)), reinterpret_cast<const uint8_t*>(r.data(1)),
                        reinterpret_cast<const int32_t*>(r.data(2)), reinterpret_cast<const uint8_t*>(r.data(3)),
                        reinterpret_cast<const uint8_t*>(r.data(4)), reinterpret_cast<const uint8_t*>(r.data(5)),
                        reinterpret_cast<const uint8_t*>(r.data(6))};
        q1_rows(c, threadIdx.x, r.bytes(1), blockDim.x, cutoff, a, bad);
    }
    q1_flush(a, out, bad, nbad);
    if (threadIdx.x == 0 && r.status() != bam::OK) atomicAdd(failed, 1ull);
}

/// Q1 over the columns in GPU memory, rows cut into the same ranges as the scan's chunks.
extern "C" __global__ void __launch_bounds__(512) q1_hbm(q1_cols c, uint64_t rows, uint32_t chunk_rows, int32_t cutoff,
                                  unsigned long long* out, unsigned long long* nbad) {
    q1_acc a;
    uint32_t bad = 0;
    for (uint64_t base = static_cast<uint64_t>(blockIdx.x) * chunk_rows; base < rows;
         base += static_cast<uint64_t>(gridDim.x) * chunk_rows) {
        const uint32_t n = rows - base < chunk_rows ? static_cast<uint32_t>(rows - base) : chunk_rows;
        const q1_cols cc{c.shipdate + base, c.quantity + base, c.price + base, c.discount + base,
                         c.tax + base, c.returnflag + base, c.linestatus + base};
        q1_rows(cc, threadIdx.x, n, blockDim.x, cutoff, a, bad);
    }
    q1_flush(a, out, bad, nbad);
}

/// Q6 over the scan of 4 columns: shipdate, quantity, extendedprice, discount.
extern "C" __global__ void __launch_bounds__(512) q6_scan(const __grid_constant__ bam_scan_view v, q6_params p, unsigned long long* out,
                                   unsigned long long* failed) {
    bam::scan_reader r(v);
    unsigned long long s = 0;
    while (r.next()) {
        const q6_cols c{reinterpret_cast<const int32_t*>(r.data(0)), reinterpret_cast<const uint8_t*>(r.data(1)),
                        reinterpret_cast<const int32_t*>(r.data(2)), reinterpret_cast<const uint8_t*>(r.data(3))};
        s += q6_rows(c, threadIdx.x, r.bytes(1), blockDim.x, p);
    }
    q6_flush(s, out);
    if (threadIdx.x == 0 && r.status() != bam::OK) atomicAdd(failed, 1ull);
}

extern "C" __global__ void __launch_bounds__(512) q6_hbm(q6_cols c, uint64_t rows, uint32_t chunk_rows, q6_params p,
                                  unsigned long long* out) {
    unsigned long long s = 0;
    for (uint64_t base = static_cast<uint64_t>(blockIdx.x) * chunk_rows; base < rows;
         base += static_cast<uint64_t>(gridDim.x) * chunk_rows) {
        const uint32_t n = rows - base < chunk_rows ? static_cast<uint32_t>(rows - base) : chunk_rows;
        const q6_cols cc{c.shipdate + base, c.quantity + base, c.price + base, c.discount + base};
        s += q6_rows(cc, threadIdx.x, n, blockDim.x, p);
    }
    q6_flush(s, out);
}
