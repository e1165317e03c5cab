#!/usr/bin/env bash
# Sixth run, after the catalog helpers got one owner (bam_nvme::catalog::region/taken):
# the placement and named-dataset cases on every single-GPU backend, the porting guide's
# program (which places its arrays with alloc).
NAME=ap6
source benches/baselines/device-prelude.sh
use_bins
data_dir
trials cache_gpu "datasets" cache-datasets 150
trials cache_gpu "placement" cache-placement 150
timeout 60 "$D/porting_guide_gpu" > "$W/porting.log" 2>&1
echo "== porting guide's program rc=$?" >> "$S"; tail -2 "$W/porting.log" >> "$S"; keep
rm -rf "$F"
cat "$S"
