#!/usr/bin/env bash
# Resident views (Array::make_resident): cache tests, the kernel suite with the resident
# variants, and a same-call A/B of the ordinary paths against the library before the change
# (bam-base: 77f407a; bam-r: 3f84051), then the GPU I/O tests and a full suite run.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/res-$$; mkdir -p $O $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt
S=$W/summary.log
keep() { tar czf $O/resident.tgz -C $W .; }
s0=$(date +%s)
timeout 300 .devrun/bam-cache-tests-r sim > $W/cache-tests-r.log 2>&1; echo "== cache tests rc=$? ($(( $(date +%s) - s0 )) s)" >> $S
grep -E "^(PASS|FAIL|SKIPPED)" $W/cache-tests-r.log | cut -c1-160 >> $S; keep
for k in 1 2; do for b in bam-base bam-r; do
  V=hbm,zerocopy,bam-hit,bam-hit-8,bam-quarter-8
  [ $b = bam-r ] && V=hbm,zerocopy,bam-hit,bam-hit-8,bam-resident,bam-resident-8,bam-quarter-8
  s0=$(date +%s)
  [ $b = bam-base ] && export BAM_COMMIT=77f407a || unset BAM_COMMIT
  timeout 200 .devrun/$b bench kernels --no-uvm --variants $V --output $W/k-$b-$k.json > $W/k-$b-$k.log 2>&1 || echo "KERNELS $b $k FAILED" >> $S
  echo "== kernels $b $k ($(( $(date +%s) - s0 )) s)" >> $S
  grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/k-$b-$k.log >> $S; keep
done; done
for k in 1 2; do for b in bam-base bam-r; do
  s0=$(date +%s)
  [ $b = bam-base ] && export BAM_COMMIT=77f407a || unset BAM_COMMIT
  timeout 120 .devrun/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE BENCH $b $k FAILED" >> $S
  echo "== cache $b $k ($(( $(date +%s) - s0 )) s)" >> $S
  grep -E "^(hit|miss)|latency" $W/cache-$b-$k.log >> $S; keep
done; done
s0=$(date +%s)
timeout 200 .devrun/bam-gpu-tests-r --rounds 1 --backend sim > $W/gpu-tests-r.log 2>&1; echo "== gpu tests rc=$? ($(( $(date +%s) - s0 )) s)" >> $S
tail -4 $W/gpu-tests-r.log >> $S; keep
s0=$(date +%s)
timeout 170 .devrun/bam-r bench kernels --output $W/full-r.json --plot $W/full-r.svg > $W/full-r.log 2>&1; echo "== full suite rc=$? ($(( $(date +%s) - s0 )) s)" >> $S
grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/full-r.log >> $S; keep
cat $S
