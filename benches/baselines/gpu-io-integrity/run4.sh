#!/usr/bin/env bash
# Issue 41, call 4: after the cpl tag fix. The GPU I/O tests, the cache suites on both
# backends, 512 B IOPS, the users' scenario 5 times at 1.07 GB, then the stress
# matrix's HBM half at 1 GB an array.
NAME=i41run4
source benches/baselines/device-prelude.sh
timeout 200 "$D/bam-gpu-tests" --rounds 1 --backend sim > "$W/bam-gpu-tests.log" 2>&1
echo "== bam-gpu-tests rc=$?" >> "$S"; grep -E "^FAIL" "$W/bam-gpu-tests.log" | cut -c1-400 >> "$S"; tail -1 "$W/bam-gpu-tests.log" >> "$S"; keep
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
iops bam new
timeout 60 "$D/bam-cache-tests" --scenario 1.07G 5 > "$W/scenario.log" 2>&1
echo "== scenario rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/scenario.log" | cut -c1-400 >> "$S"; keep
BAM_STRESS_JSON="$W/stress-hbm.json" timeout 280 "$D/bam-cache-tests" --stress 1G 1 media=hbm > "$W/stress-hbm.log" 2>&1
echo "== stress hbm rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/stress-hbm.log" | cut -c1-600 >> "$S"; keep
cat "$S"
