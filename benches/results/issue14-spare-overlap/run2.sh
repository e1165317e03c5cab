#!/usr/bin/env bash
# Call 2: the landed form (take_spare inlined, first spares reserved by the host) as
# bam-new against bam-base (60ed229): cache tests on both backends, the one-miss latency
# alternating twice, the random kernels' quarter-cache runs (where earlier spare forms
# lost 5-8 %) alternating twice.
NAME=overlap2
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
for k in 1 2; do for b in base new; do miss_latency bam-$b $b-$k; done; done
for k in 1 2; do for b in base new; do
  suite bam-$b $b-$k gather,bfs hbm,zerocopy,bam-quarter,bam-quarter-8
done; done
cat "$S"
