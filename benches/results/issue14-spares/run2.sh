#!/usr/bin/env bash
# Call 2: cache tests of bam-new (sim, hostctl); the random kernels' quarter-cache runs,
# bam-base (655e6f7) against bam-new (spare slots), three alternating rounds (call 1 saw
# them 6 % slower once each); the cache study and streaming hits for bam-exp (bam-new plus
# an experiment: the fill service spins on an empty ring for 1,024 polls before it sleeps)
# against bam-new, alternating.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/spares2-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/spares2.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
for be in sim hostctl; do
  timeout 200 $D/bam-cache-tests-new $be > $W/cache-tests-$be.log 2>&1
  echo "== cache tests $be rc=$? ($(grep -c '^PASS' $W/cache-tests-$be.log) PASS)" >> $S
  grep -E "^(FAIL|SKIPPED)|^PASS.*spare" $W/cache-tests-$be.log | cut -c1-600 >> $S; keep
done
for k in 1 2 3; do for b in base new; do
  timeout 100 $D/bam-$b bench kernels --kernels gather,bfs --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/q-$b-$k.json > $W/q-$b-$k.log 2>&1 || echo "QUARTER $b $k FAILED" >> $S
  echo "== quarter $b $k" >> $S; grep -E "^(bfs|gather) .*(zerocopy|bam)" $W/q-$b-$k.log >> $S; keep
done; done
for k in 1 2; do for b in new exp; do
  timeout 75 $D/bam-$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE $b $k FAILED" >> $S
  echo "== cache $b $k" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b-$k.log >> $S; keep
  timeout 60 $D/bam-$b bench kernels --kernels histogram,rmw --no-uvm --variants hbm,bam-hit,bam-hit-8 \
    --output $W/h-$b-$k.json > $W/h-$b-$k.log 2>&1 || echo "HITS $b $k FAILED" >> $S
  echo "== hits $b $k" >> $S; grep -E "^(histogram|rmw) .*bam" $W/h-$b-$k.log >> $S; keep
done; done
cat $S
