#!/usr/bin/env bash
# Call 6: the record of 7941d03 (the lean read with the vote): the whole kernel suite with
# its UVM baselines and plot, the cache study, 512 B IOPS.
NAME=lean6
source benches/results/device-prelude.sh
timeout 400 "$D/bam-rec" bench kernels --output "$W/full.json" --plot "$W/full.svg" > "$W/full.log" 2>&1 || echo "FULL FAILED" >> "$S"
echo "== full" >> "$S"; grep -E "^(spmv|bfs|gather|histogram|rmw) " "$W/full.log" >> "$S"; keep
miss_latency bam-rec rec
iops bam-rec rec
cat "$S"
