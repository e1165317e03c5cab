#!/usr/bin/env bash
# Run 20: polling against sleeping for the service threads. Random 4 KiB reads of a
# page-cached 4 GiB file into GPU memory with the default idle wait (spin 2000 empty
# loops, then sleep 20 us between looks) and with `spin` (never sleep), alternating, at
# one warp of GPU threads (latency-bound), 1024 threads and 8192 threads (run 13's
# throughput configuration, with the threads' `top`).
NAME=file20
source benches/baselines/device-prelude.sh
use_bins
data_dir
file_bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 2 --verify
for r in 1 2; do
  for s in "" ",spin"; do
    t=${s:+spin}; t=${t:-sleep}
    file_bench t32-$t-$r "file:$F/d.bin,workers=8$s" --rw randread --bs 4K --threads 32 --queues 8 --runtime 3
    file_bench t1k-$t-$r "file:$F/d.bin,workers=8$s" --rw randread --bs 4K --threads 1024 --queues 32 --runtime 3
    TOP=1 file_bench t8k-$t-$r "file:$F/d.bin,workers=8$s" --rw randread --bs 4K --threads 8192 --queues 32 --runtime 3
  done
done
rm -rf "$F"
cat "$S"
