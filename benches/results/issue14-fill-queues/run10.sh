#!/usr/bin/env bash
# Call 10: the final commit of the session (089801f: the fill queues taken only when three
# quarters of the queue pairs stay shared; the stall test's helper): cache tests on both
# backends and the cache study twice against bam-spare (726d5a6).
NAME=fillq10
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
for k in 1 2; do for b in spare fq; do miss_latency bam-$b $b-$k; done; done
cat "$S"
