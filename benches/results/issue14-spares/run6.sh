#!/usr/bin/env bash
# Call 6: the spare in a shared-memory table, nothing carried through the service loop (bam-new,
# HEAD of this call), against the library before spares (bam-base, 655e6f7), alternating:
# the random kernels' quarter-cache runs three rounds, the cache study twice, then the
# cache tests (sim) of bam-new; bam-nospare is bam-new built with spare_warps 0 (an experiment binary, not committed).
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/spares6-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/spares6.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
for k in 1 2 3; do for b in base new nospare; do
  timeout 100 $D/bam-$b bench kernels --kernels gather,bfs --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/q-$b-$k.json > $W/q-$b-$k.log 2>&1 || echo "QUARTER $b $k FAILED" >> $S
  echo "== quarter $b $k" >> $S; grep -E "^(bfs|gather) .*(zerocopy|bam)" $W/q-$b-$k.log >> $S; keep
done; done
for k in 1 2; do for b in base new nospare; do
  timeout 75 $D/bam-$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE $b $k FAILED" >> $S
  echo "== cache $b $k" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b-$k.log >> $S; keep
done; done
timeout 200 $D/bam-cache-tests-new sim > $W/cache-tests-sim.log 2>&1
echo "== cache tests sim rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)|^PASS.*spare" $W/cache-tests-sim.log | cut -c1-600 >> $S; keep
timeout 100 $D/bam-gpu-tests-new --rounds 1 --backend sim > $W/gpu-tests.log 2>&1; echo "== gpu tests rc=$?" >> $S; tail -1 $W/gpu-tests.log >> $S; keep
cat $S
