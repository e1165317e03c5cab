#!/usr/bin/env bash
# Run 22: registered io_uring buffers against plain ones. Each service thread registers
# its queues' staging with its ring and reads with READ_FIXED when BAM_FILE_FIXED_BUFFERS
# is set (the experiment of the commit this ran at). Random 4 KiB and sequential 1 MiB
# reads of a page-cached 4 GiB file, 8 workers, plain and fixed alternating, twice.
NAME=file22
source benches/baselines/device-prelude.sh
use_bins
data_dir
file_bench verify "file:$F/d.bin,size=4G" --rw randread --bs 4K --threads 16384 --queues 64 --runtime 2 --verify
for r in 1 2; do
  for f in plain fixed; do
    if [ $f = fixed ]; then export BAM_FILE_FIXED_BUFFERS=1; else unset BAM_FILE_FIXED_BUFFERS; fi
    TOP=1 file_bench r4k-$f-$r "file:$F/d.bin,workers=8" --rw randread --bs 4K --threads 8192 --queues 32 --runtime 3
    file_bench s1m-$f-$r "file:$F/d.bin,workers=8" --rw read --bs 1M --threads 1024 --queues 64 --runtime 3
    grep -h "registering" "$W"/bench-*-$f-$r.log >> "$S"
  done
done
unset BAM_FILE_FIXED_BUFFERS
rm -rf "$F"
cat "$S"
