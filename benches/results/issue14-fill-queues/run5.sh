#!/usr/bin/env bash
# Call 5: fill queues, fifth form: one per block and SSD, used by a warp's lone request
# only (the requests of a batch go to the shared queues, which spread them wider: run3
# and run4 put every fill on fill queues and the quarter-cache runs lost 4-20 %).
# bam-fq against bam-spare (726d5a6): cache tests on both backends, the one-miss latency
# and the kernel suite's quarter-cache variants alternating twice, 512 B IOPS.
NAME=fillq5
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
for k in 1 2; do for b in spare fq; do
  miss_latency bam-$b $b-$k
  suite bam-$b $b-$k spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-quarter,bam-quarter-8
done; done
iops bam-fq fq
cat "$S"
