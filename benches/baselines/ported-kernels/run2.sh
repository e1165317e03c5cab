#!/usr/bin/env bash
# Run 2: the whole suite with its UVM variants (2x and 4x oversubscription), nine kernels,
# after the checks got one owner each (2ffade1): the record of issue 44's new ports
# beside managed memory.
NAME=pk2
source benches/baselines/device-prelude.sh
use_bins
timeout 570 "$D/bam" bench kernels --output "$W/suite.json" --plot "$W/suite.svg" > "$W/suite.log" 2>&1
echo "== suite rc=$?" >> "$S"; grep -E "^(spmv|bfs|gather|histogram|rmw|pagerank|hash-count|embedding-bag)" "$W/suite.log" | cut -c1-200 >> "$S"; keep
cat "$S"
