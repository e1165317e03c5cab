#!/usr/bin/env bash
# Call 8: which part of the spare code slows the fill service, and the keeper-warp form.
# bam-base (655e6f7); bam-A (848999c with serve_fills as before spares: the refill code
# in the service loop, spares never used; experiment binary); bam-B (848999c with the
# service loop and take_requests as before spares: spare use in serve_fills only, never
# refilled; experiment binary); bam-new (the keeper-warp form, HEAD of this call).
# Alternating: the random kernels' quarter-cache runs twice, the cache study once; then
# the cache tests of bam-new.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/spares8-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/spares8.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
for k in 1 2; do for b in base A B new; do
  timeout 100 $D/bam-$b bench kernels --kernels gather,bfs --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/q-$b-$k.json > $W/q-$b-$k.log 2>&1 || echo "QUARTER $b $k FAILED" >> $S
  echo "== quarter $b $k" >> $S; grep -E "^(bfs|gather) .*bam" $W/q-$b-$k.log >> $S; keep
done; done
for b in base A B new; do
  timeout 75 $D/bam-$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b.json > $W/cache-$b.log 2>&1 || echo "CACHE $b FAILED" >> $S
  echo "== cache $b" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b.log >> $S; keep
done
timeout 200 $D/bam-cache-tests-new sim > $W/cache-tests-sim.log 2>&1
echo "== cache tests sim rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)|^PASS.*spare" $W/cache-tests-sim.log | cut -c1-600 >> $S; keep

cat $S
