#!/usr/bin/env bash
# Run 23: SQPOLL rings against plain ones. Each service thread's io_uring gets a kernel
# submission-polling thread when BAM_FILE_SQPOLL is set (the experiment of the commit this
# ran at). Random 4 KiB and sequential 1 MiB reads of a page-cached 4 GiB file, 8
# workers, plain and sqpoll alternating, twice; top's threads two seconds into each 4 KiB
# run (the service's bam-file threads and the kernel's iou-sqp threads).
NAME=file23
source benches/baselines/device-prelude.sh
use_bins
data_dir
file_bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 2 --verify
for r in 1 2; do
  for f in plain sqpoll; do
    if [ $f = sqpoll ]; then export BAM_FILE_SQPOLL=1; else unset BAM_FILE_SQPOLL; fi
    TOP=1 file_bench r4k-$f-$r "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 8192 --queues 32 --runtime 3
    file_bench s1m-$f-$r "file:$F/d.bin,workers=8" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
    grep -h "SQPOLL" "$W"/bench-*-$f-$r.log | sort | uniq -c >> "$S"
    echo "top r4k-$f-$r: $(grep -c iou-sqp "$W/top-r4k-$f-$r.txt") iou-sqp threads; %CPU bam-file $(awk '/bam-file/{s+=$9} END{print s}' "$W/top-r4k-$f-$r.txt"), iou-sqp $(awk '/iou-sqp/{s+=$9} END{print s+0}' "$W/top-r4k-$f-$r.txt")" >> "$S"
  done
done
unset BAM_FILE_SQPOLL
rm -rf "$F"
cat "$S"
