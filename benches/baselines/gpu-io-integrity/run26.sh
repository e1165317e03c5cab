#!/usr/bin/env bash
# Issue 41, call 26 (8323cf1): the review's cache races F11, F12, F19. Their three tests
# with a build whose three fixes are taken out (.devrun/before/bam-cache-tests) and with
# this commit, on both backends; the cache suites on both backends; 512 B IOPS; the cache study (hits, one miss) of 2c0f968 (before/bam) and
# of this commit, alternating.
NAME=i41run26
source benches/baselines/device-prelude.sh
for b in sim hostctl; do
  for f in "fill-ring ticket" "unpinned read across" "resident stores during"; do
    for bin in before/bam-cache-tests bam-cache-tests; do
      tag=${bin//\//-}-$b-${f// /_}
      BAM_CACHE_TEST="$f" timeout 60 "$D/$bin" $b > "$W/$tag.log" 2>&1
      echo "== $bin $b '$f' rc=$?" >> "$S"; grep -E "^(PASS|FAIL)" "$W/$tag.log" | cut -c1-500 >> "$S"; keep
    done
  done
done
cache_tests bam-cache-tests sim
cache_tests bam-cache-tests hostctl
iops bam r26
miss_latency before/bam old1
miss_latency bam new1
miss_latency before/bam old2
miss_latency bam new2
cat "$S"
