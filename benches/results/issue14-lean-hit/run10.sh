#!/usr/bin/env bash
# Call 10: the read-ahead look made only where the cache reads ahead (a view flag,
# BAM_VIEW_F_READAHEAD; before, a warp whose lanes all missed one line called the
# read-ahead's out-of-line function, two 64-bit divisions and a load of the depth, also
# with read-ahead off), bam-rev, against 9ea4ed9 (bam-prev): cache tests on both backends,
# the cache study (one miss, read-ahead off by default) alternating three times, the
# suite's all-hits and quarter-cache runs once each.
NAME=ra10
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
for k in 1 2 3; do for b in prev rev; do miss_latency bam-$b $b-$k; done; done
for b in prev rev; do suite bam-$b hq-$b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8,bam-quarter,bam-quarter-8; done
cat "$S"
