#!/usr/bin/env bash
# Call 1: the closing record of issue 14 at 1e7a017 (library code of a51800c): the whole
# kernel suite with its UVM baselines and plot, the cache study (one 4 KiB miss, hits),
# 512 B IOPS.
NAME=final1
source benches/results/device-prelude.sh
timeout 420 "$D/bam-rec" bench kernels --output "$W/full.json" --plot "$W/full.svg" > "$W/full.log" 2>&1 || echo "FULL FAILED" >> "$S"
echo "== full" >> "$S"; grep -E "^(spmv|bfs|gather|histogram|rmw) " "$W/full.log" >> "$S"; keep
miss_latency bam-rec rec
iops bam-rec rec
cat "$S"
