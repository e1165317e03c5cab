#!/usr/bin/env bash
# Call 13: the fill service starts what serving reads first in the round trip of the ring
# head's CAS (the warp's spare exchanged, each request's placement hint read, its array's
# view prefetched into L1; the spare put back if another warp wins), bam-rev, against
# 5020ddb (bam-prev, 22e871f's device code): cache tests on both backends and the GPU
# tests on the new build, the cache study (one miss) alternating three times, the suite's
# quarter-cache runs twice alternating and its all-hits runs once each.
NAME=take13
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2 3; do for b in prev rev; do miss_latency bam-$b $b-$k; done; done
for k in 1 2; do
  case $k in 2) o="rev prev";; *) o="prev rev";; esac
  for b in $o; do suite bam-$b q-$b-$k spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
done
for b in prev rev; do suite bam-$b hit-$b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8; done
cat "$S"
