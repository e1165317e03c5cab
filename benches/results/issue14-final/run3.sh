#!/usr/bin/env bash
# Call 3: the cache tests on both backends with the new range test (indices out of range
# through an ordinary, a counting, a division and a resident view), binaries of this tree.
NAME=final3
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
grep -h "out of range" "$W"/bam-cache-tests-*.log | cut -c1-400 >> "$S"
cat "$S"
