#!/usr/bin/env bash
# Review check: 24035e0 (.devrun/bam: the depth mask unconditional again, only the scope
# flag depends on SHARED) against fd55d54 (.devrun/bam-fd55d54), same call, alternating:
# cache tests (sim) and GPU tests of 24035e0, 512 B IOPS (the command) and the
# cache study's one-miss latency twice each.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/review-$$; mkdir -p $O $W
D=.devrun
S=$W/summary.log
keep() { tar czf $O/review.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt; cat $W/gpu.txt >> $S
timeout 200 $D/bam-cache-tests sim > $W/cache-tests-sim.log 2>&1
echo "== cache tests sim rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)" $W/cache-tests-sim.log | cut -c1-400 >> $S
timeout 100 $D/bam-gpu-tests --rounds 1 --backend sim > $W/gpu-tests.log 2>&1
echo "== gpu tests rc=$?" >> $S; tail -1 $W/gpu-tests.log >> $S; keep
for k in 1 2; do for b in bam bam-fd55d54; do
  timeout 40 $D/$b bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 --threads 131072 \
    --runtime 0.5 > $W/iops-$b-$k.log 2>&1 || echo "IOPS $b FAILED" >> $S
  echo "== iops 512 $b $k" >> $S; grep -iE "iops" $W/iops-$b-$k.log | head -1 >> $S
  timeout 75 $D/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE $b FAILED" >> $S
  echo "== cache $b $k" >> $S; grep -E "latency" $W/cache-$b-$k.log >> $S; keep
done; done
cat $S
