#!/usr/bin/env bash
# Fifteenth run: where TPC-H's scan through the file backend loses to the billion-row
# scan — request size (`bam bench` reads of 128 KiB to 1 MiB with the same bytes in
# flight), forwarder SMs (polling warps), scan depth and chunk size, at the default
# staging.
NAME=file15
source benches/baselines/device-prelude.sh
use_bins
data_dir; T=$F/lineitem.tbl
head -c 4G /dev/zero > "$F/d.bin"
for a in "1M 1024" "256K 4096" "128K 8192"; do
  set -- $a
  timeout 40 "$D/bam" bench --device "file:$F/d.bin,workers=8" --rw read --bs $1 --threads $2 --queues 64 --runtime 3 > "$W/bench-$1.log" 2>&1
  echo "== bench read bs $1 threads $2 rc=$?" >> "$S"; grep -iE "iops|error" "$W/bench-$1.log" | head -2 >> "$S"; keep
done
rm -f "$F/d.bin"
timeout 60 "$D/tpch-scan" --sf 30 --write-table "$T" --runs 3 > "$W/tpch-sim.log" 2>&1
echo "== tpch SF 30, simulated SSDs rc=$?" >> "$S"; grep -E "^(Q1|Q6 from)" "$W/tpch-sim.log" | cut -c1-160 >> "$S"; keep
for v in "workers=8 --depth 3" "workers=8,sms=2 --depth 3" "workers=8,sms=4 --depth 1" "workers=8 --depth 2" "workers=8 --chunk-rows 524288" "workers=8 --threads 256" "workers=8 --depth 3"; do
  set -- $v; o=$1; shift
  timeout 45 "$D/tpch-scan" --sf 30 --runs 3 "$@" --device "file:$T,$o" > "$W/tpch-file.log" 2>&1
  echo "== tpch file $o $* rc=$?" >> "$S"; grep -E "^(Q1|Q6 from|FAIL)|rror" "$W/tpch-file.log" | cut -c1-160 >> "$S"; keep
done
rm -rf "$F"
cat "$S"
