#!/usr/bin/env bash
# Run 7: after the last house splits (array.cuh's off-hit paths and cache_service.cuh's
# flush in their own detail/ headers, the cache's error codes in abi.h, Array::new's
# placement step): the I/O and cache trials on every single-GPU backend, the porting
# guide's program, random-access, the kernel suite (all nine kernels, no UVM) and the
# 512 B IOPS row.
NAME=hl7
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials gpu "sim " io-sim 120
trials cache_gpu "sim " cache-sim 200
timeout 60 "$D/porting_guide_gpu" > "$W/porting.log" 2>&1
echo "== porting guide's program rc=$?" >> "$S"; tail -2 "$W/porting.log" >> "$S"; keep
timeout 60 "$D/random-access" > "$W/random-access.log" 2>&1
echo "== random-access rc=$?" >> "$S"; grep -E "PASS|FAIL" "$W/random-access.log" | head -2 >> "$S"; keep
suite bam all9 spmv,bfs,gather,histogram,histogram-atomic,rmw,pagerank,hash-count,embedding-bag hbm,zerocopy,bam-hit,bam-resident,bam-quarter
iops bam a
trials gpu "hostctl " io-hostctl 120
trials gpu "file " io-file 120
trials cache_gpu "hostctl " cache-hostctl 150
trials cache_gpu "file " cache-file 150
trials cache_gpu "file-direct " cache-file-direct 150
rm -rf "$F"
cat "$S"
