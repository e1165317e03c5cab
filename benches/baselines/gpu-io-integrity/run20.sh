#!/usr/bin/env bash
# Issue 41, call 20: a second repetition of the stress matrix's HBM half at the final
# code (every case at 1 GB, once), JSON beside the summary.
NAME=i41run20
source benches/baselines/device-prelude.sh
BAM_STRESS_JSON="$W/stress-hbm.json" timeout 540 "$D/bam-cache-tests" --stress 1G 1 media=hbm > "$W/stress-hbm.log" 2>&1
echo "== stress media=hbm rc=$?" >> "$S"; grep -E "^(FAIL|stress:)" "$W/stress-hbm.log" | cut -c1-300 >> "$S"
grep -cE "^PASS" "$W/stress-hbm.log" >> "$S"; cp "$W/stress-hbm.json" "$O/" 2>/dev/null; keep
cat "$S"
