#!/bin/bash
# The memo-hit probe twice (benches/probe/memo_hit_probe.cu), logs to $OUT.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for r in 1 2; do ./memo-hit-probe > $OUT/memo-hit-probe-$r.log 2>&1; echo "rc=$?" >> $OUT/memo-hit-probe-$r.log; done
cat $OUT/memo-hit-probe-1.log $OUT/memo-hit-probe-2.log
