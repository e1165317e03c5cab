#!/usr/bin/env bash
# Call 11: bam_cache_dev's fields reordered so that the fill ring's descriptors (ring,
# fill_ctl, ring_shift) share the 32-byte sector of timeout_ns, which a miss loads right
# after its pin: its post then reads them from L1 (bam-rev), against fd80e35 (bam-prev):
# cache tests on both backends and the GPU tests on the new build, the cache study (one
# miss) alternating three times, the suite's all-hits and quarter-cache runs once each.
NAME=sector11
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
gpu_tests bam-gpu-tests
for k in 1 2 3; do for b in prev rev; do miss_latency bam-$b $b-$k; done; done
for b in prev rev; do suite bam-$b hq-$b spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8,bam-quarter,bam-quarter-8; done
cat "$S"
