#!/bin/bash
# 512 B lines, quarter cache (binary of 8913307): simulator SMs, fill blocks, read-ahead.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for cfg in "16 8 8" "32 8 8" "16 16 8" "32 16 0" "48 16 0" "32 16 8"; do
  set -- $cfg
  tag="sim$1-fb$2-ra$3"
  ./bam-h -q bench kernels --kernels gather,bfs --no-uvm --variants hbm,zerocopy,bam-quarter --line 512 \
     --sim-sms $1 --fill-blocks $2 --readahead $3 --output $OUT/$tag.json > $OUT/$tag.log 2>&1
  echo "rc=$?" >> $OUT/$tag.log
  echo "== $tag"; grep -E "gather|bfs" $OUT/$tag.log
done
