#!/usr/bin/env bash
# The shared controller instantiation (bam_sim_controller_shared, fd55d54) on two GPUs:
# the multi-GPU tests (an array shared by both GPUs on both backends) and a verified
# 4 KiB read run of both GPUs on one shared simulated array.
set -u
export CUDA_MODULE_LOADING=EAGER
O=${OUT:-/tmp/out}; W=/tmp/scopex2-$$; mkdir -p $O $W
D=.devrun
keep() { tar czf $O/scopex2.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt
S=$W/summary.log
cat $W/gpu.txt >> $S
timeout 300 $D/bam-multi-gpu-tests-new > $W/multi-gpu-tests.log 2>&1
echo "== multi-gpu tests rc=$?" >> $S; grep -E "^(PASS|FAIL|SKIPPED|all)" $W/multi-gpu-tests.log | cut -c1-300 >> $S; keep
timeout 60 $D/bam-new bench --gpus 0,1 --sharing shared --device sim:ideal,ssds=8,media=host,capacity=1G \
  --bs 4k --threads 65536 --verify > $W/bench-shared.log 2>&1
echo "== bench shared rc=$?" >> $S; grep -iE "iops" $W/bench-shared.log | head -4 >> $S; keep
cat $S
