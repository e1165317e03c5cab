#!/usr/bin/env bash
# Call 3: the landed form (bam-new; the spare test reads the array three times) against
# bam-base (60ed229): cache tests on both backends; the whole kernel suite without UVM
# (every cached variant), alternating twice; the one-miss latency and 512 B IOPS once each.
NAME=overlap3
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
V=hbm,zerocopy,bam-hit,bam-hit-8,bam-resident,bam-resident-8,bam-quarter,bam-quarter-8
for k in 1 2; do for b in base new; do suite bam-$b $b-$k spmv,bfs,gather,histogram,rmw $V; done; done
for b in base new; do miss_latency bam-$b $b; iops bam-$b $b; done
cat "$S"
