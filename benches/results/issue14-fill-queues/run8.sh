#!/usr/bin/env bash
# Call 8: rmw's quarter-cache runs again, three times each alternating (run7 had one slow
# rmw `bam-quarter` run of the fill-queue build, 25.8 against 14.1 ms; earlier calls saw
# such runs of the library before, e.g. issue14-spare-overlap/run4 base-2, 19.2 ms).
NAME=fillq8
source benches/results/device-prelude.sh
for k in 1 2 3; do for b in spare fq; do suite bam-$b $b-$k rmw hbm,zerocopy,bam-quarter,bam-quarter-8; done; done
cat "$S"
