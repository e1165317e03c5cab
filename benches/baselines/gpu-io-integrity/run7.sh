#!/usr/bin/env bash
# Issue 41, call 7 (the closing record): 512 B IOPS, the GPU I/O tests and the sim cache
# suite, the 1-SSD one-queue host-media case of call 5 five times (own processes), and
# the users' scenario 20 times at 134 MB, 537 MB and 1.07 GB an array.
NAME=i41run7
source benches/baselines/device-prelude.sh
iops bam final
timeout 200 "$D/bam-gpu-tests" --rounds 1 --backend sim > "$W/bam-gpu-tests.log" 2>&1
echo "== bam-gpu-tests rc=$?" >> "$S"; grep -E "^FAIL" "$W/bam-gpu-tests.log" | cut -c1-400 >> "$S"; tail -1 "$W/bam-gpu-tests.log" >> "$S"; keep
cache_tests bam-cache-tests sim
CASE="sim:ideal,ssds=1,media=host q1 d64 line 512 1x1000M Stripe Stores"
for r in 1 2 3 4 5; do
  timeout 45 "$D/bam-cache-tests" --stress 1G 1 "$CASE" > "$W/q1d64-$r.log" 2>&1
  echo "== q1 d64 512 stores run $r rc=$?" >> "$S"; grep -E "^(FAIL|PASS)" "$W/q1d64-$r.log" | cut -c1-300 >> "$S"; keep
done
BAM_STRESS_JSON="$W/scenario.json" timeout 290 "$D/bam-cache-tests" --scenario 134M,537M,1.07G 20 > "$W/scenario.log" 2>&1
echo "== scenario rc=$?" >> "$S"; grep -E "^(FAIL|stress:)|Stripe Load +[0-9]" "$W/scenario.log" | cut -c1-400 >> "$S"; keep
cat "$S"
