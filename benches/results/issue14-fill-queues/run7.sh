#!/usr/bin/env bash
# Call 7: the landed commit (6aec24c) as bam-fq against bam-spare (726d5a6): cache tests on
# both backends, GPU tests, the cache study alternating twice, the whole kernel suite
# without UVM (every cached variant) once each, 512 B IOPS against bam-base (60ed229).
NAME=fillq7
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2; do for b in spare fq; do miss_latency bam-$b $b-$k; done; done
V=hbm,zerocopy,bam-hit,bam-hit-8,bam-resident,bam-resident-8,bam-quarter,bam-quarter-8
for b in spare fq; do suite bam-$b $b spmv,bfs,gather,histogram,rmw $V; done
for b in base fq; do iops bam-$b $b; done
cat "$S"
