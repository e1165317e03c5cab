#!/usr/bin/env bash
# What every recorded device script of benches/baselines/ does, sourced by them: the
# output folder and its tarball, the GPU's name, and the steps the records repeat (cache
# and GPU tests, the cache study's one-miss latency, the kernel suite's runs, 512 B IOPS,
# named test trials, the file backend's benchmarks and peers, the pinned copy).
#
#   NAME=spares1; source benches/baselines/device-prelude.sh
#   miss_latency bam-base base-1     # .devrun/bam-base, logs as cache-base-1.*
#
# Binaries are in .devrun/ (built on the CPU machine, carried by the device tool). Every
# step appends its headline to $S (summary.log) and re-packs the tarball, so a call that
# runs out of time still returns what it measured.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}
W=/tmp/${NAME:?NAME}-$$
mkdir -p "$O" "$W"
D=.devrun
S=$W/summary.log
keep() { tar czf "$O/$NAME.tgz" -C "$W" .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > "$W/gpu.txt"
cat "$W/gpu.txt" >> "$S"

# cache_tests BIN BACKEND: the cache test suite (sim or hostctl).
cache_tests() {
  timeout 200 "$D/$1" "$2" > "$W/$1-$2.log" 2>&1
  echo "== $1 $2 rc=$? ($(grep -c '^PASS' "$W/$1-$2.log") PASS)" >> "$S"
  grep -E "^(FAIL|SKIPPED)|^PASS.*spare" "$W/$1-$2.log" | cut -c1-600 >> "$S"; keep
}

# gpu_tests BIN: the GPU I/O tests on the simulated array, one round.
gpu_tests() {
  timeout 100 "$D/$1" --rounds 1 --backend sim > "$W/$1.log" 2>&1
  echo "== $1 rc=$?" >> "$S"; tail -1 "$W/$1.log" >> "$S"; keep
}

# miss_latency BIN TAG: the cache study (hits, misses, one 4 KiB miss with its phases).
miss_latency() {
  timeout 75 "$D/$1" bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output "$W/cache-$2.json" > "$W/cache-$2.log" 2>&1 || echo "CACHE $2 FAILED" >> "$S"
  echo "== cache $2" >> "$S"; grep -E "^(hit|miss)|latency" "$W/cache-$2.log" >> "$S"; keep
}

# suite BIN TAG KERNELS VARIANTS: `bam bench kernels` without UVM.
suite() {
  timeout 200 "$D/$1" bench kernels --kernels "$3" --no-uvm --variants "$4" \
    --output "$W/suite-$2.json" > "$W/suite-$2.log" 2>&1 || echo "SUITE $2 FAILED" >> "$S"
  echo "== suite $2" >> "$S"; grep -E "^[a-z-]+ .*bam" "$W/suite-$2.log" >> "$S"; keep
}

# iops BIN TAG: issue 14's 512 B IOPS row (ideal simulated SSDs, no cache).
iops() {
  timeout 40 "$D/$1" bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 \
    --threads 131072 --runtime 0.5 > "$W/iops-$2.log" 2>&1 || echo "IOPS $2 FAILED" >> "$S"
  echo "== iops 512 $2" >> "$S"; grep -iE "iops" "$W/iops-$2.log" | head -1 >> "$S"; keep
}

# trials BIN FILTER TAG SECONDS: the named test trials of a test binary (`gpu`,
# `cache_gpu`, `multi_gpu` from .devrun/bins.tar.xz) whose names contain FILTER.
trials() {
  timeout "$4" "$D/$1" --nocapture "$2" > "$W/$3.log" 2>&1
  echo "== $1 '$2' rc=$?" >> "$S"
  grep -E "^test result|^FAIL|FAILED|panicked" "$W/$3.log" | cut -c1-400 | head -20 >> "$S"; keep
}

# pinned_copy: the pinned host-to-GPU copy bandwidth (10 x 1 GiB, PyTorch of the image),
# the reference of the file backend's large-read target.
pinned_copy() {
  /opt/torch/.venv/bin/python - >> "$S" 2>&1 <<'PYEOF'
import torch, time
h = torch.empty(1 << 30, dtype=torch.uint8).pin_memory(); d = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
for _ in range(3): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); s = time.perf_counter() - t
print(f"== pinned H2D copy: {10 * (1 << 30) / s / 1e9:.2f} GB/s (10 x 1 GiB)")
PYEOF
  keep
}

# file_bench TAG DEVICE ARGS...: `bam bench --device DEVICE ARGS` (a file device), its
# JSON kept; with TOP=1 the threads' `top` two seconds in, and how many are the service's.
file_bench() {
  local tag=$1 dev=$2; shift 2
  [ "${TOP:-0}" = 1 ] && ( sleep 2; top -b -H -n 1 -w 200 | head -30 > "$W/top-$tag.txt" ) &
  timeout 60 "$D/bam" bench --device "$dev" "$@" --output "$W/bench-$tag.json" > "$W/bench-$tag.log" 2>&1
  echo "== bench $tag rc=$? ($dev $*)" >> "$S"; grep -iE "iops|error|verif" "$W/bench-$tag.log" | head -3 >> "$S"
  [ "${TOP:-0}" = 1 ] && { wait; grep -cE "bam-file" "$W/top-$tag.txt" >> "$S"; }
  keep
}

# file_peer FILE TAG ARGS...: the peers of benches/file-peers (.devrun/bam-file-peers).
file_peer() {
  local file=$1 tag=$2; shift 2
  timeout 60 .devrun/bam-file-peers "$file" "$@" > "$W/peer-$tag.log" 2>&1
  echo "== peer $tag rc=$? ($*)" >> "$S"; cut -c1-400 "$W/peer-$tag.log" | tail -3 >> "$S"; keep
}

# use_bins: the binaries packed in .devrun/bins.tar.xz, unpacked; D points at them.
use_bins() { mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins; }

# data_dir: F, a folder on the machine's own disk for data files and the file trials'
# files (BAM_TEST_FILE_DIR); remove it at the end (rm -rf "$F").
data_dir() { F=$PWD/.devrun-data; mkdir -p "$F"; export BAM_TEST_FILE_DIR=$F; }

# user_programs: the porting guide's program (its page's host code and kernel) and the
# random-access example, both on the documented default path.
user_programs() {
  timeout 60 "$D/porting_guide_gpu" > "$W/porting.log" 2>&1
  echo "== porting guide's program rc=$?" >> "$S"; tail -2 "$W/porting.log" >> "$S"; keep
  timeout 60 "$D/random-access" > "$W/random-access.log" 2>&1
  echo "== random-access rc=$?" >> "$S"; grep -E "PASS|FAIL" "$W/random-access.log" | head -2 >> "$S"; keep
}
