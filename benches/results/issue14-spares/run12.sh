#!/usr/bin/env bash
# Call 12: the landed library's (655e6f7) cache tests on both backends and GPU tests on
# the H100, and a second run of the resident variants.
set -u
export CUDA_MODULE_LOADING=EAGER
export BAM_COMMIT=655e6f7
O=${OUT:-/tmp/out}; W=/tmp/tests12-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/tests12.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
for be in sim hostctl; do
  timeout 200 $D/bam-cache-tests-base $be > $W/cache-tests-$be.log 2>&1
  echo "== cache tests $be rc=$? ($(grep -c '^PASS' $W/cache-tests-$be.log) PASS)" >> $S
  grep -E "^(FAIL|SKIPPED)" $W/cache-tests-$be.log | cut -c1-400 >> $S; keep
done
timeout 100 $D/bam-gpu-tests-base --rounds 1 --backend sim > $W/gpu-tests.log 2>&1; echo "== gpu tests rc=$?" >> $S; tail -1 $W/gpu-tests.log >> $S; keep
timeout 80 $D/bam-base bench kernels --no-uvm --variants hbm,bam-resident,bam-resident-8 \
  --output $W/res-2.json > $W/res-2.log 2>&1 || echo "RESIDENT 2 FAILED" >> $S
echo "== resident 2" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/res-2.log >> $S; keep
cat $S
