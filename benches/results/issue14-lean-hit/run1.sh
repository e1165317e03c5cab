#!/usr/bin/env bash
# Call 1: the lean hit path (one flag test, a line by shift, nothing else on the way) as
# bam-rev against aab2ef4 (bam-prev): every kernel's all-hits runs alternating twice, the
# cache study (hits, one miss) alternating twice, the cache tests on the new library.
NAME=lean1
source benches/results/device-prelude.sh
for k in 1 2; do for b in prev rev; do suite bam-$b $b-$k spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8; done; done
for k in 1 2; do for b in prev rev; do miss_latency bam-$b $b-$k; done; done
cache_tests bam-cache-tests sim
cat "$S"
