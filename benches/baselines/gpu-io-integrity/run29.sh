#!/usr/bin/env bash
# Issue 41, call 29 (768d2fd): the soak with write-heavy phases on the host-side
# controller (3e7 operations, cut at 90 s), then on the simulated array to 10^9
# operations (cut at 380 s).
NAME=i41run29
source benches/baselines/device-prelude.sh
timeout 90 "$D/bam-cache-tests" --soak 30000000 hostctl > "$W/soak-hostctl.log" 2>&1
echo "== soak hostctl rc=$?" >> "$S"; grep -E "^(soak:|PASS|FAIL)" "$W/soak-hostctl.log" | tail -3 | cut -c1-500 >> "$S"; keep
timeout 380 "$D/bam-cache-tests" --soak 1000000000 sim > "$W/soak-sim.log" 2>&1
echo "== soak sim rc=$?" >> "$S"; grep -E "^(soak:|PASS|FAIL)" "$W/soak-sim.log" | tail -3 | cut -c1-500 >> "$S"; keep
cat "$S"
