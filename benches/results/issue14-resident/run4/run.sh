#!/usr/bin/env bash
# Fourth call: the cache tests of 0bb664e on the host-side controller backend (a real
# asynchronous device across PCIe): the resident-view test alone first, then the suite.
set -u
O=${OUT:-/tmp/out}; W=/tmp/res4-$$; mkdir -p $O $W
keep() { tar czf $O/resident4.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
BAM_CACHE_TEST=resident timeout 120 .devrun/bam-cache-tests-r hostctl > $W/cache-tests-hostctl-resident.log 2>&1
echo "== resident test, hostctl rc=$?" >> $S; grep -E "^(PASS|FAIL|SKIPPED)" $W/cache-tests-hostctl-resident.log | cut -c1-400 >> $S; keep
timeout 300 .devrun/bam-cache-tests-r hostctl > $W/cache-tests-hostctl.log 2>&1
echo "== cache tests, hostctl rc=$? ($(grep -c '^PASS' $W/cache-tests-hostctl.log) PASS)" >> $S
grep -E "^(FAIL|SKIPPED)" $W/cache-tests-hostctl.log | cut -c1-200 >> $S; keep
cat $S
