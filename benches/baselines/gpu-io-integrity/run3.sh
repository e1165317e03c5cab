#!/usr/bin/env bash
# Issue 41, call 3: the GPU I/O tests (lying controller, bad arguments), the cache
# suites on both backends (lying controller, replicated flush, far line), 512 B IOPS,
# then the stress matrix's HBM half at 1 GB an array.
NAME=i41run3
source benches/baselines/device-prelude.sh
timeout 200 "$D/bam-gpu-tests" --rounds 1 --backend sim > "$W/bam-gpu-tests.log" 2>&1
echo "== bam-gpu-tests rc=$?" >> "$S"; tail -1 "$W/bam-gpu-tests.log" >> "$S"; keep
grep -E "^(FAIL|PASS.*(lying|bad arg))" "$W/bam-gpu-tests.log" | cut -c1-400 >> "$S"
cache_tests bam-cache-tests sim
grep -E "^PASS.*(lying|replicated flush|wraps past)" "$W/bam-cache-tests-sim.log" | cut -c1-400 >> "$S"
cache_tests bam-cache-tests hostctl
iops bam new
BAM_STRESS_JSON="$W/stress-hbm.json" timeout 330 "$D/bam-cache-tests" --stress 1G 1 media=hbm > "$W/stress-hbm.log" 2>&1
echo "== stress hbm rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/stress-hbm.log" | cut -c1-600 >> "$S"; keep
cat "$S"
