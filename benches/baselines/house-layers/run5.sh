#!/usr/bin/env bash
# The step as it lands, on an H100 (the kind of the documented figures): 512 B IOPS, the
# I/O and cache trials on both backends, the one-miss latency, the users' scenario and
# the random_access example (storage from a device string) on sim and hostctl.
NAME=layers5
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
iops bam l5
for b in sim hostctl; do
  timeout 120 "$D/gpu" --nocapture "$b " > "$W/gpu-$b.log" 2>&1
  echo "== gpu trials '$b ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/gpu-$b.log" | cut -c1-300 >> "$S"; keep
  timeout 120 "$D/cache_gpu" --nocapture "$b " > "$W/cache-$b.log" 2>&1
  echo "== cache trials '$b ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/cache-$b.log" | cut -c1-300 >> "$S"; keep
done
miss_latency bam l5
timeout 100 "$D/bam-cache-tests" --scenario 1.07G 2 > "$W/scenario.log" 2>&1
echo "== scenario 1.07G x 2 rc=$?" >> "$S"; tail -3 "$W/scenario.log" | cut -c1-300 >> "$S"; keep
for dev in "" "hostctl:ssds=2,capacity=64M"; do
  timeout 60 "$D/random-access" 1048576 $dev > "$W/ra-${dev%%:*}.log" 2>&1
  echo "== random-access ${dev:-default} rc=$?" >> "$S"; tail -3 "$W/ra-${dev%%:*}.log" | cut -c1-300 >> "$S"; keep
done
iops bam l5b
cat "$S"
