#!/usr/bin/env bash
# Issue 41, call 33 (89b1f44): the host-media half, 8 SSDs with 64 queues; the soak on
# the host-side controller (its torture runs at 2x, with write-heavy phases).
NAME=i41run33
source benches/baselines/device-prelude.sh
source benches/baselines/gpu-io-integrity/stress-prelude.sh
stress_slice host-8ssd-q64 "ssds=8,media=host q64 " 280
timeout 280 "$D/bam-cache-tests" --soak 30000000 hostctl > "$W/soak-hostctl.log" 2>&1
echo "== soak hostctl rc=$?" >> "$S"; grep -E "^(soak:|PASS|FAIL)" "$W/soak-hostctl.log" | tail -3 | cut -c1-500 >> "$S"; keep
cat "$S"
