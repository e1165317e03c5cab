#!/usr/bin/env bash
# Call 3: fill queues, third form: up to 4 per block and SSD (its warps split among them; at
# most half of each SSD's queue pairs), as run2 showed each fill queue bound to about
# 0.6 M commands a second on the simulated SSDs (the quarter-cache runs 3x slower with one
# per block). bam-fq against bam-spare (726d5a6).
NAME=fillq3
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
for k in 1 2; do for b in spare fq; do miss_latency bam-$b $b-$k; done; done
for b in spare fq; do suite bam-$b $b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
cat "$S"
