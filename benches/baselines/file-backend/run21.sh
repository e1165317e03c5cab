#!/usr/bin/env bash
# Run 21: run 20's comparison where a service thread can go idle between requests: one
# GPU thread (queue depth 1, each read issued after the last completed) and one warp on
# one queue pair, default idle wait against `spin`, alternating, twice.
NAME=file21
source benches/baselines/device-prelude.sh
use_bins
data_dir
file_bench verify "file:$F/d.bin,size=1G" --rw randread --bs 4K --threads 4096 --queues 16 --runtime 1 --verify
for r in 1 2; do
  for s in "" ",spin"; do
    t=${s:+spin}; t=${t:-sleep}
    file_bench t1-$t-$r "file:$F/d.bin,workers=1$s" --rw randread --bs 4K --threads 1 --queues 1 --runtime 2
    file_bench t32q1-$t-$r "file:$F/d.bin,workers=1$s" --rw randread --bs 4K --threads 32 --queues 1 --runtime 2
  done
done
rm -rf "$F"
cat "$S"
