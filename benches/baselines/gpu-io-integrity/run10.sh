#!/usr/bin/env bash
# Issue 41, call 10 (0eaf573, the review's mend of the reapers): the GPU I/O tests and
# the sim cache suite.
NAME=i41run10
source benches/baselines/device-prelude.sh
timeout 200 "$D/bam-gpu-tests" --rounds 1 --backend sim > "$W/bam-gpu-tests.log" 2>&1
echo "== bam-gpu-tests rc=$?" >> "$S"; grep -E "^FAIL" "$W/bam-gpu-tests.log" | cut -c1-400 >> "$S"; tail -1 "$W/bam-gpu-tests.log" >> "$S"; keep
cache_tests bam-cache-tests sim
cat "$S"
