#!/usr/bin/env bash
# Sixth call: the resident read's slot-table load through the read-only data cache
# (bam-ldg: __ldg, as landed at 083b9f9) against a plain global load (bam-plain: the same
# tree built with BAM_RESIDENT_PLAIN_TABLE=1), alternating, two rounds.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/res6-$$; mkdir -p $O $W
keep() { tar czf $O/resident6.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
for k in 1 2; do for b in bam-ldg bam-plain; do
  timeout 100 .devrun/$b bench kernels --no-uvm --kernels spmv,gather,histogram,rmw --variants hbm,bam-resident,bam-resident-8 \
    --output $W/k-$b-$k.json > $W/k-$b-$k.log 2>&1 || echo "KERNELS $b $k FAILED" >> $S
  echo "== kernels $b $k" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/k-$b-$k.log >> $S; keep
done; done
cat $S
