#!/usr/bin/env bash
# Run 3: the UVM variants of the two kernels whose runs overran the time budget in run 2
# (hash-count, pagerank), after UVM runs stay split: each variant must stop near the
# 15 s budget.
NAME=pk3
source benches/baselines/device-prelude.sh
use_bins
start=$(date +%s)
timeout 300 "$D/bam" bench kernels --kernels hash-count,pagerank --variants hbm,uvm-2x,uvm-4x \
  --output "$W/suite.json" > "$W/suite.log" 2>&1
echo "== suite rc=$? in $(( $(date +%s) - start )) s" >> "$S"; grep -E "^(pagerank|hash-count)" "$W/suite.log" | cut -c1-220 >> "$S"; keep
cat "$S"
