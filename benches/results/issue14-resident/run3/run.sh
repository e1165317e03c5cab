#!/usr/bin/env bash
# Third call: the landed form of resident views (bam-r4, 0bb664e: a 32-bit flag tested at
# the top of access()) against the library before them (bam-base, 77f407a): the kernel
# suite and the cache study alternating, two rounds; 512 B random-read IOPS; the cache
# and GPU tests of 0bb664e (sim backend); the whole suite with its plot.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/res3-$$; mkdir -p $O $W
keep() { tar czf $O/resident3.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
S=$W/summary.log
use() { [ $1 = bam-base ] && export BAM_COMMIT=77f407a || unset BAM_COMMIT; }
for k in 1 2; do for b in bam-base bam-r4; do
  use $b; V=hbm,zerocopy,bam-hit,bam-hit-8
  [ $b = bam-r4 ] && V=$V,bam-resident,bam-resident-8
  timeout 100 .devrun/$b bench kernels --no-uvm --variants $V --output $W/k-$b-$k.json > $W/k-$b-$k.log 2>&1 || echo "KERNELS $b $k FAILED" >> $S
  echo "== kernels $b $k" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) .*bam" $W/k-$b-$k.log >> $S; keep
  timeout 60 .devrun/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE BENCH $b $k FAILED" >> $S
  echo "== cache $b $k" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b-$k.log >> $S; keep
done; done
for b in bam-base bam-r4; do
  use $b
  timeout 60 .devrun/$b -q bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --threads 32768 --runtime 1 \
    --verify --output $W/iops-$b.json > $W/iops-$b.log 2>&1 || echo "IOPS $b FAILED" >> $S
  echo "== iops $b" >> $S; tail -3 $W/iops-$b.log >> $S; keep
done
unset BAM_COMMIT
timeout 120 .devrun/bam-cache-tests-r sim > $W/cache-tests-sim.log 2>&1; echo "== cache tests sim rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)|^PASS.*resident" $W/cache-tests-sim.log | cut -c1-300 >> $S; keep
timeout 120 .devrun/bam-gpu-tests-r --rounds 1 --backend sim > $W/gpu-tests-sim.log 2>&1; echo "== gpu tests sim rc=$?" >> $S
tail -1 $W/gpu-tests-sim.log >> $S; keep
timeout 170 .devrun/bam-r4 bench kernels --output $W/full.json --plot $W/full.svg > $W/full.log 2>&1; echo "== full suite rc=$?" >> $S
grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/full.log >> $S; keep
cat $S
