#!/usr/bin/env bash
# Run 8: the landed state of arrays resident by default (invalidate of such an array
# writes back and keeps its lines): the "default views" cache trials on every single-GPU
# backend, the sim I/O and cache suites, the porting guide's program and random-access.
NAME=pk8
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials cache_gpu "default views" cache-default 200
trials gpu "sim " io-sim 120
trials cache_gpu "sim " cache-sim 200
user_programs
rm -rf "$F"
cat "$S"
