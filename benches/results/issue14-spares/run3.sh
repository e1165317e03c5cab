#!/usr/bin/env bash
# Call 3: the whole kernel suite (UVM included) at the spare-slots commit, with its plot,
# for the target table on the H100; then the resident variants (not in the
# default set's first groups) twice.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/spares3-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/spares3.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
timeout 420 $D/bam-new bench kernels --output $W/full.json --plot $W/full.svg > $W/full.log 2>&1
echo "== full rc=$?" >> $S; cat $W/full.log >> $S; keep
for k in 1 2; do
  timeout 80 $D/bam-new bench kernels --no-uvm --variants hbm,bam-resident,bam-resident-8 \
    --output $W/res-$k.json > $W/res-$k.log 2>&1 || echo "RESIDENT $k FAILED" >> $S
  echo "== resident $k" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/res-$k.log >> $S; keep
done
cat $S
