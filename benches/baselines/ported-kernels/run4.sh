#!/usr/bin/env bash
# Run 4: spmv and pagerank after their per-row results got one owner (RowResults): the
# host replay of the hbm run and the bitwise checks of the ported variants must still
# pass, partial runs included (bam-quarter's budget).
NAME=pk4
source benches/baselines/device-prelude.sh
use_bins
timeout 200 "$D/bam" bench kernels --kernels spmv,pagerank --no-uvm \
  --variants hbm,zerocopy,bam-hit,bam-resident,bam-quarter --budget 2 \
  --output "$W/suite.json" > "$W/suite.log" 2>&1
echo "== suite rc=$?" >> "$S"; grep -E "^(spmv|pagerank)" "$W/suite.log" | cut -c1-220 >> "$S"; keep
cat "$S"
