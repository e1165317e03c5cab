#!/usr/bin/env bash
# Seventeenth run, on two GPUs: why both GPUs read 1 MiB pieces of one page-cached file
# slower than one (run 14) — service threads (8, 16, 32 for the same 128 queue pairs)
# against one array per GPU (--sharing private: a service and staging each).
NAME=file17
source benches/baselines/device-prelude.sh
use_bins
data_dir
head -c 4G /dev/zero > "$F/d.bin"
for w in 8 16 32; do
  timeout 60 "$D/bam" bench --device "file:$F/d.bin,workers=$w" --gpus 0,1 --rw read --bs 1M --threads 1024 --queues 64 --runtime 3 > "$W/g2-w$w.log" 2>&1
  echo "== bench --gpus 0,1 1M workers=$w rc=$?" >> "$S"; grep -iE "iops|error" "$W/g2-w$w.log" | head -3 | cut -c1-300 >> "$S"; keep
done
timeout 60 "$D/bam" bench --device "file:$F/d.bin,workers=8" --gpus 0,1 --sharing private --rw read --bs 1M --threads 1024 --queues 64 --runtime 3 > "$W/g2-private.log" 2>&1
echo "== bench --gpus 0,1 --sharing private 1M workers=8 each rc=$?" >> "$S"; grep -iE "iops|error" "$W/g2-private.log" | head -3 | cut -c1-300 >> "$S"; keep
numactl -H > "$W/numa.txt" 2>&1 || lscpu | grep -i numa > "$W/numa.txt"; head -5 "$W/numa.txt" >> "$S"
nvidia-smi topo -m >> "$S" 2>&1
rm -rf "$F"
cat "$S"
