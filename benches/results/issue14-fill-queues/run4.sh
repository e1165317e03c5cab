#!/usr/bin/env bash
# Call 4: fill queues, fourth form: a call's groups take their tickets and write their SQEs
# together, each group's leader fences once (the fences overlap), and only the doorbells
# go one SSD at a time in ascending order (run3's form fenced inside that loop).
# bam-fq against bam-spare (726d5a6).
NAME=fillq4
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
for k in 1 2; do for b in spare fq; do miss_latency bam-$b $b-$k; done; done
for b in spare fq; do suite bam-$b $b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
cat "$S"
