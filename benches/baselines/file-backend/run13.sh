#!/usr/bin/env bash
# Thirteenth run, at the session's last GPU build: the targets of run 3 again (4 KiB
# random and 1 MiB sequential reads of a page-cached 4 GiB file, with CPU io_uring,
# KvikIO and the pinned host-to-GPU copy in the same call), TPC-H SF 30 through the file
# backend with more depth and queue pairs, and the GPU I/O and cache trials on files
# (page cache and O_DIRECT) after namespaces were rounded up to whole buffer slots.
NAME=file13
source benches/baselines/device-prelude.sh
use_bins
data_dir
PY=/opt/torch/.venv/bin/python
file_bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 2 --verify
for r in 1 2; do
  file_bench rand4k-w8-$r "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 3
done
file_bench rand4k-w8-q32-t8k "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 8192 --queues 32 --runtime 3
file_peer "$F/d.bin" uring4k-t8 --peer uring --bs 4K --depth 32 --threads 8 --seconds 3
file_bench seq1m-w8 "file:$F/d.bin,workers=8" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
file_bench seq1m-w16 "file:$F/d.bin,workers=16" --rw read --bs 1M --threads 2048 --queues 64 --runtime 3
file_peer "$F/d.bin" uring1m-t8 --peer uring --seq --bs 1M --depth 8 --threads 8 --seconds 3
pinned_copy
bash benches/file-peers/install-wheels.sh .devrun/kvikio-wheels /tmp/kvikio-py > "$W/kvikio-install.log" 2>&1
echo "== kvikio install rc=$?" >> "$S"
.devrun/bam-file-peers "$F/d.bin" --emit-offsets /tmp/offsets.bin --ops 200000 --bs 4K > /dev/null 2>&1
for a in "--offsets /tmp/offsets.bin --threads 8" "--large --threads 16"; do
  KVIKIO_COMPAT_MODE=ON PYTHONPATH=/tmp/kvikio-py timeout 90 $PY benches/file-peers/kvikio_read.py "$F/d.bin" $a > "$W/kvikio.log" 2>&1
  echo "== kvikio $a rc=$?" >> "$S"; tail -2 "$W/kvikio.log" | cut -c1-400 >> "$S"; keep
done
rm -f "$F/d.bin"
T=$F/lineitem.tbl
timeout 60 "$D/tpch-scan" --sf 30 --write-table "$T" --runs 3 > "$W/tpch-sim.log" 2>&1
echo "== tpch SF 30, simulated SSDs (host media) rc=$?" >> "$S"; grep -E "^(Q1|Q6 from)" "$W/tpch-sim.log" | cut -c1-200 >> "$S"; keep
for v in "--queues 64" "--queues 128" "--depth 6" "--depth 8 --queues 128"; do
  timeout 45 "$D/tpch-scan" --sf 30 --runs 3 $v --device "file:$T,workers=8" > "$W/tpch-file.log" 2>&1
  echo "== tpch SF 30, file backend $v rc=$?" >> "$S"; grep -E "^(Q1|Q6 from|FAIL)|rror" "$W/tpch-file.log" | cut -c1-200 >> "$S"; keep
done
rm -f "$T"
trials gpu "file " gpu-file 100
trials gpu "file-direct " gpu-file-direct 100
trials cache_gpu "file " cache-file 120
trials cache_gpu "file-direct " cache-file-direct 120
rm -rf "$F"
cat "$S"
