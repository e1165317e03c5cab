#!/usr/bin/env bash
# Ninth run, at the session's last commit: the GPU I/O and cache trials on files (page
# cache and O_DIRECT), the simulated array's I/O trials and 512 B IOPS after the shared
# control-block handshake (PersistentKernel::start_controlled), and `bam bench cache` on
# a file.
NAME=file9
source benches/baselines/device-prelude.sh
use_bins
data_dir
iops bam f9
trials gpu "sim " gpu-sim 120
trials gpu "file " gpu-file 100
trials gpu "file-direct " gpu-file-direct 100
trials cache_gpu "file " cache-file 120
trials cache_gpu "file-direct " cache-file-direct 120
timeout 90 "$D/bam" bench cache --device "file:$F/c.bin,workers=8" --hit-size 256M --miss-size 256M --threads 65536 \
  --output "$W/cache-file.json" > "$W/cache-file.log" 2>&1
echo "== bench cache file rc=$?" >> "$S"; grep -E "^(hit|miss)|latency|rror" "$W/cache-file.log" | head -12 >> "$S"; keep
rm -rf "$F"
cat "$S"
