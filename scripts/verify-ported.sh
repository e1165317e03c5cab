#!/usr/bin/env bash
# Issue 14 verification on the device (binaries in .devrun from `scripts/gpu-run.sh build`;
# .devrun/bam-base: `bam` at f159e6c, before this round of issue-14 work, for the raw-I/O
# no-regression A/B): cache and GPU correctness suites, the whole kernel suite (UVM
# included), the cache study (one-miss latency), 512 B ideal IOPS of both binaries,
# alternating. Results tarred into $OUT (the device tool brings back few files).
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/v14; mkdir -p $O $W
export BAM_COMMIT="$(tr '\n' ' ' < .devrun/commit)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
timeout 300 .devrun/bam-cache-tests sim > $W/cache-tests.log 2>&1; echo "cache tests rc=$?" >> $W/summary.log
grep -E "^(FAIL|FATAL|all cache)" $W/cache-tests.log >> $W/summary.log
timeout 200 .devrun/bam-gpu-tests --rounds 1 --backend sim > $W/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> $W/summary.log
tail -1 $W/gpu-tests.log >> $W/summary.log
timeout 300 .devrun/bam bench kernels --output $W/kernels.json --plot $W/kernels.svg > $W/kernels.log 2>&1 || echo "KERNELS FAILED" >> $W/summary.log
grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/kernels.log >> $W/summary.log
timeout 200 .devrun/bam --json bench cache --hit-size 256M --miss-size 256M --threads 65536,262144 \
    --output $W/cache-bench.json > $W/cache-bench.log 2>&1 || echo "CACHE BENCH FAILED" >> $W/summary.log
for k in 1 2 3; do for b in bam-base bam; do
  timeout 60 .devrun/$b --json bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 \
    --threads 131072 --runtime 0.5 --output $W/ideal-$b-$k.json > /dev/null 2>&1 || echo "IDEAL $b FAILED" >> $W/summary.log
done; done
tar czf $O/v14.tgz -C $W .
cat $W/summary.log
