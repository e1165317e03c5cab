#!/usr/bin/env bash
# Fourteenth run, on two GPUs: the multi-GPU suite on files (page cache and O_DIRECT)
# after FileArray::on_gpus (one forwarder per GPU, one service for all), the simulated
# array's as the control; `bam bench --gpus 0,1` on a file; the cache trial that failed
# once in run 13, five times.
NAME=file14
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials multi_gpu "multi-gpu file " mgpu-file 150
trials multi_gpu "multi-gpu file-direct " mgpu-file-direct 150
trials multi_gpu "multi-gpu sim " mgpu-sim 120
timeout 60 "$D/bam" bench --device "file:$F/d.bin,size=4G,workers=8" --gpus 0,1 --rw randread --bs 4K --threads 8192 --queues 32 --runtime 3 > "$W/bench-2gpu-4k.log" 2>&1
echo "== bench --gpus 0,1 4K rc=$?" >> "$S"; grep -iE "iops|error|gpu" "$W/bench-2gpu-4k.log" | head -6 | cut -c1-300 >> "$S"; keep
timeout 60 "$D/bam" bench --device "file:$F/d.bin,workers=8" --gpus 0,1 --rw read --bs 1M --threads 1024 --queues 64 --runtime 3 > "$W/bench-2gpu-1m.log" 2>&1
echo "== bench --gpus 0,1 1M rc=$?" >> "$S"; grep -iE "iops|error|gpu" "$W/bench-2gpu-1m.log" | head -6 | cut -c1-300 >> "$S"; keep
for i in 1 2 3 4 5; do
  trials cache_gpu "file-direct spare slots" spare-$i 60
done
rm -rf "$F"
cat "$S"
