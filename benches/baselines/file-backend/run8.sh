#!/usr/bin/env bash
# Eighth run: the billion-row challenge (1e9 rows) through the file backend with 64 queue
# pairs (billion-rows' default after run 7), the file just written (page cache), and the
# CPU's io_uring reading the same file sequentially (page cache) beside it.
NAME=file8
source benches/baselines/device-prelude.sh
data_dir; M=$F/measurements.txt
timeout 300 .devrun/billion-rows --rows 1e9 --write-file "$M" --device "file:$M,workers=8" \
  --json "$W/brc-file-warm.json" > "$W/brc-warm.log" 2>&1
echo "== brc 1e9 warm, 64 queue pairs rc=$?" >> "$S"; grep -E "^(file|CPU|HBM|zero-copy|scan)" "$W/brc-warm.log" | cut -c1-300 >> "$S"; keep
timeout 60 .devrun/bam-file-peers "$M" --peer uring --seq --bs 1M --depth 8 --threads 16 --seconds 3 > "$W/peer.log" 2>&1
echo "== peer: CPU io_uring, page cache, 1 MiB, 16 threads" >> "$S"; cut -c1-300 "$W/peer.log" >> "$S"; keep
rm -rf "$F"
cat "$S"
