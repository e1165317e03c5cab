#!/usr/bin/env bash
# Issue 41, call 30 (89b1f44, and a build of it whose DeviceBuffer::keep_unless_synced
# frees the buffers as before F8's fix: .devrun/pre/): F8's test before and after, both
# backends; the simulated array on a media file (issue 45, finding 3: the GPU mapping at
# the header's offset); GPU I/O tests; cache suites on both backends.
NAME=i41run30
source benches/baselines/device-prelude.sh
f="host wait that ends at its bound"
for b in sim hostctl; do
  for bin in pre/bam-cache-tests bam-cache-tests; do
    tag=${bin//\//-}-$b
    BAM_CACHE_TEST="$f" timeout 60 "$D/$bin" $b > "$W/f8-$tag.log" 2>&1
    echo "== F8 $bin $b rc=$?" >> "$S"; grep -E "^(PASS|FAIL)" "$W/f8-$tag.log" | cut -c1-600 >> "$S"; keep
  done
done
# media=file: verified reads and writes through the mapped files, the header intact,
# a second opener and another capacity refused.
M=/dev/shm/bam-sim-media; rm -f $M.*
dev="sim:ideal,ssds=2,media=file:$M,capacity=256M"
mf() { # TAG ARGS...: one bench on the media files
  local tag=$1; shift
  timeout 60 "$D/bam" bench "$@" > "$W/file-$tag.log" 2>&1; local rc=$?
  echo "== media file $tag rc=$rc" >> "$S"; grep -iE "iops|verif|error|refus|lock" "$W/file-$tag.log" | head -4 | cut -c1-300 >> "$S"
  for i in 0 1; do echo "   $M.$i: $(head -c 8 $M.$i) $(stat -c %s $M.$i) B" >> "$S"; done; keep
}
mf read --device "$dev" --rw randread --bs 4096 --verify --runtime 1
mf write --device "$dev" --rw randwrite --bs 4096 --verify --runtime 1
mf mixed --device "$dev" --rw randrw --bs 512 --verify --runtime 1
timeout 60 "$D/bam" bench --device "$dev" --rw randread --bs 4096 --runtime 6 > "$W/file-holder.log" 2>&1 &
sleep 3
mf second-opener --device "$dev" --rw randread --bs 4096 --runtime 1
wait
mf other-capacity --device "sim:ideal,ssds=2,media=file:$M,capacity=128M" --rw randread --bs 4096 --runtime 1
rm -f $M.*
gpu_tests bam-gpu-tests
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
cat "$S"
