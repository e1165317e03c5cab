#!/usr/bin/env bash
# Issue 41, call 27: F12's timer read moved into the second load's shadow. The cache
# study of 2c0f968 (before/bam) and of this build alternating; the GPU I/O tests and the
# cache suite on the simulated array; the users' scenario, 20 runs at 134 MB, 537 MB and
# 1.07 GB an array (cut at 300 s).
NAME=i41run27
source benches/baselines/device-prelude.sh
miss_latency before/bam old1
miss_latency bam new1
miss_latency before/bam old2
miss_latency bam new2
gpu_tests bam-gpu-tests
cache_tests bam-cache-tests sim
BAM_STRESS_JSON="$W/scenario.json" timeout 300 "$D/bam-cache-tests" --scenario 134M,537M,1.07G 20 > "$W/scenario.log" 2>&1
echo "== scenario rc=$?" >> "$S"; grep -E "^(FAIL|stress:)|Stripe Load +[0-9]" "$W/scenario.log" | cut -c1-400 >> "$S"; keep
cat "$S"
