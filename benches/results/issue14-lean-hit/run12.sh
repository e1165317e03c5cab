#!/usr/bin/env bash
# Call 12: the fill service takes its warp's spare first (the spare table word computed
# once when the service starts, so the exchange no longer waits for three descriptor
# loads) and loads the line word for the publish after its command is out (the
# submission's fence no longer waits for it), bam-rev, against e8b5706 (bam-prev): cache
# tests on both backends and the GPU tests on the new build, the cache study (one miss)
# alternating three times, the suite's quarter-cache runs (the service's throughput) twice
# alternating and its all-hits runs once each.
NAME=svc12
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
