#!/usr/bin/env bash
# Sixteenth run, at the session's last library change (f640533): the suites this
# session's changes touch beyond the file backend — scans spread over queue pairs by
# spread_qp on the host-side controller and the simulated array, the simulated array's
# 512 B IOPS — through the prelude's helpers.
NAME=file16
source benches/baselines/device-prelude.sh
use_bins
data_dir
iops bam f16
trials gpu "hostctl " gpu-hostctl 200
trials gpu "sim " gpu-sim 120
trials cache_gpu "sim " cache-sim 200
trials gpu "file scan" gpu-file-scan 60
rm -rf "$F"
cat "$S"
