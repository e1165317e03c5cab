#!/usr/bin/env bash
# Issue 41, call 14: 512 B IOPS of eeb73b0 (bam-old, before recovery and per-owner logs)
# and of this commit, alternating on one machine; the GPU I/O tests and the cache suites
# on both backends (the simulated controller recovers queues by a stop and a start).
NAME=i41run14
source benches/baselines/device-prelude.sh
for r in 1 2; do iops bam-old old$r; iops bam new$r; done
for b in sim hostctl; do
  timeout 240 "$D/bam-gpu-tests" --rounds 1 --backend $b > "$W/bam-gpu-tests-$b.log" 2>&1
  echo "== bam-gpu-tests $b rc=$?" >> "$S"; grep -E "^FAIL" "$W/bam-gpu-tests-$b.log" | cut -c1-400 >> "$S"; tail -1 "$W/bam-gpu-tests-$b.log" >> "$S"; keep
  cache_tests bam-cache-tests $b
done
grep -hE "^PASS.*(error log|owner|dropped|recover|fill queues|lying)" "$W"/*.log | cut -c1-300 >> "$S"
cat "$S"
