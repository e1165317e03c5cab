#!/usr/bin/env bash
# Run 8: the workloads after the last house splits, on the simulated array with host
# media (each example's default device), beside their HBM and zero-copy peers in the same
# process: 1BRC 10^9 rows, TPC-H Q1/Q6 SF 30, BFS/CC Kronecker scale 26 with 4 KiB lines.
NAME=hl8
source benches/baselines/device-prelude.sh
use_bins
timeout 200 "$D/billion-rows" --rows 1e9 --json "$W/brc.json" > "$W/brc.log" 2>&1
echo "== brc 1e9 rc=$?" >> "$S"; grep -vE "^\s*$" "$W/brc.log" | tail -6 | cut -c1-300 >> "$S"; keep
timeout 150 "$D/tpch-scan" --sf 30 --json "$W/tpch.json" > "$W/tpch.log" 2>&1
echo "== tpch SF 30 rc=$?" >> "$S"; grep -E "^(lineitem|HBM|zero-copy|Q1|Q6|loaded)" "$W/tpch.log" | cut -c1-250 >> "$S"; keep
timeout 240 "$D/graph-analytics" --scale 26 --line 4096 --json "$W/graph.json" > "$W/graph.log" 2>&1
echo "== graph scale 26 rc=$?" >> "$S"; grep -E "^(graph|CPU|FAIL)|^ *(hbm|pinned|bam)" "$W/graph.log" | cut -c1-250 >> "$S"; keep
cat "$S"
