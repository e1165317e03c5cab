#!/bin/bash
# Which process histories put the plain baselines in their slow mode? (binary of 85c7553)
cd "$(dirname "$0")"
export BAM_COMMIT=85c7553
R=$OUT/m; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 250 > $R/smi.csv 2>&1 &
SMI=$!
run() { # tag, args...
  local tag=$1; shift
  echo "== $tag $(date +%T.%N)" | tee -a $R/index.txt
  ./bam-p -q bench kernels "$@" --output $R/$tag.json > $R/$tag.log 2>&1; echo "rc=$?" >> $R/$tag.log
  grep -E "^(spmv|bfs|gather|histogram|rmw) +(hbm|zerocopy)" $R/$tag.log | tee -a $R/index.txt
}
for r in 1 2; do
  run rmw-hbm-$r --kernels rmw --variants hbm --reps 5
  run rmw-hbmzc-$r --kernels rmw --variants hbm,zerocopy --reps 5
  run hist-hbm-$r --kernels histogram --variants hbm --reps 5
  run hist-hbmzc-$r --kernels histogram --variants hbm,zerocopy --reps 5
done
run plain4 --kernels spmv,bfs,gather,histogram --variants hbm,zerocopy
run plain4-uvm --kernels spmv,bfs,gather,histogram --variants hbm,zerocopy,uvm-2x,uvm-4x --budget 3
run plain4-hit --kernels spmv,bfs,gather,histogram --no-uvm --variants hbm,zerocopy,bam-hit
kill $SMI
tar czf $OUT/modes.tgz -C $OUT m && rm -rf $R
