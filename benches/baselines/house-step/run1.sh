#!/usr/bin/env bash
# Issue 42's first step (CUDA inside crates/bam, named trials, the CLI's bench folder),
# on the GPU: the I/O suite's named trials on the simulated array, a few cache trials,
# and the 512 B IOPS figure. Binaries: `gpu` and `cache_gpu` are cargo's test binaries
# (target/release/deps/{gpu,cache_gpu}-*), `bam` the CLI, built with BAM_CUDA_ARCHS=90.
NAME=house1
source benches/baselines/device-prelude.sh
timeout 120 "$D/gpu" --nocapture 'sim ' > "$W/gpu-sim.log" 2>&1
echo "== gpu trials 'sim ' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/gpu-sim.log" | cut -c1-300 >> "$S"; keep
timeout 60 "$D/cache_gpu" --nocapture 'sim torture' > "$W/cache-torture.log" 2>&1
echo "== cache trials 'sim torture' rc=$?" >> "$S"; grep -E "^test result|FAIL" "$W/cache-torture.log" | cut -c1-300 >> "$S"; keep
timeout 60 "$D/cache_gpu" --nocapture 'host wait that ends' > "$W/cache-f8.log" 2>&1
echo "== cache trials 'host wait' rc=$?" >> "$S"; grep -E "^test result|PASS|FAIL" "$W/cache-f8.log" | cut -c1-300 >> "$S"; keep
iops bam h1
cat "$S"
