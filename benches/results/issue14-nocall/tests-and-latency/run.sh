#!/usr/bin/env bash
# Call 1: tests with the new library (-x), then miss latency and 512 B IOPS, bam-r (215a81a) and bam-x, alternating.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/t1x-$$; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
timeout 220 .devrun/bam-cache-tests-x sim > $W/cache-tests.log 2>&1; echo "cache tests rc=$?" >> $S
grep -E "^(FAIL|FATAL|SKIPPED|all cache)|passed|1536" $W/cache-tests.log | tail -6 >> $S
timeout 150 .devrun/bam-gpu-tests-x --rounds 1 --backend sim > $W/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> $S
tail -1 $W/gpu-tests.log >> $S
for k in 1 2; do for b in bam-r bam-x; do
  timeout 60 .devrun/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 --output $W/lat-$b-$k.json > $W/lat-$b-$k.log 2>&1 || echo "LAT $b FAILED" >> $S
  echo "== lat $b $k: $(grep -E '^miss latency|steps' $W/lat-$b-$k.log | tr '\n' ' ')" >> $S
  timeout 60 .devrun/$b --json bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 \
    --threads 131072 --runtime 0.5 --output $W/ideal-$b-$k.json > /dev/null 2>&1 || echo "IDEAL $b FAILED" >> $S
  echo "== iops $b $k: $(python3 -c "import json;d=json.load(open('$W/ideal-$b-$k.json'));print(d['jobs'][0]['iops']/1e6, d['jobs'][0]['errors'])" 2>&1 | head -c 200)" >> $S
done; done
tar czf $O/t1.tgz -C $W .
cat $S
