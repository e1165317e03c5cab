#!/usr/bin/env bash
# Fourth run: the billion-row challenge reading its measurements file in place through the
# file backend (billion-rows --device file:...), warm (the file just written: page cache)
# and cold (O_DIRECT), against the disk's sequential read rate (bam-file-peers, O_DIRECT
# 1 MiB, 8 threads) and DuckDB on the same file, in one call.
NAME=file4
source benches/baselines/device-prelude.sh
data_dir; M=$F/measurements.txt
python3 -V >> "$S" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .devrun/whl/duckdb-*.whl \
  && export PYTHONPATH=/tmp/site
# Warm: generated, written to the disk (it stays in the page cache), read in place.
timeout 300 .devrun/billion-rows --rows 1e9 --write-file "$M" --device "file:$M,workers=8" \
  --json "$W/brc-file-warm.json" --output "$W/brc.txt" > "$W/brc-warm.log" 2>&1
echo "== brc warm rc=$?" >> "$S"; grep -E "^(file|CPU|HBM|zero-copy|reading|scan)" "$W/brc-warm.log" | cut -c1-300 >> "$S"; keep
timeout 200 python3 examples/billion_rows/duckdb_peer.py "$M" --threads "$(nproc)" --runs 2 \
  --json "$W/brc-duckdb.json" --expect "$W/brc.txt" > "$W/duckdb.log" 2>&1
echo "== duckdb rc=$?" >> "$S"; tail -3 "$W/duckdb.log" | cut -c1-300 >> "$S"; keep
# The disk's sequential read rate, O_DIRECT, on the same file.
timeout 60 .devrun/bam-file-peers "$M" --peer uring --direct --seq --bs 1M --depth 8 --threads 8 --seconds 5 > "$W/disk.log" 2>&1
echo "== disk (uring O_DIRECT 1 MiB, 8 threads QD 8)" >> "$S"; cut -c1-300 "$W/disk.log" >> "$S"; keep
# Cold: the page cache dropped, the scan with O_DIRECT (the CPU reference reads the file
# again first).
sync; echo 3 > /proc/sys/vm/drop_caches
timeout 300 .devrun/billion-rows --input "$M" --device "file:$M,direct,workers=8" --runs 2 \
  --json "$W/brc-file-cold.json" > "$W/brc-cold.log" 2>&1
echo "== brc cold rc=$?" >> "$S"; grep -E "^(file|CPU|HBM|zero-copy|reading|scan)" "$W/brc-cold.log" | cut -c1-300 >> "$S"; keep
rm -rf "$F"
cat "$S"
