#!/usr/bin/env bash
# Second call: the resident path tested once at the top of access() (bam-r2, 32ec291)
# against the library before resident views (bam-base, 77f407a) on the ordinary paths;
# cache study base/r2; cache tests of r2 (sim); then bam-r3 (32ec291 built with
# BAM_RESIDENT_PREFETCH=1: an L1 prefetch of the next grid-stride access's slot-table
# entry). (A first try of this call, which also ran the cache tests on the hostctl
# backend, lost the machine: "stopped answering"; nothing came back.)
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/res2-$$; mkdir -p $O $W
keep() { tar czf $O/resident2.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
S=$W/summary.log
kern() { local b=$1 k=$2 V=$3
  [ $b = bam-base ] && export BAM_COMMIT=77f407a || unset BAM_COMMIT
  timeout 100 .devrun/$b bench kernels --no-uvm --variants $V --output $W/k-$b-$k.json > $W/k-$b-$k.log 2>&1 || echo "KERNELS $b $k FAILED" >> $S
  echo "== kernels $b $k" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) .*bam" $W/k-$b-$k.log >> $S; keep; }
kern bam-base 1 hbm,zerocopy,bam-hit,bam-hit-8
kern bam-r2 1 hbm,zerocopy,bam-hit,bam-hit-8,bam-resident,bam-resident-8
for b in bam-base bam-r2; do
  [ $b = bam-base ] && export BAM_COMMIT=77f407a || unset BAM_COMMIT
  timeout 60 .devrun/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b.json > $W/cache-$b.log 2>&1 || echo "CACHE BENCH $b FAILED" >> $S
  echo "== cache $b" >> $S; grep -E "^(hit|miss)|latency" $W/cache-$b.log >> $S; keep
done
unset BAM_COMMIT
timeout 120 .devrun/bam-cache-tests-r sim > $W/cache-tests-sim.log 2>&1; echo "== cache tests sim rc=$?" >> $S
grep -cE "^PASS" $W/cache-tests-sim.log >> $S; grep -E "^(FAIL|SKIPPED)|resident" $W/cache-tests-sim.log | cut -c1-200 >> $S; keep
kern bam-r3 1 hbm,zerocopy,bam-hit,bam-hit-8,bam-resident,bam-resident-8
kern bam-base 2 hbm,zerocopy,bam-hit,bam-hit-8
kern bam-r2 2 hbm,zerocopy,bam-hit,bam-hit-8,bam-resident,bam-resident-8
cat $S
