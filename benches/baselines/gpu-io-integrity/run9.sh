#!/usr/bin/env bash
# Issue 41, call 9 (d945bcc): the 1-SSD host-media case with 8 queues of 64, 512 B GPU
# stores, that did not finish within the bound of calls 5 and 8: once, given 200 s.
NAME=i41run9
source benches/baselines/device-prelude.sh
CASE="sim:ideal,ssds=1,media=host q8 d64 line 512 1x1000M Stripe Stores"
timeout 200 "$D/bam-cache-tests" --stress 1G 1 "$CASE" > "$W/q8d64.log" 2>&1
echo "== q8 d64 512 stores rc=$?" >> "$S"; grep -v "^cache test" "$W/q8d64.log" | head -40 | cut -c1-400 >> "$S"; keep
cat "$S"
