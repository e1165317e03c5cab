#!/usr/bin/env bash
# Call 2: the kernel suite (no UVM), bam-r (215a81a) and bam-x alternating, twice; then the cache study once each.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/t2x-$$; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
for k in 1 2; do for b in bam-r bam-x; do
  timeout 110 .devrun/$b bench kernels --no-uvm --variants hbm,zerocopy,bam-hit,bam-quarter \
    --output $W/k-$b-$k.json > $W/k-$b-$k.log 2>&1 || echo "KERNELS $b FAILED" >> $S
  echo "== kernels $b $k" >> $S
  grep -E "^(spmv|bfs|gather|histogram|rmw) .*(bam-hit|bam-quarter) " $W/k-$b-$k.log >> $S
done; done
tar czf $O/t2.tgz -C $W .
for b in bam-r bam-x; do
  timeout 100 .devrun/$b bench cache --hit-size 256M --miss-size 256M --threads 65536,262144 \
    --output $W/cache-bench-$b.json > $W/cache-bench-$b.log 2>&1 || echo "CACHE BENCH $b FAILED" >> $S
  echo "== cache $b" >> $S
  grep -E "^(hit|miss)|latency" $W/cache-bench-$b.log >> $S
done
tar czf $O/t2.tgz -C $W .
cat $S
