#!/usr/bin/env bash
# 512 B IOPS of the simulated controller split into named steps (bam-split, be6e917)
# against the same tree with sim.cu's controller as one function (bam-unsplit: sim.cu of
# 7b6b279 with the named bam_sim_control fields), alternating on one GPU, 3 runs each.
NAME=layers4
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
export CUDA_VISIBLE_DEVICES=0
for i in 1 2 3; do
  iops bam-split split-$i
  iops bam-unsplit unsplit-$i
done
cat "$S"
