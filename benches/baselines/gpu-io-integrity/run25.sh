#!/usr/bin/env bash
# Issue 41, call 25 (2c0f968): the stress matrix's 8-SSD host-media cases with 32 and 64
# queues per SSD (48 cases, 1 GB each; the q1 and q8 ones passed in call 21), cut at 570 s.
NAME=i41run25
source benches/baselines/device-prelude.sh
for q in q32 q64; do
  export BAM_STRESS_JSON=$W/stress-host-8ssd-$q.json
  timeout 285 "$D/bam-cache-tests" --stress 1G 1 "ssds=8,media=host $q" > "$W/stress-$q.log" 2>&1
  echo "== stress ssds=8 host $q rc=$?" >> "$S"
  echo "$(grep -c '^PASS stress' "$W/stress-$q.log") PASS, $(grep -c '^FAIL stress' "$W/stress-$q.log") FAIL" >> "$S"
  grep -E "^FAIL stress|^stress:" "$W/stress-$q.log" | cut -c1-400 >> "$S"
  keep
done
cat "$S"
