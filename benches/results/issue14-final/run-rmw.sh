#!/usr/bin/env bash
# The quarter-cache runs of the streaming kernels that write and read (rmw, histogram),
# f36ecfd (.devrun/bam) against 204b40b (.devrun/bam-204b40b), same call, alternating,
# three times each: rmw's quarter-cache run took 15.1-15.5 ms in the full run of f36ecfd
# against 14.0-14.1 ms in the full run of 204b40b.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/final-rmw-$$; mkdir -p $O $W
D=.devrun
S=$W/summary.log
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt; cat $W/gpu.txt >> $S
for k in 1 2 3; do for b in bam bam-204b40b; do
  timeout 90 $D/$b bench kernels --kernels rmw,histogram --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/k-$b-$k.json > $W/k-$b-$k.log 2>&1 || echo "KERNELS $b $k FAILED" >> $S
  echo "== $b $k" >> $S; grep -E "^(histogram|rmw) " $W/k-$b-$k.log >> $S
  tar czf $O/final-rmw.tgz -C $W .
done; done
cat $S
