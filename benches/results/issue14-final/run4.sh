#!/usr/bin/env bash
# Call 4: the range test can fail. bam-cache-tests-mut is this tree with one mutation in
# bam::array's general path (every lane out of range logs, not the lowest one per call);
# the test must FAIL with it (16 log entries for a half warp out of range) and PASS with
# the real binary. Only that test runs (BAM_CACHE_TEST).
NAME=final4
source benches/results/device-prelude.sh
export BAM_CACHE_TEST="out of range"
cache_tests bam-cache-tests-mut sim
grep -h "out of range" "$W"/bam-cache-tests-mut-sim.log | cut -c1-700 >> "$S"
cache_tests bam-cache-tests sim
grep -h "^PASS.*out of range" "$W"/bam-cache-tests-sim.log | cut -c1-300 >> "$S"
cat "$S"
