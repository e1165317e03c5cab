#!/usr/bin/env bash
# Issue 41, call 15: the scan tests (refused while a queue pair is failed) on both
# backends; the open 1-SSD host-media 64-entry 512 B store family with a diagnostic build
# (bam-cache-tests-diag: this commit plus a check, in push_tail, that the absolute SQ tail
# rung never goes backwards; a regression logs a protocol entry with reason 9, detail
# 0xd1a6); then the users' scenario, 20 runs at 134 MB, 537 MB and 1.07 GB an array.
NAME=i41run15
source benches/baselines/device-prelude.sh
for b in sim hostctl; do
  timeout 120 "$D/bam-gpu-tests" --rounds 1 --backend $b "scan" > "$W/gpu-scan-$b.log" 2>&1
  echo "== gpu scan $b rc=$?" >> "$S"; grep -E "^(PASS|FAIL)" "$W/gpu-scan-$b.log" | cut -c1-300 >> "$S"; keep
done
for q in 1 1 1 8; do
  CASE="sim:ideal,ssds=1,media=host q$q d64 line 512 1x1000M Stripe Stores"
  timeout 40 "$D/bam-cache-tests-diag" --stress 1G 1 "$CASE" > "$W/diag-q$q-$RANDOM.log" 2>&1
  echo "== diag q$q rc=$?" >> "$S"; keep
done
grep -h "reason 9\|0xd1a6\|d1a6" "$W"/diag-*.log | head -5 >> "$S"
grep -hE "^(FAIL|PASS)" "$W"/diag-*.log | cut -c1-300 >> "$S"
BAM_STRESS_JSON="$W/scenario.json" timeout 300 "$D/bam-cache-tests" --scenario 134M,537M,1.07G 20 > "$W/scenario.log" 2>&1
echo "== scenario rc=$?" >> "$S"; grep -E "^(FAIL|stress:)|Stripe Load +[0-9]" "$W/scenario.log" | cut -c1-400 >> "$S"; keep
cat "$S"
