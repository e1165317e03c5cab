#!/usr/bin/env bash
# Issue 41, call 21: the stress matrix's 8-SSD host-media cases at the final code, once,
# cut at 360 s (the device time this session had left).
NAME=i41run21
source benches/baselines/device-prelude.sh
timeout 360 "$D/bam-cache-tests" --stress 1G 1 "ssds=8,media=host" > "$W/stress-host8.log" 2>&1
echo "== stress ssds=8,media=host rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/stress-host8.log" | cut -c1-300 >> "$S"
echo "PASS lines: $(grep -cE '^PASS' "$W/stress-host8.log")" >> "$S"; keep
cat "$S"
