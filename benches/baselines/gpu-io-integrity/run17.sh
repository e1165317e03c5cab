#!/usr/bin/env bash
# Issue 41, call 17: the open 1-SSD host-media 64-entry 512 B GPU-store family, one queue,
# interleaved: the plain build (bam-cache-tests) and a diagnostic build of the same commit
# whose simulated controller has every lane fence (fence.acq_rel.sys) after the warp
# barrier and before its SQE loads (bam-cache-tests-diag2). Does the simulator's read of
# the SQEs after one lane's doorbell acquire explain the previous-lap CQEs?
NAME=i41run17
source benches/baselines/device-prelude.sh
CASE="sim:ideal,ssds=1,media=host q1 d64 line 512 1x1000M Stripe Stores"
for r in 1 2 3 4 5; do
  for bin in bam-cache-tests-diag2 bam-cache-tests; do
    timeout 35 "$D/$bin" --stress 1G 1 "$CASE" > "$W/$bin-$r.log" 2>&1
    rc=$?
    echo "== $bin run $r rc=$rc $(grep -ohE '^(PASS|FAIL) stress' "$W/$bin-$r.log" | head -1)" >> "$S"; keep
  done
done
grep -h "protocol violation" "$W"/*.log | head -4 | cut -c1-300 >> "$S"
cat "$S"
