// Prints the size and field offsets of every struct in bam/abi.h (cuda/include) and
// sim_abi.h (cuda/src, beside the simulator's kernel), and the constants both sides use,
// for tests/layout.rs. Compiled with the host C++ compiler (no CUDA needed).
#include <cstddef>
#include <cstdio>

#include "bam/abi.h"
#include "sim_abi.h"

#define S(T) std::printf("struct %s %zu\n", #T, sizeof(T))
#define F(T, f) std::printf("field %s %s %zu\n", #T, #f, offsetof(T, f))
#define C(N) std::printf("const %s %llu\n", #N, static_cast<unsigned long long>(N))

int main() {
    S(bam_qp_view); F(bam_qp_view, sq); F(bam_qp_view, cq); F(bam_qp_view, sq_db); F(bam_qp_view, cq_db);
    F(bam_qp_view, state); F(bam_qp_view, slots); F(bam_qp_view, depth); F(bam_qp_view, qid);
    F(bam_qp_view, ssd); F(bam_qp_view, flags); F(bam_qp_view, reserved);
    S(bam_qp_state); F(bam_qp_state, sq_ticket); F(bam_qp_state, failed); F(bam_qp_state, pad0);
    F(bam_qp_state, sq_tail); F(bam_qp_state, sq_doorbells); F(bam_qp_state, pad1);
    F(bam_qp_state, cq_head); F(bam_qp_state, cq_rung); F(bam_qp_state, cq_doorbells);
    F(bam_qp_state, completions); F(bam_qp_state, sq_head); F(bam_qp_state, pad2); F(bam_qp_state, pad3);
    S(bam_ssd_view); F(bam_ssd_view, nlb); F(bam_ssd_view, nsid); F(bam_ssd_view, lba_shift);
    F(bam_ssd_view, mdts_bytes); F(bam_ssd_view, nqueues); F(bam_ssd_view, first_qp); F(bam_ssd_view, reserved);
    S(bam_buf_view); F(bam_buf_view, base); F(bam_buf_view, len); F(bam_buf_view, iova_table);
    F(bam_buf_view, slot_bytes); F(bam_buf_view, prp_off); F(bam_buf_view, iova_shift); F(bam_buf_view, nslots);
    F(bam_buf_view, prp_stride); F(bam_buf_view, page_shift); F(bam_buf_view, reserved);
    S(bam_error_entry); F(bam_error_entry, lba); F(bam_error_entry, time_ns); F(bam_error_entry, status);
    F(bam_error_entry, ssd); F(bam_error_entry, qid); F(bam_error_entry, cid); F(bam_error_entry, opcode);
    F(bam_error_entry, kind); F(bam_error_entry, nlb); F(bam_error_entry, seq); F(bam_error_entry, reserved);
    S(bam_error_log); F(bam_error_log, suppressed); F(bam_error_log, count); F(bam_error_log, capacity);
    F(bam_error_log, abort_base); F(bam_error_log, entries); F(bam_error_log, aborts); F(bam_error_log, reserved);
    S(bam_io_view); F(bam_io_view, qps); F(bam_io_view, ssds); F(bam_io_view, errlog); F(bam_io_view, timeout_ns);
    F(bam_io_view, nssd); F(bam_io_view, nqp); F(bam_io_view, stripe_lbas); F(bam_io_view, flags); F(bam_io_view, buf);
    S(bam_span_view); F(bam_span_view, first_lba); F(bam_span_view, bytes); F(bam_span_view, chunk_bytes);
    F(bam_span_view, halo_bytes);
    S(bam_scan_view); F(bam_scan_view, io); F(bam_scan_view, spans); F(bam_scan_view, chunks); F(bam_scan_view, nspans);
    F(bam_scan_view, depth); F(bam_scan_view, first_slot); F(bam_scan_view, nslots); F(bam_scan_view, lba_shift);
    F(bam_scan_view, reserved);
    S(bam_sim_ssd); F(bam_sim_ssd, medium); F(bam_sim_ssd, nlb); F(bam_sim_ssd, lba_shift); F(bam_sim_ssd, nsid);
    F(bam_sim_ssd, mdts_bytes); F(bam_sim_ssd, page_shift); F(bam_sim_ssd, lat_read_ns); F(bam_sim_ssd, lat_write_ns);
    F(bam_sim_ssd, ps_per_read_cmd); F(bam_sim_ssd, ps_per_write_cmd); F(bam_sim_ssd, ps_per_read_byte);
    F(bam_sim_ssd, ps_per_write_byte); F(bam_sim_ssd, fault_lba); F(bam_sim_ssd, fault_nlb);
    F(bam_sim_ssd, fault_status); F(bam_sim_ssd, flags); F(bam_sim_ssd, vclock); F(bam_sim_ssd, lie_ns);
    F(bam_sim_ssd, reserved);
    S(bam_sim_queue); F(bam_sim_queue, sq); F(bam_sim_queue, cq); F(bam_sim_queue, sq_db); F(bam_sim_queue, cq_db);
    F(bam_sim_queue, pending); F(bam_sim_queue, cid_bitmap); F(bam_sim_queue, depth); F(bam_sim_queue, qid);
    F(bam_sim_queue, ssd); F(bam_sim_queue, sq_head); F(bam_sim_queue, cq_tail); F(bam_sim_queue, pend_head);
    F(bam_sim_queue, pend_tail); F(bam_sim_queue, reads); F(bam_sim_queue, writes); F(bam_sim_queue, others);
    F(bam_sim_queue, read_bytes); F(bam_sim_queue, write_bytes); F(bam_sim_queue, errors);
    F(bam_sim_queue, bad_doorbells);
    S(bam_sim_pending); F(bam_sim_pending, due_ns); F(bam_sim_pending, cid); F(bam_sim_pending, status);
    F(bam_sim_pending, flags);
    S(bam_sim_region); F(bam_sim_region, iova); F(bam_sim_region, len); F(bam_sim_region, dev);
    F(bam_sim_region, reserved);
    S(bam_sim_control); F(bam_sim_control, stop); F(bam_sim_control, stall); F(bam_sim_control, started);
    F(bam_sim_control, exited); F(bam_sim_control, loops); F(bam_sim_control, reserved);
    F(bam_sim_control, fault_epoch); F(bam_sim_control, fault_acks); F(bam_sim_control, reserved2);
    S(bam_sim_view); F(bam_sim_view, queues); F(bam_sim_view, ssds); F(bam_sim_view, regions);
    F(bam_sim_view, control); F(bam_sim_view, nqueues); F(bam_sim_view, nssd); F(bam_sim_view, nregions);
    F(bam_sim_view, flags);
    C(BAM_QP_F_MMIO); C(BAM_ERR_NVME); C(BAM_ERR_TIMEOUT); C(BAM_ERR_INVALID); C(BAM_ERR_PROTOCOL);
    C(BAM_ERR_ABORTED); C(BAM_ERR_VERIFY); C(BAM_PROTO_NO_COMMAND); C(BAM_PROTO_SQ_HEAD);
    C(BAM_PROTO_CQ_FLOOD); C(BAM_SIM_SMEM_BYTES); C(BAM_SIM_Q_SYSTEM);
    C(BAM_SIM_LIE_DUPLICATE); C(BAM_SIM_LIE_OTHER_CID); C(BAM_SIM_LIE_UNSUBMITTED); C(BAM_SIM_LIE_STALE);
    C(BAM_SIM_LIE_PHASE); C(BAM_SIM_LIE_SQ_HEAD); C(BAM_SIM_LIE_WITHHOLD); C(BAM_SIM_LIE_FLOOD);
    C(BAM_IO_QPS_PER_SSD_SHIFT); C(BAM_IO_SHARED_QPS_MASK); C(BAM_SCAN_MAX_SPANS); C(BAM_SCAN_MAX_DEPTH);
    C(BAM_SCAN_ERR_QUEUE_FAILED);
    return 0;
}
