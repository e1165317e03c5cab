#!/usr/bin/env bash
# Third run: the file backend against its peers on the same 4 GiB file in one call.
# GPU threads reading it with `bam bench` (page cache: 4 KiB random, 1 MiB sequential;
# O_DIRECT: 4 KiB random), then the peers on the same file: CPU io_uring (fio's engine,
# bam-file-peers uring), pread + cuMemcpyHtoD (bam-file-peers pread-memcpy), KvikIO 26.10
# in compatibility mode (kvikio_read.py), and pinned host-to-GPU copy bandwidth (torch).
# Then the GPU I/O trials on files again (after the forwarder sizes its SMs itself).
NAME=file3
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
F=$PWD/.devrun-data; mkdir -p "$F"
export BAM_TEST_FILE_DIR=$F
PY=/opt/torch/.venv/bin/python
{ $PY -V; nproc; free -g | head -2; } >> "$S" 2>&1
bench() { # TAG DEVICE ARGS...
  local tag=$1 dev=$2; shift 2
  ( sleep 2; top -b -H -n 1 -w 200 | head -30 > "$W/top-$tag.txt" ) &
  timeout 60 "$D/bam" bench --device "$dev" "$@" --output "$W/bench-$tag.json" > "$W/bench-$tag.log" 2>&1
  echo "== bench $tag rc=$? ($dev $*)" >> "$S"; grep -iE "iops|error|verif" "$W/bench-$tag.log" | head -3 >> "$S"
  grep -cE "bam-file" "$W/top-$tag.txt" >> "$S"; keep
}
peer() { # TAG ARGS...
  local tag=$1; shift
  timeout 60 .devrun/bam-file-peers "$F/d.bin" "$@" > "$W/peer-$tag.log" 2>&1
  echo "== peer $tag rc=$? ($*)" >> "$S"; cut -c1-400 "$W/peer-$tag.log" | tail -3 >> "$S"; keep
}
# The file: 4 GiB of the pattern, written by the first run (verified reads), page-cached.
bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 2 --verify
for r in 1 2; do
  bench rand4k-w8-$r "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 3
done
bench rand4k-w4 "file:$F/d.bin,workers=4" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 3
bench rand4k-w16 "file:$F/d.bin,workers=16" --rw randread --bs 4K --threads 32768 --queues 64 --runtime 3
bench rand4k-w8-q32-t8k "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 8192 --queues 32 --runtime 3
peer uring4k-t4 --peer uring --bs 4K --depth 32 --threads 4 --seconds 3
peer uring4k-t8 --peer uring --bs 4K --depth 32 --threads 8 --seconds 3
peer uring4k-t16 --peer uring --bs 4K --depth 32 --threads 16 --seconds 3
peer pread4k-t8 --peer pread-memcpy --bs 4K --threads 8 --seconds 3
peer pread4k-t16 --peer pread-memcpy --bs 4K --threads 16 --seconds 3
for s in 2 4 8; do
  bench seq1m-w8-sms$s "file:$F/d.bin,workers=8,sms=$s" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
done
bench seq1m-w16-sms4 "file:$F/d.bin,workers=16,sms=4" --rw read --bs 1M --threads 2048 --queues 64 --runtime 3
peer uring1m-t16 --peer uring --seq --bs 1M --depth 8 --threads 16 --seconds 3
peer pread1m-t8 --peer pread-memcpy --seq --bs 1M --threads 8 --seconds 3
# KvikIO on the same file.
bash benches/file-peers/install-wheels.sh .devrun/kvikio-wheels /tmp/kvikio-py > "$W/kvikio-install.log" 2>&1
echo "== kvikio install rc=$?" >> "$S"
.devrun/bam-file-peers "$F/d.bin" --emit-offsets /tmp/offsets.bin --ops 200000 --bs 4K > /dev/null 2>&1
for a in "--offsets /tmp/offsets.bin --threads 8" "--large --threads 8" "--large --threads 16"; do
  KVIKIO_COMPAT_MODE=ON PYTHONPATH=/tmp/kvikio-py timeout 90 $PY benches/file-peers/kvikio_read.py "$F/d.bin" $a > "$W/kvikio.log" 2>&1
  echo "== kvikio $a rc=$?" >> "$S"; tail -2 "$W/kvikio.log" | cut -c1-400 >> "$S"; keep
done
# Pinned host -> GPU copy bandwidth, 1 GiB, the reference of the large-read target.
$PY - >> "$S" 2>&1 <<'PYEOF'
import torch, time
h = torch.empty(1 << 30, dtype=torch.uint8).pin_memory(); d = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
for _ in range(3): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); s = time.perf_counter() - t
print(f"== pinned H2D copy: {10 * (1 << 30) / s / 1e9:.2f} GB/s (10 x 1 GiB)")
PYEOF
sync
bench direct4k-w8 "file:$F/d.bin,direct,workers=8" --rw randread --bs 4K --threads 4096 --queues 64 --runtime 3
peer uring4k-direct-t8 --peer uring --direct --bs 4K --depth 32 --threads 8 --seconds 3
bench directseq1m "file:$F/d.bin,direct,workers=8" --rw read --bs 1M --threads 256 --queues 32 --runtime 3
peer uring1m-direct-t8 --peer uring --direct --seq --bs 1M --depth 8 --threads 8 --seconds 3
timeout 150 "$D/gpu" --nocapture "file " > "$W/gpu-file.log" 2>&1
echo "== gpu 'file ' rc=$?" >> "$S"; grep -E "^test result|^FAIL" "$W/gpu-file.log" | cut -c1-300 >> "$S"; keep
rm -rf "$F"
cat "$S"
