#!/usr/bin/env bash
# The closing record of issue 14 on the H100: `run.sh suite` runs the whole kernel suite
# with UVM and its plot; `run.sh rest` the cache tests on both backends, the GPU tests,
# the cache study (one-miss latency, hit and miss ratios) twice and the 512 B IOPS check.
# Binaries in .devrun/ (bam, bam-cache-tests, bam-gpu-tests), built at the commit named
# in README.md.
set -u
export CUDA_MODULE_LOADING=EAGER
PART=${1:?suite or rest}
O=${OUT:-/tmp/out}; W=/tmp/final-$PART-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/final-$PART.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
if [ "$PART" = suite ]; then
  timeout 560 $D/bam bench kernels --output $W/full.json --plot $W/full.svg > $W/full.log 2>&1
  echo "== full rc=$?" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/full.log >> $S; keep
else
  for be in sim hostctl; do
    timeout 200 $D/bam-cache-tests $be > $W/cache-tests-$be.log 2>&1
    echo "== cache tests $be rc=$? ($(grep -c '^PASS' $W/cache-tests-$be.log) PASS)" >> $S
    grep -E "^(FAIL|SKIPPED)" $W/cache-tests-$be.log | cut -c1-400 >> $S; keep
  done
  timeout 100 $D/bam-gpu-tests --rounds 1 --backend sim > $W/gpu-tests.log 2>&1
  echo "== gpu tests rc=$?" >> $S; tail -1 $W/gpu-tests.log >> $S; keep
  for k in 1 2; do
    timeout 75 $D/bam bench cache --hit-size 256M --miss-size 64M --threads 65536 \
      --output $W/cache-$k.json > $W/cache-$k.log 2>&1 || echo "CACHE $k FAILED" >> $S
    echo "== cache $k" >> $S; grep -E "latency" $W/cache-$k.log >> $S; keep
  done
  timeout 40 $D/bam bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --threads 32768 \
    --runtime 1 --verify > $W/iops-512.log 2>&1 || echo "IOPS FAILED" >> $S
  echo "== iops 512" >> $S; grep -iE "iops" $W/iops-512.log | head -3 >> $S; keep
fi
cat $S
