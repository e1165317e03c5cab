#!/usr/bin/env bash
# Call 2: fill queues, second form (a call's lanes go one SSD at a time, in ascending
# order; the queue pairs' shared state is taken over at the service's start and handed
# back at its stop: run1's cache study failed on its second cache over the same queue
# pairs, which started from zero). bam-fq against bam-spare (726d5a6).
NAME=fillq2
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
for k in 1 2; do for b in spare fq; do miss_latency bam-$b $b-$k; done; done
for b in spare fq; do suite bam-$b $b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
cat "$S"
