// scan.cu — the scan kernel the runtime needs (shipped in the crate's fatbin):
//   bam_scan_write   bytes staged in a scan's I/O buffer slots onto a span (Scan::write)
#include <bam/io.cuh>
#include <bam/scan.cuh>
#include <bam/util.cuh>

using namespace bam;

/// Writes `bytes` (a multiple of the LBA size) staged at the scan's first slot onward to
/// span `span` at byte `at`, which starts a stripe unit: thread t writes stripe unit t,
/// whose bytes fill slot first_slot + t (slots are stripe units). Failed units are counted
/// in `failed` and logged in the I/O view's error log.
extern "C" __global__ void bam_scan_write(const __grid_constant__ bam_scan_view v, uint32_t span, uint64_t at,
                                          uint64_t bytes, unsigned long long* failed) {
    const uint32_t sh = v.lba_shift;
    const uint64_t unit = static_cast<uint64_t>(v.io.stripe_lbas) << sh;
    const uint64_t t = gtid();
    if (span >= v.nspans || t >= (bytes + unit - 1) / unit) return;
    const uint64_t off = t * unit;
    const uint64_t len = bytes - off < unit ? bytes - off : unit;
    const uint64_t glba = ((v.spans[span].first_lba << sh) + at + off) >> sh;
    uint32_t ssd;
    uint64_t lba;
    stripe_map(v.io, glba, ssd, lba);
    void* buf = reinterpret_cast<void*>(v.io.buf.base + (v.first_slot + t) * v.io.buf.slot_bytes);
    if (rw_sync<true>(v.io, nvme::OP_WRITE, ssd, lba, static_cast<uint32_t>(len >> sh), buf) != OK)
        atomicAdd(failed, 1ull);
}
