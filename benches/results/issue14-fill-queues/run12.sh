#!/usr/bin/env bash
# Call 12: review clean-up (one fill queue per block only, as the host reserves: the
# unused several-per-block form and 8 KiB of its shared memory gone; the group-of-four
# tag load shared by serve_fills and take_spare) as bam-rev, against bam-prev (3dd5960's
# device code): cache tests on both backends, the one-miss latency alternating twice, the
# quarter-cache runs of every kernel once each.
NAME=fillq12
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
for k in 1 2; do for b in prev rev; do miss_latency bam-$b $b-$k; done; done
for b in prev rev; do suite bam-$b $b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
cat "$S"
