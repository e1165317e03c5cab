#!/usr/bin/env bash
# Issue 41, call 2 (the fix, 4137cd0): the users' scenario 20 times at 134 MB, 537 MB
# and 1.07 GB a array (two arrays, host media, 8 SSDs, 32 queues); the GPU I/O tests and
# the cache suites on both backends; 512 B IOPS on ideal simulated SSDs.
NAME=i41run2
source benches/baselines/device-prelude.sh
timeout 300 "$D/bam-cache-tests" --scenario 134M,537M,1.07G 20 > "$W/scenario.log" 2>&1
echo "== scenario rc=$?" >> "$S"; grep -E "^(FAIL|stress:)|Stripe Load +[0-9]" "$W/scenario.log" | cut -c1-400 >> "$S"; keep
gpu_tests bam-gpu-tests
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
iops bam new
cat "$S"
