#!/usr/bin/env bash
# Run 7: the "default views" cache trials again on every single-GPU backend (run 6 found a
# wrong miss count in the test itself: it counted D's misses as A's), and what a checked
# read costs an embedding-bag port (benches/probe/embag_access_probe.cu), twice.
# Built here (CUDA wheels of .ci/install-cuda.sh on PATH):
#   nvcc -O3 -arch=sm_90 -std=c++17 -I crates/bam/cuda/include \
#     benches/probe/embag_access_probe.cu -o .devrun/embag-probe \
#     -L"$(dirname "$(which nvcc)")/../lib" -cudart static && strip .devrun/embag-probe
NAME=pk7
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials cache_gpu "default views" cache-default 200
for r in 1 2; do timeout 120 .devrun/embag-probe >> "$W/embag-probe.log" 2>&1; echo "== embag probe $r rc=$?" >> "$S"; done
cat "$W/embag-probe.log" >> "$S"; keep
rm -rf "$F"
cat "$S"
