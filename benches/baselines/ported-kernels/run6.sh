#!/usr/bin/env bash
# Run 6: arrays resident by default (Array::view makes an array that fits resident at its
# first call). The new "default views" cache trials on every single-GPU backend, the sim
# cache suite (its protocol tests now on protocol_config), the porting guide's program and
# random-access (both take the default path), the nine kernels with bam-default beside
# bam-hit (ordinary views) and bam-resident, then the hostctl and file cache suites.
NAME=pk6
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials cache_gpu "default views" cache-default 200
trials cache_gpu "sim " cache-sim 200
user_programs
suite bam all9 spmv,bfs,gather,histogram,histogram-atomic,rmw,pagerank,hash-count,embedding-bag hbm,bam-hit,bam-resident,bam-default
trials cache_gpu "hostctl " cache-hostctl 150
trials cache_gpu "file " cache-file 150
trials cache_gpu "file-direct " cache-file-direct 150
rm -rf "$F"
cat "$S"
