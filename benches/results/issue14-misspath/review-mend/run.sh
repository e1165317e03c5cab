#!/usr/bin/env bash
# Review mend: push_tail's ring-first block shared by the lone and group forms (bam-r)
# against 916c458 (bam-v5) and 99e5d48 (bam-new).
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/rv2-$$; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
timeout 200 .devrun/bam-cache-tests-r sim > $W/cache-tests.log 2>&1; echo "cache tests rc=$?" >> $S
grep -E "^(FAIL|FATAL|SKIPPED|all cache)|passed" $W/cache-tests.log | tail -3 >> $S
timeout 150 .devrun/bam-gpu-tests-r --rounds 1 --backend sim > $W/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> $S
tail -1 $W/gpu-tests.log >> $S
for k in 1 2; do for b in bam-new bam-v5 bam-r; do
  timeout 60 .devrun/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 --output $W/lat-$b-$k.json > $W/lat-$b-$k.log 2>&1 || echo "LAT $b FAILED" >> $S
  echo "== lat $b $k: $(grep -E '^miss latency|steps' $W/lat-$b-$k.log | tr '\n' ' ')" >> $S
  timeout 60 .devrun/$b --json bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 \
    --threads 131072 --runtime 0.5 --output $W/ideal-$b-$k.json > /dev/null 2>&1 || echo "IDEAL $b FAILED" >> $S
  echo "== iops $b $k: $(python3 -c "import json;d=json.load(open('$W/ideal-$b-$k.json'));print(d['jobs'][0]['iops']/1e6, d['jobs'][0]['errors'])" 2>&1 | head -c 200)" >> $S
done; done
cp $W/* $O/
cat $S
