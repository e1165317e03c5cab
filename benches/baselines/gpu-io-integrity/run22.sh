#!/usr/bin/env bash
# Issue 41, call 22: the fix of the combined doorbell for warp groups whose tickets came
# from two reservations. The new test (bam_push_mixed_group) with the build before the
# fix (.devrun/before: the test added, queue.cuh as at 579a3e6) and after it, on both
# backends; 512 B IOPS; the open 1-SSD host-media 64-entry 512 B store family, 6 x q1
# and 2 x q8.
NAME=i41run22
source benches/baselines/device-prelude.sh
for b in sim hostctl; do
  for bin in before/bam-gpu-tests bam-gpu-tests; do
    tag=${bin//\//-}
    timeout 60 "$D/$bin" --rounds 1 --backend $b "warp group" > "$W/$tag-$b.log" 2>&1
    echo "== $bin $b rc=$?" >> "$S"; grep -E "^(PASS|FAIL)" "$W/$tag-$b.log" | cut -c1-400 >> "$S"; keep
  done
done
iops bam r22
for q in 1 1 1 1 1 1 8 8; do
  CASE="sim:ideal,ssds=1,media=host q$q d64 line 512 1x1000M Stripe Stores"
  t0=$SECONDS
  timeout 50 "$D/bam-cache-tests" --stress 1G 1 "$CASE" > "$W/fam-q$q-$RANDOM.log" 2>&1
  echo "== family q$q rc=$? $((SECONDS - t0)) s" >> "$S"; keep
done
grep -hE "^(FAIL|PASS) stress" "$W"/fam-*.log | cut -c1-300 >> "$S"
grep -h "protocol violation" "$W"/fam-*.log | head -4 | cut -c1-300 >> "$S"
keep
cat "$S"
