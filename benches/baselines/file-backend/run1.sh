#!/usr/bin/env bash
# The file backend's first run on the GPU machine: the GPU I/O and cache trials on files
# (page cache and O_DIRECT) in a folder on the machine's disk, then `bam bench` reading a
# 4 GiB file of the pattern: verified, then 4 KiB random reads page-cached with 4, 8 and
# 16 service threads, 1 MiB sequential reads, and 4 KiB random reads with O_DIRECT.
NAME=file1
source benches/baselines/device-prelude.sh
mkdir -p /tmp/bins && tar xJf .devrun/bins.tar.xz -C /tmp/bins && D=/tmp/bins
F=$PWD/.devrun-data; mkdir -p "$F"
export BAM_TEST_FILE_DIR=$F
{ echo "== where the files are"; df -hT "$F" /tmp | tail -n +1; nproc; uname -r; } >> "$S"
trials() { # BIN FILTER TAG SECONDS
  timeout "$4" "$D/$1" --nocapture "$2" > "$W/$3.log" 2>&1
  echo "== $1 '$2' rc=$?" >> "$S"; grep -E "^test result|FAILED|panicked" "$W/$3.log" | cut -c1-300 | head -20 >> "$S"; keep
}
trials gpu "file " gpu-file 150
trials gpu "file-direct " gpu-file-direct 150
trials cache_gpu "file " cache-file 200
bench() { # TAG DEVICE ARGS...
  local tag=$1 dev=$2; shift 2
  timeout 60 "$D/bam" bench --device "$dev" "$@" --output "$W/bench-$tag.json" > "$W/bench-$tag.log" 2>&1
  echo "== bench $tag rc=$? ($dev $*)" >> "$S"; grep -iE "iops|GB/s|error|verif" "$W/bench-$tag.log" | head -6 >> "$S"; keep
}
bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 2 --verify
bench rand4k-w4 "file:$F/d.bin,workers=4" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 3
bench rand4k-w8 "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 3
bench rand4k-w16 "file:$F/d.bin,workers=16" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 3
bench rand4k-w8-sms4 "file:$F/d.bin,workers=8,sms=4" --rw randread --bs 4K --threads 65536 --queues 128 --runtime 3
bench seq1m-w8 "file:$F/d.bin,workers=8" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
bench seq1m-w16 "file:$F/d.bin,workers=16" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
sync
bench direct4k-w8 "file:$F/d.bin,direct,workers=8" --rw randread --bs 4K --threads 4096 --queues 64 --runtime 3
rm -rf "$F"
cat "$S"
