#!/usr/bin/env bash
# Verification of the cache and the ported kernels on the device (binaries in .devrun from
# `scripts/gpu-run.sh build`; .devrun/bam-base: `bam` at f159e6c, the baseline of the
# raw-I/O no-regression A/B; .devrun/bam-prev: optional, `bam` of the commit before the
# change under test, for a same-session A/B of the kernel suite's hit and quarter-cache
# runs).
# STEPS picks what runs (default: all of them, which takes longer than one device call):
#   tests    cache correctness suite (sim) and the GPU I/O tests
#   kernels  the whole kernel suite (UVM included), JSON + plot
#   ab       the suite without UVM, alternating .devrun/bam-prev and .devrun/bam
#   cache    the cache study (hits, misses, one-miss latency)
#   iops     512 B ideal IOPS of bam-base and bam, alternating
# Results are tarred into $OUT/v14-<steps>.tgz (the device tool brings back few files).
set -u
export CUDA_MODULE_LOADING=EAGER
STEPS=${STEPS:-tests kernels ab cache iops}
O=${OUT:-/tmp/out}; W=/tmp/v14; mkdir -p $O $W
export BAM_COMMIT="$(tr '\n' ' ' < .devrun/commit)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
has() { [[ " $STEPS " == *" $1 "* ]]; }
# The results so far, tarred after every step: a call cut by its time limit still brings
# back what it finished.
save() { tar czf $O/v14-${STEPS// /-}.tgz -C $W .; }
if has tests; then
  timeout 300 .devrun/bam-cache-tests sim > $W/cache-tests.log 2>&1; echo "cache tests rc=$?" >> $W/summary.log
  grep -E "^(FAIL|FATAL|SKIPPED|all cache)|passed" $W/cache-tests.log >> $W/summary.log
  timeout 200 .devrun/bam-gpu-tests --rounds 1 --backend sim > $W/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> $W/summary.log
  tail -1 $W/gpu-tests.log >> $W/summary.log
fi
save
if has kernels; then
  timeout 300 .devrun/bam bench kernels --output $W/kernels.json --plot $W/kernels.svg > $W/kernels.log 2>&1 || echo "KERNELS FAILED" >> $W/summary.log
  grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/kernels.log >> $W/summary.log
fi
save
if has ab && [ -x .devrun/bam-prev ]; then
  for k in 1 2; do for b in bam-prev bam; do
    timeout 200 .devrun/$b bench kernels --no-uvm --variants hbm,zerocopy,bam-hit,bam-quarter \
      --output $W/ab-$b-$k.json > $W/ab-$b-$k.log 2>&1 || echo "AB $b $k FAILED" >> $W/summary.log
    echo "== ab $b run $k" >> $W/summary.log
    grep -E "^(spmv|bfs|gather|histogram|rmw) .*bam-(hit|quarter) " $W/ab-$b-$k.log >> $W/summary.log
  done; done
fi
save
if has cache; then
  for b in bam-prev bam; do
    [ -x .devrun/$b ] || continue
    timeout 200 .devrun/$b bench cache --hit-size 256M --miss-size 256M --threads 65536,262144 \
      --output $W/cache-bench-$b.json > $W/cache-bench-$b.log 2>&1 || echo "CACHE BENCH $b FAILED" >> $W/summary.log
    echo "== cache $b" >> $W/summary.log
    grep -E "latency|hits|misses" $W/cache-bench-$b.log | head -20 >> $W/summary.log
  done
fi
save
if has iops; then
  for k in 1 2 3; do for b in bam-base bam; do
    timeout 60 .devrun/$b --json bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 \
      --threads 131072 --runtime 0.5 --output $W/ideal-$b-$k.json > /dev/null 2>&1 || echo "IDEAL $b FAILED" >> $W/summary.log
  done; done
fi
save
cat $W/summary.log
