#!/usr/bin/env bash
# Call 1: (a) the out-of-line miss path's post as one CAS with the ring descriptor read in
# the claim's round trip (bam-lean, 10f8ac8) against the library before it (bam, 204b40b =
# 655e6f7 in crates/ and cuda/), same call, alternating: cache tests (sim) of bam-lean, the
# cache study three times each (one-miss latency; cla and random hit ratios, which the
# change may cost through the cla kernel's register allocation). (b) The 512 B IOPS check
# against the commit the issue's 563 M came from (bam-old, 7064454), with the command that
# number was measured with (131,072 threads, 128 queues, 0.5 s) and the one the closing
# record uses (32,768 threads, verified), twice each.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/lean1-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/lean1.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
timeout 200 $D/bam-cache-tests-lean sim > $W/cache-tests-sim.log 2>&1
echo "== cache tests sim (lean) rc=$? ($(grep -c '^PASS' $W/cache-tests-sim.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)" $W/cache-tests-sim.log | cut -c1-600 >> $S; keep
for k in 1 2 3; do for b in bam bam-lean; do
  timeout 75 $D/$b bench cache --hit-size 256M --miss-size 64M --threads 65536 \
    --output $W/cache-$b-$k.json > $W/cache-$b-$k.log 2>&1 || echo "CACHE $b $k FAILED rc=$?" >> $S
  echo "== cache $b $k" >> $S; grep -E "latency" $W/cache-$b-$k.log >> $S; keep
done; done
for k in 1 2; do for b in bam bam-old; do
  timeout 40 $D/$b bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 --threads 131072 \
    --runtime 0.5 --output $W/iops-issue-$b-$k.json > $W/iops-issue-$b-$k.log 2>&1 || echo "IOPS issue $b FAILED" >> $S
  echo "== iops (issue's command) $b $k" >> $S; grep -iE "iops" $W/iops-issue-$b-$k.log | head -2 >> $S
  timeout 40 $D/$b bench --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --threads 32768 \
    --runtime 1 --verify > $W/iops-record-$b-$k.log 2>&1 || echo "IOPS record $b FAILED" >> $S
  echo "== iops (record's command) $b $k" >> $S; grep -iE "iops" $W/iops-record-$b-$k.log | head -2 >> $S; keep
done; done
cat $S
