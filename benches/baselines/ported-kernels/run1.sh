#!/usr/bin/env bash
# Issue 44 item 8: the kernel suite with its three new ports (pagerank, hash-count,
# embedding-bag) beside the six older kernels, every variant but UVM, one process.
NAME=pk1
source benches/baselines/device-prelude.sh
use_bins
timeout 560 "$D/bam" bench kernels --no-uvm --output "$W/suite.json" --plot "$W/suite.svg" > "$W/suite.log" 2>&1
echo "== suite rc=$?" >> "$S"; grep -E "^(spmv|bfs|gather|histogram|rmw|pagerank|hash-count|embedding-bag)" "$W/suite.log" | cut -c1-200 >> "$S"; keep
cat "$S"
