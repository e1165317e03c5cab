#!/usr/bin/env bash
# Issue 42's layers step, second call: the I/O suite's trials on the host-side controller
# and the cache suites' trials on both backends (GPU 0).
NAME=layers2
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
export CUDA_VISIBLE_DEVICES=0
timeout 170 "$D/gpu" --nocapture 'hostctl ' > "$W/gpu-hostctl.log" 2>&1
echo "== gpu trials 'hostctl ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/gpu-hostctl.log" | cut -c1-300 >> "$S"; keep
timeout 200 "$D/cache_gpu" --nocapture 'sim ' > "$W/cache-sim.log" 2>&1
echo "== cache trials 'sim ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/cache-sim.log" | cut -c1-300 >> "$S"; keep
timeout 200 "$D/cache_gpu" --nocapture 'hostctl ' > "$W/cache-hostctl.log" 2>&1
echo "== cache trials 'hostctl ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/cache-hostctl.log" | cut -c1-300 >> "$S"; keep
cat "$S"
