#!/usr/bin/env bash
# `run.sh N`: call N of a change to the simulated controller (bam-new) against the library
# before it (bam-base, 695cac2 = 655e6f7 in crates/ and cuda/), same call, alternating:
# cache tests (sim) and GPU tests of bam-new, the cache study (one-miss latency and its
# phases) three times each, 512 B and 4 KiB IOPS, and the suite's quarter-cache variants
# (host-media fills) once each. Call 1: bam-new = 84f1abb (CID check after the data
# loads, staged through shared memory); call 2: 42cf40c (L2 prefetch of the first
# segment before the CID check). README.md has the results.
set -u
export CUDA_MODULE_LOADING=EAGER
N=${1:?call number}
O=${OUT:-/tmp/out}; W=/tmp/simov$N-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/simov$N.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
timeout 200 $D/bam-cache-tests-new sim > $W/cache-tests-sim.log 2>&1
echo "== cache tests sim rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)" $W/cache-tests-sim.log | cut -c1-600 >> $S; keep
timeout 100 $D/bam-gpu-tests-new --rounds 1 --backend sim > $W/gpu-tests.log 2>&1
echo "== gpu tests rc=$?" >> $S; tail -1 $W/gpu-tests.log >> $S; keep
for k in 1 2 3; do for b in base new; do
  timeout 75 $D/bam-$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE $b $k FAILED rc=$?" >> $S
  echo "== cache $b $k" >> $S; grep -E "latency" $W/cache-$b-$k.log >> $S; keep
done; done
for bs in 512 4k; do for b in base new; do
  timeout 40 $D/bam-$b bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs $bs --threads 32768 \
    --runtime 1 --verify > $W/iops-$bs-$b.log 2>&1 || echo "IOPS $bs $b FAILED" >> $S
  echo "== iops $bs $b" >> $S; grep -iE "iops" $W/iops-$bs-$b.log | head -3 >> $S; keep
done; done
for b in base new; do
  timeout 100 $D/bam-$b bench kernels --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/k-$b.json > $W/k-$b.log 2>&1 || echo "KERNELS $b FAILED" >> $S
  echo "== kernels $b" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/k-$b.log >> $S; keep
done
cat $S
