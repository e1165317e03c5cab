#!/usr/bin/env bash
# Call 11: the fill queues a block never took (not quiet, or shallower than 1,024) are
# left as they were at the service's stop (they were marked failed). Cache tests on both
# backends and the cache study twice against bam-spare (726d5a6).
NAME=fillq11
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
for k in 1 2; do for b in spare fq; do miss_latency bam-$b $b-$k; done; done
cat "$S"
