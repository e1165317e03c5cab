#!/usr/bin/env bash
# The I/O suite's Flood lie, 5 times through the named trial and 5 times through the
# old runner (bam-gpu-tests), same build: does it stop at the reaper's bound?
NAME=house2
source benches/baselines/device-prelude.sh
for i in 1 2 3 4 5; do
  timeout 30 "$D/gpu" --nocapture 'sim lying controller (Flood)' > "$W/trial-$i.log" 2>&1
  echo "== trial $i rc=$?: $(grep -oE '[0-9]+ floods stopped at the bound' "$W/trial-$i.log" | head -1)" >> "$S"
  timeout 30 "$D/bam-gpu-tests" --rounds 1 --backend sim "lying controller (Flood)" > "$W/runner-$i.log" 2>&1
  echo "== runner $i rc=$?: $(grep -oE '[0-9]+ floods stopped at the bound' "$W/runner-$i.log" | head -1)" >> "$S"
  keep
done
cat "$S"
