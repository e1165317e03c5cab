#!/usr/bin/env bash
# Issue 41, call 6 (264d4ac): the one failure of call 5 (1 SSD, host media, one queue of
# 64 entries, 512 B lines, GPU stores: a CQE carrying the CID of its slot's previous
# lap), three times, each in its own process; then three times with an experimental
# simulator whose SQE and pending-list loads bypass the caches (ld.global.cv: is the
# simulator reading stale memory?); then the stress matrix's 8-SSD host-media cases.
NAME=i41run6
source benches/baselines/device-prelude.sh
CASE="sim:ideal,ssds=1,media=host q1 d64 line 512 1x1000M Stripe Stores"
for v in base ldcv; do
  bin="$D/bam-cache-tests"; [[ $v == ldcv ]] && bin="$D/bam-cache-tests-ldcv"
  for r in 1 2 3; do
    timeout 45 "$bin" --stress 1G 1 "$CASE" > "$W/q1d64-$v-$r.log" 2>&1
    echo "== q1 d64 512 stores $v run $r rc=$?" >> "$S"
    grep -E "^(FAIL|PASS)" "$W/q1d64-$v-$r.log" | cut -c1-300 >> "$S"; keep
  done
done
BAM_STRESS_JSON="$W/stress-host8.json" timeout 270 "$D/bam-cache-tests" --stress 1G 1 "ssds=8,media=host" > "$W/stress-host8.log" 2>&1
echo "== stress host 8 SSDs rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/stress-host8.log" | cut -c1-600 >> "$S"
grep -c "^PASS" "$W/stress-host8.log" >> "$S"; keep
cat "$S"
