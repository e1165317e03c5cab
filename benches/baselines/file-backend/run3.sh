#!/usr/bin/env bash
# Third run: the file backend against its peers on the same 4 GiB file in one call.
# GPU threads reading it with `bam bench` (page cache: 4 KiB random, 1 MiB sequential;
# O_DIRECT: 4 KiB random), then the peers on the same file: CPU io_uring (fio's engine,
# bam-file-peers uring), pread + cuMemcpyHtoD (bam-file-peers pread-memcpy), KvikIO 26.10
# in compatibility mode (kvikio_read.py), and pinned host-to-GPU copy bandwidth (torch).
# Then the GPU I/O trials on files again (after the forwarder sizes its SMs itself).
NAME=file3
source benches/baselines/device-prelude.sh
use_bins
data_dir
PY=/opt/torch/.venv/bin/python
{ $PY -V; nproc; free -g | head -2; } >> "$S" 2>&1
TOP=1
# The file: 4 GiB of the pattern, written by the first run (verified reads), page-cached.
file_bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 2 --verify
for r in 1 2; do
  file_bench rand4k-w8-$r "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 3
done
file_bench rand4k-w4 "file:$F/d.bin,workers=4" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 3
file_bench rand4k-w16 "file:$F/d.bin,workers=16" --rw randread --bs 4K --threads 32768 --queues 64 --runtime 3
file_bench rand4k-w8-q32-t8k "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 8192 --queues 32 --runtime 3
file_peer "$F/d.bin" uring4k-t4 --peer uring --bs 4K --depth 32 --threads 4 --seconds 3
file_peer "$F/d.bin" uring4k-t8 --peer uring --bs 4K --depth 32 --threads 8 --seconds 3
file_peer "$F/d.bin" uring4k-t16 --peer uring --bs 4K --depth 32 --threads 16 --seconds 3
file_peer "$F/d.bin" pread4k-t8 --peer pread-memcpy --bs 4K --threads 8 --seconds 3
file_peer "$F/d.bin" pread4k-t16 --peer pread-memcpy --bs 4K --threads 16 --seconds 3
for s in 2 4 8; do
  file_bench seq1m-w8-sms$s "file:$F/d.bin,workers=8,sms=$s" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
done
file_bench seq1m-w16-sms4 "file:$F/d.bin,workers=16,sms=4" --rw read --bs 1M --threads 2048 --queues 64 --runtime 3
file_peer "$F/d.bin" uring1m-t16 --peer uring --seq --bs 1M --depth 8 --threads 16 --seconds 3
file_peer "$F/d.bin" pread1m-t8 --peer pread-memcpy --seq --bs 1M --threads 8 --seconds 3
# KvikIO on the same file.
bash benches/file-peers/install-wheels.sh .devrun/kvikio-wheels /tmp/kvikio-py > "$W/kvikio-install.log" 2>&1
echo "== kvikio install rc=$?" >> "$S"
.devrun/bam-file-peers "$F/d.bin" --emit-offsets /tmp/offsets.bin --ops 200000 --bs 4K > /dev/null 2>&1
for a in "--offsets /tmp/offsets.bin --threads 8" "--large --threads 8" "--large --threads 16"; do
  KVIKIO_COMPAT_MODE=ON PYTHONPATH=/tmp/kvikio-py timeout 90 $PY benches/file-peers/kvikio_read.py "$F/d.bin" $a > "$W/kvikio.log" 2>&1
  echo "== kvikio $a rc=$?" >> "$S"; tail -2 "$W/kvikio.log" | cut -c1-400 >> "$S"; keep
done
pinned_copy
sync
file_bench direct4k-w8 "file:$F/d.bin,direct,workers=8" --rw randread --bs 4K --threads 4096 --queues 64 --runtime 3
file_peer "$F/d.bin" uring4k-direct-t8 --peer uring --direct --bs 4K --depth 32 --threads 8 --seconds 3
file_bench directseq1m "file:$F/d.bin,direct,workers=8" --rw read --bs 1M --threads 256 --queues 32 --runtime 3
file_peer "$F/d.bin" uring1m-direct-t8 --peer uring --direct --seq --bs 1M --depth 8 --threads 8 --seconds 3
timeout 150 "$D/gpu" --nocapture "file " > "$W/gpu-file.log" 2>&1
echo "== gpu 'file ' rc=$?" >> "$S"; grep -E "^test result|^FAIL" "$W/gpu-file.log" | cut -c1-300 >> "$S"; keep
rm -rf "$F"
cat "$S"
