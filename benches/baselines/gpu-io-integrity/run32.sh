#!/usr/bin/env bash
# Issue 41, call 32 (89b1f44): the host-media half, 8 SSDs with 8 and 32 queues.
NAME=i41run32
source benches/baselines/device-prelude.sh
source benches/baselines/gpu-io-integrity/stress-prelude.sh
stress_slice host-8ssd-q8 "ssds=8,media=host q8 " 270
stress_slice host-8ssd-q32 "ssds=8,media=host q32 " 290
cat "$S"
