#!/usr/bin/env bash
# Issue 41, call 13: 512 B IOPS of eeb73b0 (bam-old, before recovery and per-owner logs)
# and of this commit, alternating on one machine; the GPU I/O tests and the cache suites
# on both backends; the open 1-SSD host-media 64-entry 512 B store family (1 and 8 queues).
NAME=i41run13
source benches/baselines/device-prelude.sh
for r in 1 2; do iops bam-old old$r; iops bam new$r; done
for b in sim hostctl; do
  timeout 240 "$D/bam-gpu-tests" --rounds 1 --backend $b > "$W/bam-gpu-tests-$b.log" 2>&1
  echo "== bam-gpu-tests $b rc=$?" >> "$S"; grep -E "^FAIL" "$W/bam-gpu-tests-$b.log" | cut -c1-400 >> "$S"; tail -1 "$W/bam-gpu-tests-$b.log" >> "$S"; keep
  cache_tests bam-cache-tests $b
done
grep -hE "^PASS.*(error log|owner|dropped|recover|fill queues|lying)" "$W"/*.log | cut -c1-300 >> "$S"
for q in 1 8; do for r in 1 2; do
  CASE="sim:ideal,ssds=1,media=host q$q d64 line 512 1x1000M Stripe Stores"
  timeout 60 "$D/bam-cache-tests" --stress 1G 1 "$CASE" > "$W/q${q}d64-$r.log" 2>&1
  echo "== q$q d64 512 stores run $r rc=$?" >> "$S"; grep -E "^(FAIL|PASS)" "$W/q${q}d64-$r.log" | cut -c1-300 >> "$S"; keep
done; done
cat "$S"
