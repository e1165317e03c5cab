#!/usr/bin/env bash
# Call 6: the landed form of the fill queues (run5's device code; the test of a fill
# queue's read timing out on a stalled device added): cache tests on both backends, GPU
# tests, the cache study alternating twice against bam-spare (726d5a6), 512 B IOPS against
# bam-base (60ed229).
NAME=fillq6
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2; do for b in spare fq; do miss_latency bam-$b $b-$k; done; done
for b in base fq; do iops bam-$b $b; done
cat "$S"
