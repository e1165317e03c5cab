#!/usr/bin/env bash
# Call 5: the lean read with the vote (bam-lean: 45f71b2 plus the lean path, as run2's
# form) against the landed vote alone (bam-rev, 5799a17): the cache tests on both
# backends and the GPU tests on the lean build, every kernel's all-hits runs three rounds
# alternating, the quarter-cache runs twice alternating, the cache study twice.
NAME=lean5
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2 3; do
  case $k in 2) o="lean rev";; *) o="rev lean";; esac
  for b in $o; do suite bam-$b hit-$b-$k spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8; done
done
for k in 1 2; do
  case $k in 2) o="lean rev";; *) o="rev lean";; esac
  for b in $o; do suite bam-$b q-$b-$k spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
done
for k in 1 2; do for b in rev lean; do miss_latency bam-$b $b-$k; done; done
cat "$S"
