#!/usr/bin/env bash
# Issue 41, call 16 (the closing record): 512 B IOPS; the GPU I/O tests and the cache
# suites on both backends (the lying controller's Flood lie among them); the open
# 1-SSD host-media 64-entry 512 B store family, plain build, 3 x q1 and 1 x q8.
NAME=i41run16
source benches/baselines/device-prelude.sh
iops bam r16
for b in sim hostctl; do
  timeout 240 "$D/bam-gpu-tests" --rounds 1 --backend $b > "$W/bam-gpu-tests-$b.log" 2>&1
  echo "== bam-gpu-tests $b rc=$?" >> "$S"; grep -E "^FAIL" "$W/bam-gpu-tests-$b.log" | cut -c1-400 >> "$S"; tail -1 "$W/bam-gpu-tests-$b.log" >> "$S"; keep
  cache_tests bam-cache-tests $b
done
grep -hE "^PASS.*Flood" "$W"/*.log | cut -c1-400 >> "$S"
for q in 1 1 1 8; do
  CASE="sim:ideal,ssds=1,media=host q$q d64 line 512 1x1000M Stripe Stores"
  timeout 40 "$D/bam-cache-tests" --stress 1G 1 "$CASE" > "$W/fam-q$q-$RANDOM.log" 2>&1
  echo "== family q$q rc=$?" >> "$S"; keep
done
grep -hE "^(FAIL|PASS) stress" "$W"/fam-*.log | cut -c1-300 >> "$S"
cat "$S"
