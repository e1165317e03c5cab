#!/usr/bin/env bash
# Call 4: the landed form, 5799a17 (bam-rev: the hit path's vote, counting as a view
# flag), against aab2ef4 (bam-prev): cache tests on both backends, the GPU tests, every
# kernel's all-hits runs alternating twice, the quarter-cache runs once each, the cache
# study alternating twice.
NAME=lean4
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2; do for b in prev rev; do suite bam-$b hit-$b-$k spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8,bam-resident,bam-resident-8; done; done
for b in prev rev; do suite bam-$b q-$b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
for k in 1 2; do for b in prev rev; do miss_latency bam-$b $b-$k; done; done
cat "$S"
