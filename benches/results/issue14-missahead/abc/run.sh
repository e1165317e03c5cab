#!/usr/bin/env bash
# Miss path A/B/C: bam-y (HEAD's library, 099a47a), bam-b (service: io_target by pointer,
# take_requests out of line; reserves disabled), bam-c (bam-b + a reserved slot per service warp).
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/t5-$$; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
S=$W/summary.log
for k in 1 2; do for b in bam-y bam-b bam-c; do
  s0=$(date +%s)
  timeout 100 .devrun/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE BENCH $b $k FAILED" >> $S
  echo "== cache $b $k ($(( $(date +%s) - s0 )) s)" >> $S
  grep -E "^(hit|miss)|latency|steps" $W/cache-$b-$k.log >> $S
  tar czf $O/t5.tgz -C $W .
done; done
for b in bam-y bam-c; do
  s0=$(date +%s)
  timeout 150 .devrun/$b bench kernels --no-uvm --variants hbm,zerocopy,bam-hit,bam-quarter-8 \
    --output $W/k-$b.json > $W/k-$b.log 2>&1 || echo "KERNELS $b FAILED" >> $S
  echo "== kernels $b ($(( $(date +%s) - s0 )) s)" >> $S
  grep -E "^(spmv|bfs|gather|histogram|rmw) .*(bam-hit|bam-quarter)" $W/k-$b.log >> $S
  tar czf $O/t5.tgz -C $W .
done
cat $S
