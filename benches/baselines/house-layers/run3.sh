#!/usr/bin/env bash
# Issue 42's layers step with the CUDA split (the simulated controller, the cache's fill
# service and flush, the benchmark kernel as named steps), the named bam_sim_control
# fields and the new defaults (no pattern unless asked, the cache's queues from
# io_config): on the same kind of machine as calls 1 and 2, every suite again, the
# Flood lie 5 times, 512 B IOPS (before/after the split on the same kind), the one-miss
# latency, the multi-GPU trials (the shared controller variant), and the users' scenario.
NAME=layers3
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
nvidia-smi -L >> "$S"
export CUDA_VISIBLE_DEVICES=0
CUDA_VISIBLE_DEVICES=0 iops bam l3
for b in sim hostctl; do
  timeout 120 "$D/gpu" --nocapture "$b " > "$W/gpu-$b.log" 2>&1
  echo "== gpu trials '$b ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/gpu-$b.log" | cut -c1-300 >> "$S"; keep
  timeout 120 "$D/cache_gpu" --nocapture "$b " > "$W/cache-$b.log" 2>&1
  echo "== cache trials '$b ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/cache-$b.log" | cut -c1-300 >> "$S"; keep
done
for i in 1 2 3 4 5; do
  timeout 30 "$D/gpu" --nocapture 'sim lying controller (Flood)' > "$W/flood-$i.log" 2>&1
  echo "== flood trial $i rc=$?: $(grep -E '^test result' "$W/flood-$i.log")" >> "$S"
done; keep
miss_latency bam l3
CUDA_VISIBLE_DEVICES=0 iops bam l3b
timeout 100 "$D/bam-cache-tests" --scenario 1.07G 2 > "$W/scenario.log" 2>&1
echo "== scenario 1.07G x 2 rc=$?" >> "$S"; tail -4 "$W/scenario.log" | cut -c1-300 >> "$S"; keep
unset CUDA_VISIBLE_DEVICES
timeout 120 "$D/multi_gpu" --nocapture > "$W/multi-gpu.log" 2>&1
echo "== multi-gpu trials rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/multi-gpu.log" | cut -c1-300 >> "$S"; keep
cat "$S"
