#!/usr/bin/env bash
# After SimKernel kept its SimLaunch (the controller's launch found once): 512 B IOPS and
# the I/O and cache trials on the simulated array (their recovery cases restart the
# controller kernel).
NAME=layers6
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
iops bam l6
timeout 120 "$D/gpu" --nocapture "sim " > "$W/gpu-sim.log" 2>&1
echo "== gpu trials 'sim ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/gpu-sim.log" | cut -c1-300 >> "$S"; keep
timeout 120 "$D/cache_gpu" --nocapture "sim " > "$W/cache-sim.log" 2>&1
echo "== cache trials 'sim ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/cache-sim.log" | cut -c1-300 >> "$S"; keep
cat "$S"
