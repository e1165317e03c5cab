#!/usr/bin/env bash
# Call 5: the range test with its last check (the whole array read back afterwards: only
# the 32 elements the in-range lanes stored differ from the medium), both backends.
NAME=final5
source benches/results/device-prelude.sh
export BAM_CACHE_TEST="out of range"
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
grep -h "out of range" "$W"/bam-cache-tests-*.log | grep -E "^(PASS|FAIL)" | cut -c1-400 >> "$S"
cat "$S"
