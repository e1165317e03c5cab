#!/usr/bin/env bash
# Call 7: where the quarter-cache slowdown of calls 4-6 comes from. bam-base (655e6f7),
# bam-basebuf (655e6f7 with the benches' I/O buffers 128 slots larger, as io_slots makes
# them; experiment binary), bam-nobuf (848999c with the benches' I/O buffers at the
# cache's slots: no room, so no spares; experiment binary), bam-new (848999c),
# alternating: the random kernels' quarter-cache runs three rounds, the cache study once.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/spares7-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/spares7.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
for k in 1 2 3; do for b in base basebuf nobuf new; do
  timeout 100 $D/bam-$b bench kernels --kernels gather,bfs --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/q-$b-$k.json > $W/q-$b-$k.log 2>&1 || echo "QUARTER $b $k FAILED" >> $S
  echo "== quarter $b $k" >> $S; grep -E "^(bfs|gather) .*bam" $W/q-$b-$k.log >> $S; keep
done; done
for b in base basebuf nobuf new; do
  timeout 75 $D/bam-$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b.json > $W/cache-$b.log 2>&1 || echo "CACHE $b FAILED" >> $S
  echo "== cache $b" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b.log >> $S; keep
done
cat $S
