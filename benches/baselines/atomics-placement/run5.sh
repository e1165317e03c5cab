#!/usr/bin/env bash
# Fifth run (the fourth failed in the new hostctl case: the test storage writes its
# pattern over the medium, here the image with the dataset; the case turns that off): the cache suite on every single-GPU backend with
# the dataset catalog in bam_nvme and the hostctl case of a dataset the CPU driver wrote
# into a model image; the porting guide's program; random-access.
NAME=ap5
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials cache_gpu "sim " cache-sim 200
trials cache_gpu "hostctl " cache-hostctl 150
trials cache_gpu "file " cache-file 150
trials cache_gpu "file-direct " cache-file-direct 150
timeout 60 "$D/porting_guide_gpu" > "$W/porting.log" 2>&1
echo "== porting guide's program rc=$?" >> "$S"; tail -2 "$W/porting.log" >> "$S"; keep
timeout 60 "$D/random-access" > "$W/random-access.log" 2>&1
echo "== random-access rc=$?" >> "$S"; grep -E "PASS|FAIL" "$W/random-access.log" | head -2 >> "$S"; keep
rm -rf "$F"
cat "$S"
