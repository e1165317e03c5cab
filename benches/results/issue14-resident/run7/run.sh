#!/usr/bin/env bash
# Seventh call: resident views in one run of slots (bam-new, ef5cd1f) against the landed
# table-only form (bam-prev, 083b9f9): cache tests of ef5cd1f (sim, hostctl), the suite's
# all-hits variants alternating (two rounds), the cache study (miss latency: the fill
# service changed), GPU tests.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/res7-$$; mkdir -p $O $W
keep() { tar czf $O/resident7.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
for be in sim hostctl; do
  timeout 150 .devrun/bam-cache-tests-r $be > $W/cache-tests-$be.log 2>&1
  echo "== cache tests $be rc=$? ($(grep -c '^PASS' $W/cache-tests-$be.log) PASS)" >> $S
  grep -E "^(FAIL|SKIPPED)|^PASS.*resident view" $W/cache-tests-$be.log | cut -c1-400 >> $S; keep
done
for k in 1 2; do for b in bam-prev bam-new; do
  timeout 100 .devrun/$b bench kernels --no-uvm --variants hbm,bam-hit,bam-hit-8,bam-resident,bam-resident-8 \
    --output $W/k-$b-$k.json > $W/k-$b-$k.log 2>&1 || echo "KERNELS $b $k FAILED" >> $S
  echo "== kernels $b $k" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) .*bam" $W/k-$b-$k.log >> $S; keep
done; done
for b in bam-prev bam-new; do
  timeout 60 .devrun/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 --output $W/cache-$b.json > $W/cache-$b.log 2>&1 || echo "CACHE $b FAILED" >> $S
  echo "== cache $b" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b.log >> $S; keep
done
timeout 100 .devrun/bam-gpu-tests-r --rounds 1 --backend sim > $W/gpu-tests.log 2>&1; echo "== gpu tests rc=$?" >> $S; tail -1 $W/gpu-tests.log >> $S; keep
grep -h "resident" $W/k-bam-new-1.json | head -0
cat $S
