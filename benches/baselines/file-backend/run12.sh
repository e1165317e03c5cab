#!/usr/bin/env bash
# Twelfth run: TPC-H Q1/Q6 (SF 30) through the file backend with more staging
# (staging=SIZE), larger chunks, more workers and forwarder SMs, beside the simulated
# array in the same call; then the billion-row challenge cold (O_DIRECT) with the disk's
# sequential rate by CPU io_uring in the same call.
NAME=file12
source benches/baselines/device-prelude.sh
use_bins
data_dir; T=$F/lineitem.tbl
timeout 90 "$D/tpch-scan" --sf 30 --write-table "$T" --json "$W/tpch-sim.json" > "$W/tpch-sim.log" 2>&1
echo "== tpch SF 30, simulated SSDs (host media) rc=$?" >> "$S"; grep -E "^(Q1|Q6 from)" "$W/tpch-sim.log" | cut -c1-200 >> "$S"; keep
for v in "staging=256M 262144" "staging=1G 262144" "staging=1G 524288" "staging=2G 1048576" "staging=1G,workers=16 524288" "staging=1G,sms=8 524288"; do
  set -- $v
  timeout 60 "$D/tpch-scan" --sf 30 --chunk-rows $2 --device "file:$T,workers=8,$1" --json "$W/tpch-file-$1-$2.json" > "$W/tpch-file-$1-$2.log" 2>&1
  echo "== tpch SF 30, file backend $1, chunk rows $2 rc=$?" >> "$S"; grep -E "^(Q1|Q6 from|FAIL)|rror|answers" "$W/tpch-file-$1-$2.log" | cut -c1-200 >> "$S"; keep
done
rm -f "$T"
M=$F/measurements.txt
timeout 200 "$D/billion-rows" --rows 1e9 --write-file "$M" --runs 2 --device "file:$M,direct,workers=8" \
  --json "$W/brc-file-cold.json" > "$W/brc-cold.log" 2>&1
echo "== brc 1e9 cold (O_DIRECT) rc=$?" >> "$S"; grep -E "^(file|CPU|scan|reading)" "$W/brc-cold.log" | cut -c1-300 >> "$S"; keep
timeout 40 .devrun/bam-file-peers "$M" --peer uring --direct --seq --bs 1M --depth 8 --threads 8 --seconds 5 > "$W/peer-disk.log" 2>&1
echo "== peer: the disk by CPU io_uring, O_DIRECT, 1 MiB, 8 threads, QD 8" >> "$S"; cut -c1-300 "$W/peer-disk.log" >> "$S"; keep
rm -rf "$F"
cat "$S"
