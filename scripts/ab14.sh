#!/usr/bin/env bash
# Issue 14 tuning on the device: read-ahead depth and fill-service blocks, bam-quarter.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/ab14; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
run() { local n=$1; shift; echo "== $n: $*" >> $W/summary.log; timeout 150 "$@" --output $W/$n.json > $W/$n.log 2>&1 || echo "FAILED rc=$? $n" >> $W/summary.log; grep -E "^(spmv|histogram|rmw|bfs|gather) " $W/$n.log >> $W/summary.log; }
S="--no-uvm --reps 3 --variants hbm,zerocopy,bam-quarter"
for cfg in "4 4" "8 4" "4 8" "8 8" "8 12"; do set -- $cfg
  run ra$1-fb$2 .devrun/bam bench kernels --kernels histogram,rmw,spmv $S --readahead $1 --fill-blocks $2
done
run rand-ra0 .devrun/bam bench kernels --kernels bfs,gather $S --readahead 0
run rand-ra4 .devrun/bam bench kernels --kernels bfs,gather $S --readahead 4
timeout 280 .devrun/bam-cache-tests sim > $W/cache-tests.log 2>&1; echo "cache tests rc=$?" >> $W/summary.log
grep -E "^(PASS|FAIL|FATAL|SKIP|all cache)" $W/cache-tests.log | tail -60 >> $W/summary.log
tar czf $O/ab14.tgz -C $W .
cat $W/summary.log
