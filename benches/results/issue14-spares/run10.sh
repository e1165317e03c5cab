#!/usr/bin/env bash
# Call 10: is the keeper form's quarter-cache slowdown (call 9) its code or its refills?
# bam-base (655e6f7), bam-B (call 8's experiment: spare use in serve_fills only),
# bam-new (the keeper form, 6139745), bam-k2nospare (the same build with
# spare_warps 0: the keeper's code runs, no spare is ever taken; experiment binary).
# Alternating: the random kernels' quarter-cache runs twice, the cache study once.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/spares10-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/spares10.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
for k in 1 2; do for b in base B new k2nospare; do
  timeout 100 $D/bam-$b bench kernels --kernels gather,bfs --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/q-$b-$k.json > $W/q-$b-$k.log 2>&1 || echo "QUARTER $b $k FAILED" >> $S
  echo "== quarter $b $k" >> $S; grep -E "^(bfs|gather) .*bam" $W/q-$b-$k.log >> $S; keep
done; done
for b in base B new k2nospare; do
  timeout 75 $D/bam-$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b.json > $W/cache-$b.log 2>&1 || echo "CACHE $b FAILED" >> $S
  echo "== cache $b" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b.log >> $S; keep
done
cat $S
