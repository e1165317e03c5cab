#!/usr/bin/env bash
# Issue 41, call 8 (d945bcc: the queues of 264d4ac): the open case (1 SSD, host media,
# one queue of 64 entries, 512 B GPU stores) three times with room to report, then the
# 1-SSD host-media cases with 8, 32 and 64 queues that calls 5 and 6 did not reach.
NAME=i41run8
source benches/baselines/device-prelude.sh
CASE="sim:ideal,ssds=1,media=host q1 d64 line 512 1x1000M Stripe Stores"
for r in 1 2 3; do
  timeout 130 "$D/bam-cache-tests" --stress 1G 1 "$CASE" > "$W/q1d64-$r.log" 2>&1
  echo "== q1 d64 512 stores run $r rc=$?" >> "$S"; grep -E "^(FAIL|PASS)|^  |^    " "$W/q1d64-$r.log" | head -20 | cut -c1-300 >> "$S"; keep
done
for q in q8 q32 q64; do
  BAM_STRESS_JSON="$W/stress-host1-$q.json" timeout 50 "$D/bam-cache-tests" --stress 1G 1 "ssds=1,media=host $q " > "$W/stress-host1-$q.log" 2>&1
  echo "== stress host 1 SSD $q rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/stress-host1-$q.log" | cut -c1-400 >> "$S"; grep -c "^PASS" "$W/stress-host1-$q.log" >> "$S"; keep
done
cat "$S"
