#!/usr/bin/env bash
# Issue 14 tuning on the device: read-ahead detectors (bam: a neighbour cached or busy;
# bam-busy: and one of them busy), depth and fill-service blocks, bam-quarter.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/ab14; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
run() { local n=$1; shift; echo "== $n: $*" >> $W/summary.log; timeout 150 "$@" --output $W/$n.json > $W/$n.log 2>&1 || echo "FAILED rc=$? $n" >> $W/summary.log; grep -E "^(spmv|histogram|rmw|bfs|gather) " $W/$n.log >> $W/summary.log; }
S="--no-uvm --reps 3 --variants hbm,zerocopy,bam-quarter"
run any-ra8-fb8 .devrun/bam bench kernels $S --readahead 8 --fill-blocks 8
run busy-ra8-fb8 .devrun/bam-busy bench kernels $S --readahead 8 --fill-blocks 8
run busy-ra16-fb8 .devrun/bam-busy bench kernels --kernels histogram,rmw,spmv $S --readahead 16 --fill-blocks 8
run busy-ra16-fb12 .devrun/bam-busy bench kernels --kernels histogram,rmw,spmv $S --readahead 16 --fill-blocks 12
run busy-ra8-fb12 .devrun/bam-busy bench kernels --kernels histogram,rmw,spmv $S --readahead 8 --fill-blocks 12
tar czf $O/ab14.tgz -C $W .
cat $W/summary.log
