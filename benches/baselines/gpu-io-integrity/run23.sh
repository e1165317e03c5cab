#!/usr/bin/env bash
# Issue 41, call 23: the mixed-group doorbell test with its three lanes made to meet
# (__syncwarp of the three) and their active mask recorded, before the fix and after it,
# on both backends; then the GPU I/O tests and the cache suite on the simulated array.
NAME=i41run23
source benches/baselines/device-prelude.sh
for b in sim hostctl; do
  for bin in before/bam-gpu-tests bam-gpu-tests; do
    tag=${bin//\//-}
    timeout 60 "$D/$bin" --rounds 1 --backend $b "warp group" > "$W/$tag-$b.log" 2>&1
    echo "== $bin $b rc=$?" >> "$S"; grep -E "^(PASS|FAIL)" "$W/$tag-$b.log" | cut -c1-600 >> "$S"; keep
  done
done
timeout 150 "$D/bam-gpu-tests" --rounds 1 --backend sim > "$W/bam-gpu-tests-sim.log" 2>&1
echo "== bam-gpu-tests sim rc=$?" >> "$S"; grep -E "^FAIL" "$W/bam-gpu-tests-sim.log" | cut -c1-400 >> "$S"; tail -1 "$W/bam-gpu-tests-sim.log" >> "$S"; keep
cache_tests bam-cache-tests sim
cat "$S"
