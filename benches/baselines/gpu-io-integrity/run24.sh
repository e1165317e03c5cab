#!/usr/bin/env bash
# Issue 41, call 24 (2c0f968): the stress matrix's 1-SSD host-media half, all 48 cases
# (queues 1, 8, 32, 64; depths 64, 1024; lines 512 B, 4 KiB, 64 KiB; loads and GPU
# stores; 1 GB each), cut at 560 s.
NAME=i41run24
source benches/baselines/device-prelude.sh
export BAM_STRESS_JSON=$W/stress-host-1ssd.json
timeout 560 "$D/bam-cache-tests" --stress 1G 1 "ssds=1,media=host" > "$W/stress.log" 2>&1
echo "== stress ssds=1 host rc=$?" >> "$S"
echo "$(grep -c '^PASS stress' "$W/stress.log") PASS, $(grep -c '^FAIL stress' "$W/stress.log") FAIL" >> "$S"
grep -E "^FAIL stress|^stress:" "$W/stress.log" | cut -c1-400 >> "$S"
keep
cat "$S"
