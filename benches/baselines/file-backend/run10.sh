#!/usr/bin/env bash
# Tenth run: the billion-row challenge (1e9 rows, page cache) after the scan spreads its
# reads over every queue pair (spread_qp; before, one submitting warp per block of 16
# warps used 4 of 64 queue pairs) and the forwarder copies PRP lists in runs; then the
# suites on files and the simulated array, and `bam bench cache` on a file.
NAME=file10
source benches/baselines/device-prelude.sh
use_bins
data_dir; M=$F/measurements.txt
timeout 150 "$D/billion-rows" --rows 1e9 --write-file "$M" --device "file:$M,workers=8" \
  --json "$W/brc-file-warm.json" > "$W/brc-warm.log" 2>&1
echo "== brc 1e9 warm, workers=8, 64 queue pairs rc=$?" >> "$S"; grep -E "^(file|CPU|HBM|zero-copy|scan|reading)" "$W/brc-warm.log" | cut -c1-300 >> "$S"; keep
for v in "16 64" "8 128" "16 128"; do
  set -- $v
  timeout 60 "$D/billion-rows" --input "$M" --no-check --queues $2 --device "file:$M,workers=$1" > "$W/brc-w$1-q$2.log" 2>&1
  echo "== brc 1e9 warm workers=$1 queues=$2 rc=$?" >> "$S"; grep -E "^scan|rror" "$W/brc-w$1-q$2.log" | cut -c1-200 >> "$S"; keep
done
timeout 40 "$D/bam" bench --device "file:$M,workers=8" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3 > "$W/bench-1M.log" 2>&1
echo "== bench read 1M queues 64 rc=$?" >> "$S"; grep -iE "iops|error" "$W/bench-1M.log" | head -2 >> "$S"; keep
timeout 40 .devrun/bam-file-peers "$M" --peer uring --seq --bs 1M --depth 8 --threads 8 --seconds 3 > "$W/peer.log" 2>&1
echo "== peer: CPU io_uring, page cache, 1 MiB, 8 threads" >> "$S"; cut -c1-300 "$W/peer.log" >> "$S"; keep
rm -f "$M"
trials gpu "file " gpu-file 100
trials gpu "file-direct " gpu-file-direct 100
trials gpu "sim " gpu-sim 100
trials cache_gpu "file " cache-file 120
timeout 90 "$D/bam" bench cache --device "file:$F/c.bin,workers=8" --hit-size 256M --miss-size 256M --threads 65536 \
  --output "$W/cache-file.json" > "$W/cache-file.log" 2>&1
echo "== bench cache file rc=$?" >> "$S"; grep -E "^(hit|miss)|latency|rror" "$W/cache-file.log" | head -12 >> "$S"; keep
rm -rf "$F"
cat "$S"
