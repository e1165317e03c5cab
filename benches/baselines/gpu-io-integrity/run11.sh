#!/usr/bin/env bash
# Issue 41, call 11: queue recovery (IoArray::recover, Cache::recover, held slots) on both
# backends, the scan tests (scans check for failed queue pairs at their start) and the
# lying-controller tests (the simulated kernel's reset request).
NAME=i41run11
source benches/baselines/device-prelude.sh
for b in sim hostctl; do
  timeout 120 "$D/bam-gpu-tests" --rounds 1 --backend $b "created again" > "$W/gpu-recover-$b.log" 2>&1
  echo "== gpu recover $b rc=$?" >> "$S"; grep -E "^(PASS|FAIL|SKIPPED)" "$W/gpu-recover-$b.log" | cut -c1-500 >> "$S"; keep
  BAM_CACHE_TEST=recover timeout 150 "$D/bam-cache-tests" $b > "$W/cache-recover-$b.log" 2>&1
  echo "== cache recover $b rc=$?" >> "$S"; grep -E "^(PASS|FAIL|SKIPPED)" "$W/cache-recover-$b.log" | cut -c1-500 >> "$S"; keep
done
timeout 150 "$D/bam-gpu-tests" --rounds 1 --backend sim "scan" > "$W/gpu-scan.log" 2>&1
echo "== gpu scan rc=$?" >> "$S"; grep -E "^(FAIL)" "$W/gpu-scan.log" | cut -c1-400 >> "$S"; tail -1 "$W/gpu-scan.log" >> "$S"; keep
timeout 150 "$D/bam-gpu-tests" --rounds 1 --backend sim "lying" > "$W/gpu-lies.log" 2>&1
echo "== gpu lies rc=$?" >> "$S"; grep -E "^(FAIL)" "$W/gpu-lies.log" | cut -c1-400 >> "$S"; tail -1 "$W/gpu-lies.log" >> "$S"; keep
cat "$S"
