#!/usr/bin/env bash
# Run 5: where a thread-per-vertex PageRank pull loses its speed through the cache's hit
# protocol (benches/probe/pagerank_access_probe.cu): the plain pull, the same with one
# access in flight, hand-written sequence locks, the library's cache_read_unpinned and
# bam::array<T>::operator[] over the same data, on uniform and power-law degrees, twice.
# Built here (CUDA wheels of .ci/install-cuda.sh on PATH):
#   nvcc -O3 -arch=sm_90 -std=c++17 -I crates/bam/cuda/include \
#     benches/probe/pagerank_access_probe.cu -o .devrun/pagerank-probe \
#     -L"$(dirname "$(which nvcc)")/../lib" -cudart static && strip .devrun/pagerank-probe
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/pagerank-probe.log"
for r in 1 2; do timeout 200 .devrun/pagerank-probe 2>&1 | tee -a "$OUT/pagerank-probe.log"; done
