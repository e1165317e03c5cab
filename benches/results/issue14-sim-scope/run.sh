#!/usr/bin/env bash
# `run.sh 1`: the simulated controller without the multi-GPU branches in its loop for
# single-GPU arrays (bam-new, fd55d54) against the library before it (bam, 204b40b) and
# the commit the issue's 563 M IOPS came from (bam-old, 7064454), same call, alternating:
# cache tests (sim) and GPU tests of bam-new; 512 B IOPS with the issue's command
# (131,072 threads, 128 queues, 0.5 s) and the full record's (32,768 threads,
# verified); 4 KiB IOPS; the cache study once each and the suite's quarter-cache
# variants (host-media fills) once each for bam and bam-new.
set -u
export CUDA_MODULE_LOADING=EAGER
N=${1:?call number}
O=${OUT:-/tmp/out}; W=/tmp/scope$N-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/scope$N.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
timeout 200 $D/bam-cache-tests-new sim > $W/cache-tests-sim.log 2>&1
echo "== cache tests sim rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)" $W/cache-tests-sim.log | cut -c1-600 >> $S; keep
timeout 100 $D/bam-gpu-tests-new --rounds 1 --backend sim > $W/gpu-tests.log 2>&1
echo "== gpu tests rc=$?" >> $S; tail -1 $W/gpu-tests.log >> $S; keep
for k in 1 2; do for b in bam bam-new bam-old; do
  timeout 40 $D/$b bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 --threads 131072 \
    --runtime 0.5 --output $W/iops-issue-$b-$k.json > $W/iops-issue-$b-$k.log 2>&1 || echo "IOPS issue $b FAILED" >> $S
  echo "== iops 512 (issue's command) $b $k" >> $S; grep -iE "iops" $W/iops-issue-$b-$k.log | head -2 >> $S
  timeout 40 $D/$b bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --threads 32768 \
    --runtime 1 --verify > $W/iops-record-$b-$k.log 2>&1 || echo "IOPS record $b FAILED" >> $S
  echo "== iops 512 (record's command) $b $k" >> $S; grep -iE "iops" $W/iops-record-$b-$k.log | head -2 >> $S; keep
done; done
for b in bam bam-new; do
  timeout 40 $D/$b bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 4k --threads 32768 \
    --runtime 1 --verify > $W/iops-4k-$b.log 2>&1 || echo "IOPS 4k $b FAILED" >> $S
  echo "== iops 4k $b" >> $S; grep -iE "iops" $W/iops-4k-$b.log | head -2 >> $S; keep
  timeout 75 $D/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b.json > $W/cache-$b.log 2>&1 || echo "CACHE $b FAILED" >> $S
  echo "== cache $b" >> $S; grep -E "latency" $W/cache-$b.log >> $S; keep
  timeout 100 $D/$b bench kernels --no-uvm --variants hbm,zerocopy,bam-quarter,bam-quarter-8 \
    --output $W/k-$b.json > $W/k-$b.log 2>&1 || echo "KERNELS $b FAILED" >> $S
  echo "== kernels $b" >> $S; grep -E "^(spmv|bfs|gather|histogram|rmw) " $W/k-$b.log >> $S; keep
done
cat $S
