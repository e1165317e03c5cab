#!/usr/bin/env bash
# Issue 41, call 12: per-owner error logs and queue recovery together: 512 B IOPS, the
# GPU I/O tests and the cache suites on both backends, the users' scenario (3 runs of
# 134 MB and 537 MB an array), and the open 1-SSD one-queue host-media store case once.
NAME=i41run12
source benches/baselines/device-prelude.sh
iops bam r12
for b in sim hostctl; do
  timeout 240 "$D/bam-gpu-tests" --rounds 1 --backend $b > "$W/bam-gpu-tests-$b.log" 2>&1
  echo "== bam-gpu-tests $b rc=$?" >> "$S"; grep -E "^FAIL" "$W/bam-gpu-tests-$b.log" | cut -c1-400 >> "$S"; tail -1 "$W/bam-gpu-tests-$b.log" >> "$S"; keep
  cache_tests bam-cache-tests $b
done
grep -E "^PASS.*(error log|owner|dropped|recover)" "$W"/*.log | cut -c1-400 >> "$S"
BAM_STRESS_JSON="$W/scenario.json" timeout 150 "$D/bam-cache-tests" --scenario 134M,537M 3 > "$W/scenario.log" 2>&1
echo "== scenario rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/scenario.log" | cut -c1-400 >> "$S"; keep
CASE="sim:ideal,ssds=1,media=host q1 d64 line 512 1x1000M Stripe Stores"
timeout 45 "$D/bam-cache-tests" --stress 1G 1 "$CASE" > "$W/q1d64.log" 2>&1
echo "== q1 d64 512 stores rc=$?" >> "$S"; grep -E "^(FAIL|PASS)" "$W/q1d64.log" | cut -c1-300 >> "$S"; keep
cat "$S"
