#!/usr/bin/env bash
# Repeat of the cache study, bam-new (99e5d48 library) against bam-v3 (214bda1), alternating.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/ab5-$$; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
S=$W/summary.log
for k in 1 2; do for b in bam-new bam-v3; do
  timeout 100 .devrun/$b bench cache --hit-size 256M --miss-size 256M --threads 65536,262144 \
    --output $W/cache-bench-$b-$k.json > $W/cache-bench-$b-$k.log 2>&1 || echo "CACHE BENCH $b FAILED" >> $S
  echo "== cache $b $k" >> $S
  grep -E "^(hit|miss)|latency" $W/cache-bench-$b-$k.log >> $S
done; done
tar czf $O/ab5.tgz -C $W .
cat $S
