#!/usr/bin/env bash
# Sixth run: why the "warm" 1BRC scan of run 5 read at the disk's rate. The machine's
# memory limits, and a CPU io_uring read (bam-file-peers, page cache, 1 MiB, 16 threads)
# of the 14.9 GB file just written, twice: at page-cache speed only if the file stays
# cached. Then the challenge with 3e8 rows (4.5 GB), warm, through the file backend.
NAME=file6
source benches/baselines/device-prelude.sh
data_dir; M=$F/measurements.txt
{ free -g; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.high 2>&1; cat /proc/sys/vm/dirty_ratio /proc/sys/vm/dirty_background_ratio; } >> "$S" 2>&1
timeout 200 .devrun/billion-rows --rows 1e9 --write-file "$M" --no-check --runs 1 --device "file:$M,workers=8" > "$W/brc-1e9.log" 2>&1
echo "== brc 1e9 rc=$?" >> "$S"; grep -E "^(wrote|scan)" "$W/brc-1e9.log" | cut -c1-300 >> "$S"
{ free -g; grep -E "^(Cached|Dirty|Writeback):" /proc/meminfo; } >> "$S"
for r in 1 2; do
  timeout 60 .devrun/bam-file-peers "$M" --peer uring --seq --bs 1M --depth 8 --threads 16 --seconds 3 > "$W/peer-$r.log" 2>&1
  echo "== peer buffered seq read $r" >> "$S"; cut -c1-300 "$W/peer-$r.log" >> "$S"; keep
done
grep -E "^(Cached|Dirty):" /proc/meminfo >> "$S"
rm -f "$M"
timeout 200 .devrun/billion-rows --rows 3e8 --write-file "$M" --device "file:$M,workers=8" --json "$W/brc-3e8-warm.json" > "$W/brc-3e8.log" 2>&1
echo "== brc 3e8 warm rc=$?" >> "$S"; grep -E "^(file|zero-copy|HBM|scan)" "$W/brc-3e8.log" | cut -c1-300 >> "$S"; keep
rm -rf "$F"
cat "$S"
