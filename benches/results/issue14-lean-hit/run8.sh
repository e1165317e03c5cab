#!/usr/bin/env bash
# Call 8: a lean store beside the lean read (bam-ls: an ordinary view's store tries the
# one-pin warp store after the one flag test too) against 7941d03 (bam-rec): cache tests
# on both backends and the GPU tests on the new build, all-hits runs of rmw and histogram
# three rounds alternating, quarter-cache runs of rmw twice alternating.
NAME=lean8
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2 3; do
  case $k in 2) o="ls rec";; *) o="rec ls";; esac
  for b in $o; do suite bam-$b hit-$b-$k histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8,bam-resident-8; done
done
for k in 1 2; do
  case $k in 2) o="ls rec";; *) o="rec ls";; esac
  for b in $o; do suite bam-$b q-$b-$k rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done
done
cat "$S"
