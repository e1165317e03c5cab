#!/usr/bin/env bash
# Call 9: the multi-GPU tests (every GPU on the same controllers, both backends) at
# 0d7a9b5, the hit path's vote and the lean read included: two GPUs of one host.
NAME=lean9
source benches/results/device-prelude.sh
nvidia-smi --query-gpu=index,name --format=csv >> "$S"
timeout 500 "$D/bam-multi-gpu-tests" > "$W/multi-gpu-tests.log" 2>&1
echo "== bam-multi-gpu-tests rc=$?" >> "$S"; grep -E "^(PASS|FAIL|SKIPPED)|passed|failed" "$W/multi-gpu-tests.log" | cut -c1-300 >> "$S"; keep
cat "$S"
