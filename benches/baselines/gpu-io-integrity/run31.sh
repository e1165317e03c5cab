#!/usr/bin/env bash
# Issue 41, call 31 (89b1f44): the stress matrix's host-media half again, first slices:
# 1 SSD (every queue count), 8 SSDs with 1 queue; 512 B IOPS.
NAME=i41run31
source benches/baselines/device-prelude.sh
source benches/baselines/gpu-io-integrity/stress-prelude.sh
stress_slice host-1ssd "ssds=1,media=host" 260
stress_slice host-8ssd-q1 "ssds=8,media=host q1 " 250
iops bam r31
cat "$S"
