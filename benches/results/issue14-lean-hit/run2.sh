#!/usr/bin/env bash
# Call 2: the lean hit path, fixed (the lanes that go on past the hit path told by a vote
# of the calling lanes, not by __activemask(): run1's form leaked pins in the type matrix)
# as bam-rev against aab2ef4 (bam-prev): cache tests on both backends and the GPU tests
# first, then every kernel's all-hits runs alternating twice, the quarter-cache runs once
# each, the cache study alternating twice.
NAME=lean2
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2; do for b in prev rev; do suite bam-$b hit-$b-$k spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8; done; done
for b in prev rev; do suite bam-$b q-$b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
for k in 1 2; do for b in prev rev; do miss_latency bam-$b $b-$k; done; done
cat "$S"
