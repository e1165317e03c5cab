#!/usr/bin/env bash
# Call 9: the keeper-warp form with the serving loop as before spares (bam-new, HEAD of
# this call) against bam-base (655e6f7) and bam-B (the experiment binary of call 8: spares
# taken in serve_fills, never refilled: the serving code alone).
# Alternating: the random kernels' quarter-cache runs twice, the cache study once; then
# the cache tests of bam-new.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/spares9-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/spares9.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
for k in 1 2; do for b in base B new; do
  timeout 100 $D/bam-$b bench kernels --kernels gather,bfs --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/q-$b-$k.json > $W/q-$b-$k.log 2>&1 || echo "QUARTER $b $k FAILED" >> $S
  echo "== quarter $b $k" >> $S; grep -E "^(bfs|gather) .*bam" $W/q-$b-$k.log >> $S; keep
done; done
for b in base B new; do
  timeout 75 $D/bam-$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b.json > $W/cache-$b.log 2>&1 || echo "CACHE $b FAILED" >> $S
  echo "== cache $b" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b.log >> $S; keep
done
timeout 200 $D/bam-cache-tests-new sim > $W/cache-tests-sim.log 2>&1
echo "== cache tests sim rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)|^PASS.*spare" $W/cache-tests-sim.log | cut -c1-600 >> $S; keep

cat $S
