#!/usr/bin/env bash
# Call 9: the fill queue's poll reads the four CQ entries from the head in its round trip
# and the reaper uses them (bam-peek) against 6aec24c (bam-fq): the one-miss latency three
# times each alternating, the quarter-cache runs of gather and histogram, the cache tests
# (sim) of the peek build.
NAME=fillq9
source benches/results/device-prelude.sh
for k in 1 2 3; do for b in fq peek; do miss_latency bam-$b $b-$k; done; done
for b in fq peek; do suite bam-$b $b gather,histogram hbm,zerocopy,bam-quarter,bam-quarter-8; done
cache_tests bam-cache-tests-peek sim
cat "$S"
