#!/usr/bin/env bash
# Call 3: which form to land. bam-prev (aab2ef4), bam-vote (aab2ef4's hit path, but the
# lanes that go on past it told by a vote of the calling lanes instead of __activemask();
# counting by a view flag), bam-rev (the lean read before it, as run2): every kernel's
# all-hits runs, three rounds in rotating order.
NAME=lean3
source benches/results/device-prelude.sh
for k in 1 2 3; do
  case $k in 1) o="prev vote rev";; 2) o="vote rev prev";; 3) o="rev prev vote";; esac
  for b in $o; do suite bam-$b hit-$b-$k spmv,bfs,gather,histogram,rmw hbm,zerocopy,bam-hit,bam-hit-8; done
done
cat "$S"
