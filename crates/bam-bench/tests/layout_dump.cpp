// Prints the size and field offsets of every struct in cuda/bench_abi.h and its
// constants, for tests/layout.rs. Compiled with the host C++ compiler (no CUDA needed),
// against the bam device headers (bench_abi.h includes bam/abi.h).
#include <cstddef>
#include <cstdio>

#include "bench_abi.h"

#define S(T) std::printf("struct %s %zu\n", #T, sizeof(T))
#define F(T, f) std::printf("field %s %s %zu\n", #T, #f, offsetof(T, f))
#define C(N) std::printf("const %s %llu\n", #N, static_cast<unsigned long long>(N))

int main() {
    S(bam_bench_params); F(bam_bench_params, ios_per_thread); F(bam_bench_params, deadline_ns);
    F(bam_bench_params, span_lbas); F(bam_bench_params, seed); F(bam_bench_params, nlb); F(bam_bench_params, read_pct);
    F(bam_bench_params, random); F(bam_bench_params, verify); F(bam_bench_params, gen);
    F(bam_bench_params, queues_used); F(bam_bench_params, ssds_used); F(bam_bench_params, warp_io);
    S(bam_raw_cmd); F(bam_raw_cmd, cdw0); F(bam_raw_cmd, nsid); F(bam_raw_cmd, slba); F(bam_raw_cmd, nlb);
    F(bam_raw_cmd, prp);
    S(bam_bench_result); F(bam_bench_result, ios); F(bam_bench_result, bytes); F(bam_bench_result, errors);
    F(bam_bench_result, verify_failures); F(bam_bench_result, t_start_ns); F(bam_bench_result, t_end_ns);
    F(bam_bench_result, cycles); F(bam_bench_result, thread_ns); F(bam_bench_result, lat_cycles_sum);
    F(bam_bench_result, reserved); F(bam_bench_result, hist);
    C(BAM_BENCH_HIST_BUCKETS);
    return 0;
}
