#!/usr/bin/env bash
# Call 4: the spares in a table in global memory (the host recalls them before it places a
# resident array: call 3 showed resident views losing their run of slots to spares that
# had moved into it). bam-new against bam-base (60ed229): cache tests on both backends;
# the whole kernel suite without UVM alternating twice; the one-miss latency twice each.
NAME=overlap4
source benches/results/device-prelude.sh
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
V=hbm,zerocopy,bam-hit,bam-hit-8,bam-resident,bam-resident-8,bam-quarter,bam-quarter-8
for k in 1 2; do for b in base new; do
  suite bam-$b $b-$k spmv,bfs,gather,histogram,rmw $V
  miss_latency bam-$b $b-$k
done; done
cat "$S"
