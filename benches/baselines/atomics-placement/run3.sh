#!/usr/bin/env bash
# Third run (the second failed in its own datasets case: a cache of 8 KiB lines over
# storage sized for 4 KiB slots, refused by Cache::new; that step is a unit test now), after named datasets (Cache::create/open) and the read-only load refusal:
# the cache suite on every single-GPU backend, the porting guide's program.
NAME=ap3
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials cache_gpu "sim " cache-sim 200
trials cache_gpu "hostctl " cache-hostctl 150
trials cache_gpu "file " cache-file 150
trials cache_gpu "file-direct " cache-file-direct 150
timeout 60 "$D/porting_guide_gpu" > "$W/porting.log" 2>&1
echo "== porting guide's program rc=$?" >> "$S"; tail -2 "$W/porting.log" >> "$S"; keep
grep -hE "^(PASS|FAIL).*(datasets|placement)" "$W"/cache-*.log | cut -c1-300 >> "$S"; keep
rm -rf "$F"
cat "$S"
