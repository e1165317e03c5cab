#!/usr/bin/env bash
# Miss path A/B: bam-y (HEAD's library, 099a47a) and bam-d (the fill service draws a clock
# position ahead while idle), alternating; the suite both; then cache and GPU tests of bam-d.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/t6-$$; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
S=$W/summary.log
for k in 1 2 3; do for b in bam-y bam-d; do
  timeout 100 .devrun/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE BENCH $b $k FAILED" >> $S
  echo "== cache $b $k" >> $S
  grep -E "^(hit|miss)|latency|steps" $W/cache-$b-$k.log >> $S
done; done
tar czf $O/t6.tgz -C $W .
for b in bam-y bam-d; do
  timeout 150 .devrun/$b bench kernels --no-uvm --variants hbm,zerocopy,bam-hit,bam-quarter-8 \
    --output $W/k-$b.json > $W/k-$b.log 2>&1 || echo "KERNELS $b FAILED" >> $S
  echo "== kernels $b" >> $S
  grep -E "^(spmv|bfs|gather|histogram|rmw) .*(bam-hit|bam-quarter)" $W/k-$b.log >> $S
  tar czf $O/t6.tgz -C $W .
done
s0=$(date +%s)
timeout 240 .devrun/bam-cache-tests-d sim > $W/cache-tests-d.log 2>&1; echo "== cache tests rc=$? ($(( $(date +%s) - s0 )) s)" >> $S
tail -5 $W/cache-tests-d.log >> $S
tar czf $O/t6.tgz -C $W .
s0=$(date +%s)
timeout 150 .devrun/bam-gpu-tests-d --rounds 1 --backend sim > $W/gpu-tests-d.log 2>&1; echo "== gpu tests rc=$? ($(( $(date +%s) - s0 )) s)" >> $S
tail -5 $W/gpu-tests-d.log >> $S
tar czf $O/t6.tgz -C $W .
cat $S
