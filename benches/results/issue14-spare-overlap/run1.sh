#!/usr/bin/env bash
# Call 1: fills read into the warp's spare slot, the next spare taken while the read is in
# flight. bam-base = 60ed229 (the landed library); bam-noinl = the change with take_spare
# out of line; bam-inl = the same with take_spare inlined (-DBAM_SPARE_SEARCH_INLINE).
# One-miss latency alternating, twice each; then the cache tests of the change.
NAME=overlap1
source benches/results/device-prelude.sh
for k in 1 2; do for b in base noinl inl; do miss_latency bam-$b $b-$k; done; done
cache_tests bam-cache-tests sim
cat "$S"
