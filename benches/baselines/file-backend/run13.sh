#!/usr/bin/env bash
# Thirteenth run, at the session's last GPU build: the targets of run 3 again (4 KiB
# random and 1 MiB sequential reads of a page-cached 4 GiB file, with CPU io_uring,
# KvikIO and the pinned host-to-GPU copy in the same call), TPC-H SF 30 through the file
# backend with more depth and queue pairs, and the GPU I/O and cache trials on files
# (page cache and O_DIRECT) after namespaces were rounded up to whole buffer slots.
NAME=file13
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
F=$PWD/.devrun-data; mkdir -p "$F"
export BAM_TEST_FILE_DIR=$F
PY=/opt/torch/.venv/bin/python
bench() { # TAG DEVICE ARGS...
  local tag=$1 dev=$2; shift 2
  timeout 60 "$D/bam" bench --device "$dev" "$@" --output "$W/bench-$tag.json" > "$W/bench-$tag.log" 2>&1
  echo "== bench $tag rc=$? ($dev $*)" >> "$S"; grep -iE "iops|error|verif" "$W/bench-$tag.log" | head -3 >> "$S"; keep
}
peer() { # TAG ARGS...
  local tag=$1; shift
  timeout 60 .devrun/bam-file-peers "$F/d.bin" "$@" > "$W/peer-$tag.log" 2>&1
  echo "== peer $tag rc=$? ($*)" >> "$S"; cut -c1-400 "$W/peer-$tag.log" | tail -3 >> "$S"; keep
}
bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 2 --verify
for r in 1 2; do
  bench rand4k-w8-$r "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 3
done
bench rand4k-w8-q32-t8k "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 8192 --queues 32 --runtime 3
peer uring4k-t8 --peer uring --bs 4K --depth 32 --threads 8 --seconds 3
bench seq1m-w8 "file:$F/d.bin,workers=8" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
bench seq1m-w16 "file:$F/d.bin,workers=16" --rw read --bs 1M --threads 2048 --queues 64 --runtime 3
peer uring1m-t8 --peer uring --seq --bs 1M --depth 8 --threads 8 --seconds 3
$PY - >> "$S" 2>&1 <<'PYEOF'
import torch, time
h = torch.empty(1 << 30, dtype=torch.uint8).pin_memory(); d = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
for _ in range(3): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); s = time.perf_counter() - t
print(f"== pinned H2D copy: {10 * (1 << 30) / s / 1e9:.2f} GB/s (10 x 1 GiB)")
PYEOF
keep
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
trials() { # BIN FILTER TAG SECONDS
  timeout "$4" "$D/$1" --nocapture "$2" > "$W/$3.log" 2>&1
  echo "== $1 '$2' rc=$?" >> "$S"; grep -E "^test result|^FAIL|panicked" "$W/$3.log" | cut -c1-300 | head -10 >> "$S"; keep
}
trials gpu "file " gpu-file 100
trials gpu "file-direct " gpu-file-direct 100
trials cache_gpu "file " cache-file 120
trials cache_gpu "file-direct " cache-file-direct 120
rm -rf "$F"
cat "$S"
