#!/usr/bin/env bash
# Issue 41, call 19: the open 1-SSD host-media 64-entry 512 B GPU-store family, one queue,
# with a diagnostic build (this commit plus a trace of the simulated controller's fetch
# batches: poll's doorbell value, head before, count, first and last CID, CQ tail, pending
# head; printed for the queue with each protocol violation). Up to 6 runs, 70 s each (a failing run reports after 26 to 31 s of cleanup).
NAME=i41run19
source benches/baselines/device-prelude.sh
CASE="sim:ideal,ssds=1,media=host q1 d64 line 512 1x1000M Stripe Stores"
for r in 1 2 3 4 5 6; do
  timeout 70 "$D/bam-cache-tests-diag3" --stress 1G 1 "$CASE" > "$W/diag3-$r.log" 2>&1
  echo "== diag3 run $r rc=$? $(grep -ohE '^(PASS|FAIL) stress' "$W/diag3-$r.log" | head -1)" >> "$S"; keep
  if grep -q "sim fetch trace" "$W/diag3-$r.log"; then break; fi
done
cat "$S"
