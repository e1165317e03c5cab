#!/usr/bin/env bash
# Call 14: the review clean-up a51800c (line_by_shift shared by the lean read and
# line_of; the measured suite kernels' SASS is unchanged, some unbounded test kernels'
# registers changed): cache tests on both backends and the GPU tests.
NAME=review14
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
cat "$S"
