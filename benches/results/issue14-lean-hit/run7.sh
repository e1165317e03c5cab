#!/usr/bin/env bash
# Call 7: rmw with a quarter of its data cached and more fill-service blocks (each block
# an SM; every rmw miss writes a dirty line back before it reads), against uvm-4x in the
# same process: --fill-blocks 8 (the default), 12, 16, two rounds; 7941d03.
NAME=lean7
source benches/results/device-prelude.sh
for k in 1 2; do for fb in 8 12 16; do
  timeout 120 "$D/bam-rec" bench kernels --kernels rmw --fill-blocks $fb \
    --variants hbm,zerocopy,bam-quarter,bam-quarter-8,uvm-4x --output "$W/rmw-fb$fb-$k.json" > "$W/rmw-fb$fb-$k.log" 2>&1 || echo "RMW fb$fb FAILED" >> "$S"
  echo "== rmw fill-blocks $fb round $k" >> "$S"; grep -E "^rmw " "$W/rmw-fb$fb-$k.log" >> "$S"; keep
done; done
cat "$S"
