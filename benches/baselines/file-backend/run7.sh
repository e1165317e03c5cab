#!/usr/bin/env bash
# Seventh run: what holds the 1BRC scan through the file backend at ~1.8 GB/s while
# `bam bench` reads the same kind of file at 45 GB/s (run 3). A 4.5 GB file (3e8 rows),
# page-cached: `bam bench` 1 MiB and 2 MiB sequential reads with 16 and 64 queue pairs,
# then the scan with 16, 64 and 128 queue pairs.
NAME=file7
source benches/baselines/device-prelude.sh
use_bins
data_dir; M=$F/measurements.txt
timeout 200 .devrun/billion-rows --rows 3e8 --write-file "$M" --runs 1 --no-check --device "file:$M,workers=8" > "$W/brc-q16.log" 2>&1
echo "== brc 3e8 q16 rc=$?" >> "$S"; grep -E "^scan" "$W/brc-q16.log" | cut -c1-200 >> "$S"; keep
for q in 64 128; do
  timeout 100 .devrun/billion-rows --input "$M" --runs 2 --no-check --queues $q --device "file:$M,workers=8" > "$W/brc-q$q.log" 2>&1
  echo "== brc 3e8 q$q rc=$?" >> "$S"; grep -E "^scan|rror" "$W/brc-q$q.log" | cut -c1-200 >> "$S"; keep
done
for a in "1M 16" "1M 64" "2M 16" "2M 64"; do
  set -- $a
  timeout 60 "$D/bam" bench --device "file:$M,workers=8" --rw read --bs $1 --threads 1024 --queues $2 --runtime 3 > "$W/bench-$1-$2.log" 2>&1
  echo "== bench read bs $1 queues $2 rc=$?" >> "$S"; grep -iE "iops|error" "$W/bench-$1-$2.log" | head -2 >> "$S"; keep
done
rm -rf "$F"
cat "$S"
