#!/usr/bin/env bash
# Call 11: the landed library (655e6f7, bam-base) on the H100: the whole kernel suite with
# UVM and its plot (the target table), then the resident variants.
set -u
export CUDA_MODULE_LOADING=EAGER
export BAM_COMMIT=655e6f7
O=${OUT:-/tmp/out}; W=/tmp/full11-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/full11.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
timeout 480 $D/bam-base bench kernels --output $W/full.json --plot $W/full.svg > $W/full.log 2>&1
echo "== full rc=$?" >> $S; cat $W/full.log >> $S; keep
timeout 80 $D/bam-base bench kernels --no-uvm --variants hbm,bam-resident,bam-resident-8 \
  --output $W/res-1.json > $W/res-1.log 2>&1 || echo "RESIDENT 1 FAILED" >> $S
echo "== resident 1" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/res-1.log >> $S; keep
cat $S
