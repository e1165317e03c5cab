#!/usr/bin/env bash
# Issue 41, call 28: the soak with its write-heavy phases (a users' load or GPU stores
# with write-back after every torture run) on the simulated array, cut at 270 s.
NAME=i41run28
source benches/baselines/device-prelude.sh
timeout 270 "$D/bam-cache-tests" --soak 150000000 sim > "$W/soak.log" 2>&1
echo "== soak sim rc=$?" >> "$S"; grep -E "^(soak:|PASS|FAIL)" "$W/soak.log" | tail -14 | cut -c1-500 >> "$S"; keep
cat "$S"
