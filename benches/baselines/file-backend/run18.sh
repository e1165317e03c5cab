#!/usr/bin/env bash
# Eighteenth run, on two GPUs, after service threads became per GPU: the multi-GPU
# trials on files and `bam bench --gpus 0,1` 1 MiB reads with workers=8 (16 threads).
NAME=file18
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials multi_gpu "multi-gpu file " mgpu-file 150
trials multi_gpu "multi-gpu file-direct " mgpu-file-direct 150
head -c 4G /dev/zero > "$F/d.bin"
timeout 60 "$D/bam" bench --device "file:$F/d.bin,workers=8" --gpus 0,1 --rw read --bs 1M --threads 1024 --queues 64 --runtime 3 > "$W/g2-w8.log" 2>&1
echo "== bench --gpus 0,1 1M workers=8 per GPU rc=$?" >> "$S"; grep -iE "iops|error" "$W/g2-w8.log" | head -3 | cut -c1-300 >> "$S"; keep
rm -rf "$F"
cat "$S"
