#!/usr/bin/env bash
# Call 1: fill service spare slots (bam-new) against the library before them (bam-base,
# 655e6f7), same call, alternating: cache tests (sim) of bam-new, the cache study (one-miss
# latency, hit ratios, miss throughput) twice each, 512 B IOPS, GPU tests, and the
# suite's hit and quarter variants once each.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/spares1-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/spares1.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
timeout 200 $D/bam-cache-tests-new sim > $W/cache-tests-sim.log 2>&1
echo "== cache tests sim rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)|spare" $W/cache-tests-sim.log | cut -c1-600 >> $S; keep
for k in 1 2; do for b in base new; do
  timeout 75 $D/bam-$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE $b $k FAILED rc=$?" >> $S
  echo "== cache $b $k" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b-$k.log >> $S; keep
done; done
for b in base new; do
  timeout 40 $D/bam-$b bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --threads 32768 \
    --runtime 1 --verify > $W/iops-$b.log 2>&1 || echo "IOPS $b FAILED" >> $S
  echo "== iops $b" >> $S; grep -iE "iops" $W/iops-$b.log | head -3 >> $S; keep
done
timeout 100 $D/bam-gpu-tests-new --rounds 1 --backend sim > $W/gpu-tests.log 2>&1
echo "== gpu tests rc=$?" >> $S; tail -1 $W/gpu-tests.log >> $S; keep
for b in base new; do
  timeout 100 $D/bam-$b bench kernels --no-uvm --variants hbm,zerocopy,bam-hit,bam-quarter-8 \
    --output $W/k-$b.json > $W/k-$b.log 2>&1 || echo "KERNELS $b FAILED" >> $S
  echo "== kernels $b" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/k-$b.log >> $S; keep
done
cat $S
