#!/usr/bin/env bash
# Call 6: the cache suites on both backends after the review's clean-up of the cache
# tests (one helper each for the read-at, store-at and check-all launches).
NAME=final6
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
grep -hE "^(PASS|FAIL).*(out of range|read-ahead|fill queues|stalled device:|injected)" "$W"/bam-cache-tests-*.log | cut -c1-200 >> "$S"
cat "$S"
