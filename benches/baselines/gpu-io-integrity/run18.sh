#!/usr/bin/env bash
# Issue 41, call 18: IoArray::recover refused while a cache lives; the recovery, held-slot
# and fill-queue tests and the GPU I/O suite on both backends at the final commit.
NAME=i41run18
source benches/baselines/device-prelude.sh
for b in sim hostctl; do
  timeout 200 "$D/bam-gpu-tests" --rounds 1 --backend $b > "$W/gpu-$b.log" 2>&1
  echo "== bam-gpu-tests $b rc=$?" >> "$S"; grep -E "^FAIL" "$W/gpu-$b.log" | cut -c1-300 >> "$S"; tail -1 "$W/gpu-$b.log" >> "$S"; keep
  BAM_CACHE_TEST=recover timeout 100 "$D/bam-cache-tests" $b > "$W/cache-recover-$b.log" 2>&1
  echo "== cache recover $b rc=$?" >> "$S"; grep -E "^(PASS|FAIL)" "$W/cache-recover-$b.log" | cut -c1-300 >> "$S"; keep
  BAM_CACHE_TEST="fill queues" timeout 100 "$D/bam-cache-tests" $b > "$W/cache-fq-$b.log" 2>&1
  echo "== cache fill queues $b rc=$?" >> "$S"; grep -E "^(PASS|FAIL)" "$W/cache-fq-$b.log" | cut -c1-300 >> "$S"; keep
done
cat "$S"
