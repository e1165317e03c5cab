#!/usr/bin/env bash
# Run 19: the warm billion-row challenge (1e9 rows, the file just written: page cache)
# through the file backend and DuckDB on the same file, in one call (run 10's 0.303 s had
# DuckDB only from runs 4 and 5). DuckDB's wheel: pip download duckdb==2.0.0 for CPython
# 3.12 into .devrun/whl (the GPU machine has no PyPI).
NAME=file19
source benches/baselines/device-prelude.sh
use_bins
data_dir; M=$F/measurements.txt
python3 -V >> "$S" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .devrun/whl/duckdb-*.whl \
  && export PYTHONPATH=/tmp/site
timeout 200 "$D/billion-rows" --rows 1e9 --write-file "$M" --device "file:$M,workers=8" \
  --json "$W/brc-file-warm.json" --output "$W/brc.txt" > "$W/brc-warm.log" 2>&1
echo "== brc 1e9 warm rc=$?" >> "$S"; grep -E "^(file|CPU|HBM|zero-copy|reading|scan)" "$W/brc-warm.log" | cut -c1-300 >> "$S"; keep
timeout 60 "$D/billion-rows" --input "$M" --no-check --device "file:$M,workers=8" --runs 3 > "$W/brc-warm2.log" 2>&1
echo "== brc 1e9 warm again, 3 runs rc=$?" >> "$S"; grep -E "^scan|rror" "$W/brc-warm2.log" | cut -c1-300 >> "$S"; keep
timeout 200 python3 examples/billion_rows/duckdb_peer.py "$M" --threads "$(nproc)" --runs 2 \
  --json "$W/brc-duckdb.json" --expect "$W/brc.txt" > "$W/duckdb.log" 2>&1
echo "== duckdb rc=$?" >> "$S"; tail -3 "$W/duckdb.log" | cut -c1-300 >> "$S"; keep
rm -rf "$F"
cat "$S"
