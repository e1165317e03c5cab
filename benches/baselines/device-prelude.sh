#!/usr/bin/env bash
# What every recorded device script of benches/baselines/ does, sourced by them: the
# output folder and its tarball, the GPU's name, and the steps the records repeat (cache
# and GPU tests, the cache study's one-miss latency, the kernel suite's runs, 512 B IOPS).
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
  echo "== suite $2" >> "$S"; grep -E "^(spmv|bfs|gather|histogram|rmw) .*bam" "$W/suite-$2.log" >> "$S"; keep
}

# iops BIN TAG: issue 14's 512 B IOPS row (ideal simulated SSDs, no cache).
iops() {
  timeout 40 "$D/$1" bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 \
    --threads 131072 --runtime 0.5 > "$W/iops-$2.log" 2>&1 || echo "IOPS $2 FAILED" >> "$S"
  echo "== iops 512 $2" >> "$S"; grep -iE "iops" "$W/iops-$2.log" | head -1 >> "$S"; keep
}
