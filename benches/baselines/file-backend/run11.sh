#!/usr/bin/env bash
# Eleventh run: TPC-H Q1/Q6 (SF 30) and BFS/CC (Kronecker, scale 26) reading their files
# through the file backend (page cache), each beside the same example on the simulated
# array with host media in the same call (the targets' baseline).
NAME=file11
source benches/baselines/device-prelude.sh
use_bins
data_dir
timeout 120 "$D/tpch-scan" --sf 30 --write-table "$F/lineitem.tbl" --json "$W/tpch-sim.json" > "$W/tpch-sim.log" 2>&1
echo "== tpch SF 30, simulated SSDs (host media) rc=$?" >> "$S"; grep -E "^(lineitem|wrote|HBM|zero-copy|Q1|Q6|loaded)" "$W/tpch-sim.log" | cut -c1-250 >> "$S"; keep
timeout 100 "$D/tpch-scan" --sf 30 --device "file:$F/lineitem.tbl,workers=8" --json "$W/tpch-file.json" > "$W/tpch-file.log" 2>&1
echo "== tpch SF 30, file backend rc=$?" >> "$S"; grep -E "^(reading|HBM|zero-copy|Q1|Q6|FAIL)|rror" "$W/tpch-file.log" | cut -c1-250 >> "$S"; keep
rm -f "$F/lineitem.tbl"
timeout 240 "$D/graph-analytics" --scale 26 --write-edges "$F/edges.bin" --json "$W/graph-sim.json" > "$W/graph-sim.log" 2>&1
echo "== graph scale 26, simulated SSDs (host media) rc=$?" >> "$S"; grep -E "^(graph|wrote|CPU|FAIL)|^ *(hbm|pinned|bam)" "$W/graph-sim.log" | cut -c1-250 >> "$S"; keep
timeout 200 "$D/graph-analytics" --scale 26 --variants bam --device "file:$F/edges.bin,workers=8" --json "$W/graph-file.json" > "$W/graph-file.log" 2>&1
echo "== graph scale 26, file backend rc=$?" >> "$S"; grep -E "^(graph|CPU|FAIL)|^ *(bam)|rror" "$W/graph-file.log" | cut -c1-250 >> "$S"; keep
rm -rf "$F"
cat "$S"
