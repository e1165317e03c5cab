#!/usr/bin/env bash
# Fifth call: the cache tests at 20837f9 (after the review's refactors of the launchers),
# simulated array and host-side controller.
set -u
O=${OUT:-/tmp/out}; W=/tmp/res5-$$; mkdir -p $O $W
keep() { tar czf $O/resident5.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
for be in sim hostctl; do
  timeout 200 .devrun/bam-cache-tests-r $be > $W/cache-tests-$be.log 2>&1
  echo "== cache tests $be rc=$? ($(grep -c '^PASS' $W/cache-tests-$be.log) PASS)" >> $S
  grep -E "^(FAIL|SKIPPED)|^PASS.*resident view" $W/cache-tests-$be.log | cut -c1-220 >> $S; keep
done
cat $S
