#!/usr/bin/env bash
# Issue 41, call 5 (same binaries as call 4): the stress matrix's host-media half at
# 1 GB an array.
NAME=i41run5
source benches/baselines/device-prelude.sh
BAM_STRESS_JSON="$W/stress-host.json" timeout 560 "$D/bam-cache-tests" --stress 1G 1 media=host > "$W/stress-host.log" 2>&1
echo "== stress host rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/stress-host.log" | cut -c1-600 >> "$S"; keep
cat "$S"
