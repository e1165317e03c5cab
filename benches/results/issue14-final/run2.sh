#!/usr/bin/env bash
# Call 2: every cache test on both backends and the GPU I/O tests, binaries of 1e7a017.
NAME=final2
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
cat "$S"
