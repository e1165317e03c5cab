#!/usr/bin/env bash
# First run of issue 44's pieces: the cache suite (its atomics, placement and struct
# element cases among the rest) on every single-GPU backend, the porting guide's program
# as the page has it, the random-access example, then the kernel suite with its
# histogram-atomic (all variants but UVM).
NAME=ap1
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials cache_gpu "sim " cache-sim 200
trials cache_gpu "hostctl " cache-hostctl 150
trials cache_gpu "file " cache-file 150
trials cache_gpu "file-direct " cache-file-direct 150
timeout 60 "$D/porting_guide_gpu" > "$W/porting.log" 2>&1
echo "== porting guide's program rc=$?" >> "$S"; tail -2 "$W/porting.log" >> "$S"; keep
timeout 60 "$D/random-access" > "$W/random-access.log" 2>&1
echo "== random-access rc=$?" >> "$S"; grep -E "PASS|FAIL|error" "$W/random-access.log" | head -3 >> "$S"; keep
timeout 280 "$D/bam" bench kernels --no-uvm --output "$W/suite.json" > "$W/suite.log" 2>&1
echo "== suite rc=$?" >> "$S"; grep -E "^(spmv|bfs|gather|histogram|rmw)" "$W/suite.log" | cut -c1-200 >> "$S"; keep
rm -rf "$F"
cat "$S"
