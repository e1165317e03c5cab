#!/usr/bin/env bash
# Second run: after the service takes requests fairly across its queues, queue recovery on
# files, and 8 KiB in flight per warp copy. The trials (both modes, both suites), then
# `bam bench` reading a 4 GiB file of the pattern: verified, then 4 KiB random reads
# page-cached (service threads, queues, GPU threads, SMs varied; `top` of the service
# threads beside each), 1 MiB sequential reads, and 4 KiB random reads with O_DIRECT.
NAME=file2
source benches/baselines/device-prelude.sh
use_bins
data_dir
{ echo "== where the files are"; df -hT "$F" /tmp | tail -n +1; nproc; uname -r; } >> "$S"
trials gpu "file " gpu-file 150
trials gpu "file-direct " gpu-file-direct 150
trials cache_gpu "file " cache-file 200
trials cache_gpu "file-direct " cache-file-direct 200
bench() { # TAG DEVICE ARGS...
  local tag=$1 dev=$2; shift 2
  ( sleep 2; top -b -H -n 1 -w 200 | head -30 > "$W/top-$tag.txt" ) &
  timeout 60 "$D/bam" bench --device "$dev" "$@" --output "$W/bench-$tag.json" > "$W/bench-$tag.log" 2>&1
  echo "== bench $tag rc=$? ($dev $*)" >> "$S"; grep -iE "iops|GB/s|error|verif" "$W/bench-$tag.log" | head -4 >> "$S"; grep -E "bam-file|bam " "$W/top-$tag.txt" | head -4 >> "$S"; keep
}
bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 2 --verify
bench rand4k-w4 "file:$F/d.bin,workers=4" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 3
bench rand4k-w8 "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 3
bench rand4k-w16 "file:$F/d.bin,workers=16" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 3
bench rand4k-w8-q16 "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 65536 --queues 16 --runtime 3
bench rand4k-w8-t16k "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 3
bench rand4k-w8-sms1 "file:$F/d.bin,workers=8,sms=1" --rw randread --bs 4K --threads 65536 --queues 64 --runtime 3
bench rand4k-w8-sms4 "file:$F/d.bin,workers=8,sms=4" --rw randread --bs 4K --threads 65536 --queues 128 --runtime 3
bench seq1m-w8 "file:$F/d.bin,workers=8" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
bench seq1m-w16 "file:$F/d.bin,workers=16" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
sync
bench direct4k-w8 "file:$F/d.bin,direct,workers=8" --rw randread --bs 4K --threads 4096 --queues 64 --runtime 3
rm -rf "$F"
cat "$S"
