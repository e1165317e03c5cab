#!/usr/bin/env bash
# The I/O suite's named trials on both backends after the Flood judge's change.
NAME=house3
source benches/baselines/device-prelude.sh
timeout 100 "$D/gpu" --nocapture > "$W/gpu-all.log" 2>&1
echo "== gpu trials (both backends) rc=$?" >> "$S"; grep -E "^test result|FAIL|Flood" "$W/gpu-all.log" | cut -c1-300 >> "$S"; keep
cat "$S"
