#!/usr/bin/env bash
# Cache study, bam-new (99e5d48 library), bam-v3 (214bda1) and bam-v5 (214bda1 with post_fill as in
# 99e5d48: inline, load then releasing store), alternating; then the suite, bam-new and bam-v5.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/ab6-$$; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
S=$W/summary.log
for k in 1 2; do for b in bam-new bam-v3 bam-v5; do
  timeout 100 .devrun/$b bench cache --hit-size 256M --miss-size 256M --threads 65536,262144 \
    --output $W/cache-bench-$b-$k.json > $W/cache-bench-$b-$k.log 2>&1 || echo "CACHE BENCH $b FAILED" >> $S
  echo "== cache $b $k" >> $S
  grep -E "^(hit|miss)|latency" $W/cache-bench-$b-$k.log >> $S
done; done
tar czf $O/ab6.tgz -C $W .
for b in bam-new bam-v5; do
  timeout 100 .devrun/$b bench kernels --no-uvm --variants hbm,zerocopy,bam-hit,bam-quarter \
    --output $W/k-$b.json > $W/k-$b.log 2>&1 || echo "KERNELS $b FAILED" >> $S
  echo "== kernels $b" >> $S
  grep -E "^(spmv|bfs|gather|histogram|rmw) .*(bam-hit|bam-quarter) " $W/k-$b.log >> $S
done
tar czf $O/ab6.tgz -C $W .
cat $S
