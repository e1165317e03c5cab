#!/bin/bash
# Line-size sweep of the random kernels with a quarter-size cache (binary of 8913307, one
# line size for every kernel then: --line; read-ahead 8, the suite's default then).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for L in 512 1K 4K; do
  ./bam-h -q bench kernels --kernels gather,bfs --no-uvm --variants hbm,zerocopy,bam-hit,bam-quarter,bam-quarter-8 --line $L --output $OUT/lines-$L.json > $OUT/lines-$L.log 2>&1
  echo "rc=$?" >> $OUT/lines-$L.log
  cat $OUT/lines-$L.log
done
