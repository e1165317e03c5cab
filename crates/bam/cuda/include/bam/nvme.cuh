// bam/nvme.cuh — NVMe command constants and SQE construction on the GPU.
#pragma once

#include <stdint.h>

#include "abi.h"

namespace bam::nvme {

// NVM command set opcodes (NVMe NVM Command Set Specification 1.0, figure 18).
constexpr uint8_t OP_FLUSH = 0x00;
constexpr uint8_t OP_WRITE = 0x01;
constexpr uint8_t OP_READ = 0x02;

// Status field = (SCT << 8) | SC, as in CQE DW3 bits 31:17 shifted down by one.
constexpr uint32_t SC_SUCCESS = 0x000;
constexpr uint32_t SC_INVALID_OPCODE = 0x001;
constexpr uint32_t SC_INVALID_FIELD = 0x002;
constexpr uint32_t SC_CID_CONFLICT = 0x003;
constexpr uint32_t SC_DATA_TRANSFER_ERROR = 0x004;
constexpr uint32_t SC_INVALID_NAMESPACE = 0x00b;
constexpr uint32_t SC_INVALID_PRP_OFFSET = 0x013;
constexpr uint32_t SC_LBA_OUT_OF_RANGE = 0x080;
constexpr uint32_t SC_UNRECOVERED_READ_ERROR = 0x281;  // SCT 2 (media), SC 0x81
constexpr uint32_t SC_WRITE_FAULT = 0x280;             // SCT 2, SC 0x80
constexpr uint32_t STATUS_DNR = 1u << 14;              // do not retry (bit 31 of DW3)

/// Status field without the CRD/M/DNR bits: (SCT << 8) | SC.
__host__ __device__ __forceinline__ uint32_t status_code(uint32_t status_field) {
    return status_field & 0x7ffu;
}

__device__ __forceinline__ void make_rw(bam_sqe& e, uint8_t opcode, uint16_t cid, uint32_t nsid,
                                        uint64_t slba, uint32_t nlb, uint64_t prp1,
                                        uint64_t prp2) {
    e.cdw0 = static_cast<uint32_t>(opcode) | (static_cast<uint32_t>(cid) << 16);  // PSDT 0: PRPs
    e.nsid = nsid;
    e.cdw2 = 0;
    e.cdw3 = 0;
    e.mptr = 0;
    e.prp1 = prp1;
    e.prp2 = prp2;
    e.cdw10 = static_cast<uint32_t>(slba);
    e.cdw11 = static_cast<uint32_t>(slba >> 32);
    e.cdw12 = (nlb - 1u) & 0xffffu;
    e.cdw13 = 0;
    e.cdw14 = 0;
    e.cdw15 = 0;
}

}  // namespace bam::nvme
