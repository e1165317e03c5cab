#!/usr/bin/env bash
# Call 1: fill queues (one queue pair per fill-service block and SSD, coordinated in shared
# memory: bam/fill_queue.cuh) as bam-fq, against bam-spare (726d5a6: spare slots, the
# library before) and bam-base (60ed229) for IOPS (default_qp changed). Cache tests on both
# backends, GPU tests; the one-miss latency alternating twice; the kernel suite's quarter-
# cache and all-hit variants once each; 512 B IOPS.
NAME=fillq1
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2; do for b in spare fq; do miss_latency bam-$b $b-$k; done; done
for b in spare fq; do suite bam-$b $b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-quarter,bam-quarter-8; done
for b in base fq; do iops bam-$b $b; done
cat "$S"
