#!/usr/bin/env bash
# Issue 42's layers step (cuda/, storage/, one IoConfig, one device grammar) on a
# two-GPU machine: the I/O suite's named trials on the simulated array, the Flood lie 5
# times, 512 B IOPS, the one-miss latency, and the multi-GPU trials on both GPUs.
# Binaries (cargo's test binaries gpu, cache_gpu, multi_gpu and the CLI, built with
# BAM_CUDA_ARCHS=90) come packed in .devrun/bins.tar.xz.
NAME=layers1
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
nvidia-smi -L >> "$S"
CUDA_VISIBLE_DEVICES=0 timeout 130 "$D/gpu" --nocapture 'sim ' > "$W/gpu-sim.log" 2>&1
echo "== gpu trials 'sim ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/gpu-sim.log" | cut -c1-300 >> "$S"; keep
for i in 1 2 3 4 5; do
  CUDA_VISIBLE_DEVICES=0 timeout 30 "$D/gpu" --nocapture 'sim lying controller (Flood)' > "$W/flood-$i.log" 2>&1
  echo "== flood trial $i rc=$?: $(grep -E '^test result' "$W/flood-$i.log")" >> "$S"
done; keep
CUDA_VISIBLE_DEVICES=0 iops bam l1
CUDA_VISIBLE_DEVICES=0 miss_latency bam l1
timeout 200 "$D/multi_gpu" --nocapture > "$W/multi-gpu.log" 2>&1
echo "== multi-gpu trials rc=$?" >> "$S"; grep -E "^test result|FAIL|PASS|SKIPPED" "$W/multi-gpu.log" | cut -c1-300 >> "$S"; keep
cat "$S"
